"""The browser IDE (exec_daemon/rpc/ide.py) on the real daemon: code-server behind the daemon's
token, opened in a real headless Chromium (npm `playwright-core`, tests/web/ide.mjs).

code-server's install (npm registry + a native build: many minutes) is made once, by
`python -m exec_daemon.rpc.ide install VERSION` or DownloadCursorServer, in the default
--ide-folder; these tests link it into a folder of their own and skip without it (but the one
that needs no install). scripts/test-image runs them with the image's build (scripts/image/ide-tests).
"""

from __future__ import annotations

import contextlib
import json
import socket
import stat
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from exec_daemon.kernel.config import DEFAULT_IDE_FOLDER
from exec_daemon.rpc.ide import INSTALLED_MARK, installed_versions
from proto.agent.v1.control_pb2 import DownloadCursorServerRequest, WarmRemoteAccessServerRequest
from tests.daemon_process import RunningDaemon, free_port, running_daemon

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "web" / "ide.mjs"
CHROMIUM = Path("/usr/bin/chromium")
VERSIONS = installed_versions(DEFAULT_IDE_FOLDER)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def ide_folder(tmp_path: Path) -> Path:
    """A folder of the test's own holding (a link to) the cached install. Without one the test
    skips; scripts/test-image checks the same on the image, which has it (scripts/image/smoke.py)."""
    if not VERSIONS:
        pytest.skip(
            f"code-server is not installed in {DEFAULT_IDE_FOLDER}: "
            "python -m exec_daemon.rpc.ide install 4.139.1"
        )
    folder = tmp_path / "ide"
    folder.mkdir(mode=0o700)
    (folder / f"code-server-{VERSIONS[0]}").symlink_to(
        DEFAULT_IDE_FOLDER / f"code-server-{VERSIONS[0]}"
    )
    return folder


def ide_daemon(
    workspace: Path, tmp_path: Path, ide_folder: Path, port: int
) -> contextlib.AbstractContextManager[RunningDaemon]:
    return running_daemon(
        workspace,
        tmp_path / "state",
        "--ide-port",
        str(port),
        "--ide-folder",
        str(ide_folder),
    )


def status_of(url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return refused.code


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def raw_answer(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        return sock.recv(4096)


async def test_a_person_opens_the_workspace_in_the_ide(
    workspace: Path, tmp_path: Path, ide_folder: Path
) -> None:
    (workspace / "hello.txt").write_text("hello from the workspace\n")
    (workspace / "src").mkdir()
    (workspace / "src" / "main.py").write_text("print('hi')\n")
    port = free_port()
    screenshot = tmp_path / "ide.png"
    with ide_daemon(workspace, tmp_path, ide_folder, port) as daemon:
        async with daemon.client() as client:
            started = time.monotonic()
            warmed = await client.control.warm_remote_access_server(
                WarmRemoteAccessServerRequest(), headers=client.headers
            )
            cold_seconds = time.monotonic() - started
            again = await client.control.warm_remote_access_server(
                WarmRemoteAccessServerRequest(), headers=client.headers
            )
        url = f"http://127.0.0.1:{port}/?folder={workspace}"
        completed = subprocess.run(
            ["node", str(SCRIPT), url, daemon.token, "hello.txt", "hello from the workspace",
             str(screenshot)],
            capture_output=True, text=True, timeout=150, cwd=ROOT, check=False,
        )  # fmt: skip
        lines = completed.stdout.strip().splitlines()
        assert completed.returncode == 0 and lines, (completed.stdout, completed.stderr[-3000:])
        seen = json.loads(lines[-1])
        run = daemon.state_root() / "sockets" / "ide"
        socket_mode = stat.S_IMODE((run / "code-server.sock").stat().st_mode)
        run_mode = stat.S_IMODE(run.stat().st_mode)
    assert warmed.ready and again.ready, (warmed, again)
    assert f"http://127.0.0.1:{port}/?folder=" in warmed.message
    assert warmed.message == again.message
    assert seen["ok"], seen
    assert seen["tokenLeftTheAddressBar"], seen
    assert seen["activeTab"].startswith("hello.txt"), seen
    assert seen["refusedRequests"] == [], seen
    assert screenshot.stat().st_size > 10_000
    # code-server listens on a unix socket only the daemon's user can reach, in a 0700 folder of
    # the state root (masked in every sandbox).
    assert (socket_mode, run_mode) == (0o600, 0o700)
    assert cold_seconds < 60


@pytest.mark.parametrize(
    "how",
    ["none", "wrong-query", "wrong-bearer", "wrong-cookie", "websocket-without-token", "garbage"],
)
async def test_the_ide_refuses_whoever_lacks_the_token(
    workspace: Path, tmp_path: Path, ide_folder: Path, how: str
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with ide_daemon(workspace, tmp_path, ide_folder, port) as daemon:
        async with daemon.client() as client:
            await client.control.warm_remote_access_server(
                WarmRemoteAccessServerRequest(), headers=client.headers
            )
        wrong = "0" * len(daemon.token)
        if how == "none":
            answer = raw_answer(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        elif how == "wrong-query":
            answer = raw_answer(port, f"GET /?token={wrong} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        elif how == "wrong-bearer":
            answer = raw_answer(
                port, f"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {wrong}\r\n\r\n".encode()
            )
        elif how == "wrong-cookie":
            # code-server's own session cookie guessed: the proxy still wants its own.
            answer = raw_answer(
                port,
                b"GET / HTTP/1.1\r\nHost: x\r\nCookie: code-server-session="
                + b"0" * 64
                + b"\r\n\r\n",
            )
        elif how == "websocket-without-token":
            answer = raw_answer(
                port,
                b"GET /stable-x?reconnectionToken=1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                b"Sec-WebSocket-Version: 13\r\n\r\n",
            )
        else:
            answer = raw_answer(port, b"\x16\x03\x01 not http\r\n\r\n")
        # The right token still works afterwards, as a header and as ?token= (a redirect).
        good = status_of(base + "/healthz", {"Authorization": f"Bearer {daemon.token}"})
        opener = urllib.request.build_opener(NoRedirect)
        try:
            opener.open(f"{base}/?token={daemon.token}", timeout=10)
            redirect = 0
        except urllib.error.HTTPError as answered:
            redirect = answered.code
            location = answered.headers["Location"]
    expected = b"HTTP/1.1 400" if how == "garbage" else b"HTTP/1.1 401"
    assert answer.startswith(expected), answer
    assert daemon.token.encode() not in answer
    assert good == 200
    assert redirect == 303 and daemon.token not in location and location.startswith("/")


async def test_the_warm_call_is_idempotent_and_cheap(
    workspace: Path, tmp_path: Path, ide_folder: Path
) -> None:
    port = free_port()
    with ide_daemon(workspace, tmp_path, ide_folder, port) as daemon:
        async with daemon.client() as client:
            download = await client.control.download_cursor_server(
                DownloadCursorServerRequest(commit=VERSIONS[0]), headers=client.headers
            )
            started = time.monotonic()
            first = await client.control.warm_remote_access_server(
                WarmRemoteAccessServerRequest(commit=VERSIONS[0]), headers=client.headers
            )
            cold_seconds = time.monotonic() - started
            sockets = sorted(p.name for p in (daemon.state_root() / "sockets" / "ide").iterdir())
            started_servers = _code_server_pids(ide_folder)
            warm_seconds = []
            for _ in range(5):
                started = time.monotonic()
                answer = await client.control.warm_remote_access_server(
                    WarmRemoteAccessServerRequest(), headers=client.headers
                )
                warm_seconds.append(time.monotonic() - started)
                assert answer == first
            with pytest.raises(ConnectError) as bad_version:
                await client.control.download_cursor_server(
                    DownloadCursorServerRequest(commit="../../etc"), headers=client.headers
                )
        assert _code_server_pids(ide_folder) == started_servers != [], "not started again"
    code_servers = _code_server_pids(ide_folder)
    assert download.path == str(ide_folder / f"code-server-{VERSIONS[0]}")
    assert (Path(download.path) / INSTALLED_MARK).is_file()
    assert first.ready
    assert "code-server.sock" in sockets
    # Relative to the cold start, which a loaded machine slows as much.
    assert min(warm_seconds) < cold_seconds / 5, (cold_seconds, warm_seconds)
    assert bad_version.value.code == Code.INVALID_ARGUMENT
    assert code_servers == [], "code-server outlived the daemon"


async def test_warming_without_an_install_says_what_to_do(workspace: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty-ide"
    with ide_daemon(workspace, tmp_path, empty, free_port()) as daemon:
        async with daemon.client() as client:
            with pytest.raises(ConnectError) as missing:
                await client.control.warm_remote_access_server(
                    WarmRemoteAccessServerRequest(), headers=client.headers
                )
            with pytest.raises(ConnectError) as other_version:
                await client.control.warm_remote_access_server(
                    WarmRemoteAccessServerRequest(commit="1.2.3"), headers=client.headers
                )
    assert missing.value.code == Code.FAILED_PRECONDITION
    assert "DownloadCursorServer" in missing.value.message
    assert other_version.value.code == Code.FAILED_PRECONDITION


def _socket_answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def _code_server_pids(ide_folder: Path) -> list[int]:
    """Processes whose command line names this test's code-server."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(ide_folder).encode() in command and b"entry.js" in command:
                found.append(int(entry.name))
    return found


SOCKET_PROBE = r"""python3 - <<'PY'
import socket
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect("{sock}")
    s.sendall(b"GET /?folder=/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    print("ANSWER", s.recv(200).split(b"\r\n")[0].decode())
except OSError as e:
    print("REFUSED", e.errno)
PY
touch {folder}/planted 2>/dev/null && echo WROTE-FOLDER || echo FOLDER-READ-ONLY
"""


async def test_a_sandboxed_shell_cannot_use_code_server_directly(
    workspace: Path, tmp_path: Path, ide_folder: Path
) -> None:
    from agent.v1.shell_pb2 import SandboxPolicy, ShellArgs, ShellToolCall
    from agent.v1.tool_call_pb2 import ToolCall

    port = free_port()
    flags = ("--sandbox-enabled", "--ide-port", str(port), "--ide-folder", str(ide_folder))
    with running_daemon(workspace, tmp_path / "state", *flags) as daemon:
        sock = daemon.state_root() / "sockets" / "ide" / "code-server.sock"
        probe = SOCKET_PROBE.format(sock=sock, folder=ide_folder)
        async with daemon.client() as client:

            async def run(agent: str, policy: int, command: str = probe) -> str:
                args = ShellArgs(
                    command=command, requested_sandbox_policy=SandboxPolicy(type=policy)
                )
                call = ToolCall(shell_tool_call=ShellToolCall(args=args))
                outcome = await client.run(call, agent_id=agent)
                assert outcome.result is not None, outcome.error
                result = outcome.result.shell_tool_call.result
                assert result.sandbox_policy.type == policy
                return str(result.success.stdout) + str(result.failure.stdout)

            # A session whose sandbox exists before code-server's socket is bound...
            early_before = await run("early", SandboxPolicy.TYPE_WORKSPACE_READWRITE)
            await client.control.warm_remote_access_server(
                WarmRemoteAccessServerRequest(), headers=client.headers
            )
            early = await run("early", SandboxPolicy.TYPE_WORKSPACE_READWRITE)
            # ... one started after, and the positive control: an unconfined shell reaches it.
            late = await run("late", SandboxPolicy.TYPE_WORKSPACE_READWRITE)
            connect_only = probe.split("\ntouch ", 1)[0]
            unconfined = await run("unconfined", SandboxPolicy.TYPE_INSECURE_NONE, connect_only)
    assert "FOLDER-READ-ONLY" in early_before, early_before
    # The sockets folder is masked in every sandbox, whenever the socket is bound in it.
    assert "REFUSED" in early and "FOLDER-READ-ONLY" in early, early
    assert "REFUSED" in late and "FOLDER-READ-ONLY" in late, late
    # code-server, without the random session, only sends a caller to its login page.
    assert "ANSWER HTTP/1.1 302" in unconfined, unconfined
    assert not (ide_folder / "planted").exists()


async def test_the_ide_comes_back_after_code_server_dies(
    workspace: Path, tmp_path: Path, ide_folder: Path
) -> None:
    import os
    import signal

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with ide_daemon(workspace, tmp_path, ide_folder, port) as daemon:
        bearer = {"Authorization": f"Bearer {daemon.token}"}
        async with daemon.client() as client:
            await client.control.warm_remote_access_server(
                WarmRemoteAccessServerRequest(), headers=client.headers
            )
            # code-server is a wrapper and the server it forks, in one process group: a crash.
            os.killpg(os.getpgid(_code_server_pids(ide_folder)[0]), signal.SIGKILL)
            # Gone once its socket refuses (its command line empties before its fds close).
            deadline = time.monotonic() + 10
            while _socket_answers(daemon.state_root() / "sockets" / "ide" / "code-server.sock"):
                assert time.monotonic() < deadline, "code-server did not die"
                time.sleep(0.05)
            while_dead = status_of(base + "/healthz", bearer)
            again = await client.control.warm_remote_access_server(
                WarmRemoteAccessServerRequest(), headers=client.headers
            )
            back = status_of(base + "/healthz", bearer)
    assert while_dead == 502
    assert again.ready and back == 200
