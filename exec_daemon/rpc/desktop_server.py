"""The desktop in a browser on `--novnc-port` (26058 in the image): noVNC behind the daemon's token.

- `GET /?token=TOKEN[&mode=control]`: a right token signs the browser in: it is sent on to the
  same address under a path of its own, `/s/<scope>/`, with a cookie valid only there, on this
  port (exec_daemon/rpc/browser_auth.py), so the token never stays in the address bar or the
  history. A wrong or missing token: HTTP 401. `Authorization: Bearer TOKEN` works instead of
  the query or the cookie, on any path.
- `GET /` (under the scope with its cookie, or with the header): the desktop page
  (exec_daemon/web/desktop.html); `assets/...` its script, `novnc/...` noVNC's own modules (from
  `/usr/share/novnc`, or the npm package `@novnc/novnc` installed by scripts/setup); `session`
  renews the cookie (the page asks every minute while it is open).
- WebSocket `websockify?mode=view|control`: bridged to the VNC server (`--vnc-address`,
  127.0.0.1:5901). `view` (the default) drops every input message of the client here, in the
  daemon (keys, pointer, clipboard, resizing the screen): a view-only page cannot type even
  when its script is changed. `control` passes everything and gives the person control of the
  desktop (exec_daemon/kernel/desktop_control.py) until its last interactive connection
  closes; meanwhile the agent's computer-use calls are refused.

Every request but the token exchange needs the token (header or query) or the scope's cookie; a
WebSocket from a page of another origin is refused with 403.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
import mimetypes
import socket
import struct
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from exec_daemon.kernel.desktop_control import DesktopControl
from exec_daemon.kernel.state import Daemon
from exec_daemon.rpc.browser_auth import (
    BrowserSessionKey,
    Session,
    SignInCookies,
    bearer_token,
    new_scope,
    scoped,
    secret_matches,
    sign_in_redirect,
)
from exec_daemon.rpc.ports import serve_kwargs
from exec_daemon.rpc.pty_server import (
    WEB_DIR,
    PtyWebSocketServer,
    _is_upgrade,
    _query,
    _response,
    _shut_down,
)

log = logging.getLogger(__name__)
websockets_log = logging.getLogger(f"{__name__}.websockets")
websockets_log.setLevel(logging.WARNING)

NOVNC_DIRS = (
    Path("/usr/share/novnc"),
    Path(__file__).resolve().parents[2] / "node_modules" / "@novnc" / "novnc",
)
MAX_CLIENT_MESSAGE_BYTES = 16 << 20
READ_BYTES = 256 * 1024
CONNECT_SECONDS = 5.0
CLOSE_VNC_UNREACHABLE = 1011
CLOSE_BAD_RFB = 4400
PAGE_ASSETS = {
    "/": WEB_DIR / "desktop.html",
    "/assets/desktop.js": WEB_DIR / "desktop.js",
}


def novnc_dir() -> Path | None:
    """Where noVNC's modules are: the image's Debian package, else the npm package."""
    return next((d for d in NOVNC_DIRS if (d / "core" / "rfb.js").is_file()), None)


class RfbRefused(Exception):
    """The client sent something a view-only connection does not pass on."""


# Client-to-server RFB messages (RFC 6143 7.5 and the extensions noVNC speaks): type -> length
# of the fixed part; None: a variable part follows (see _length).
_HARMLESS = {0: 20, 2: 4, 3: 10, 150: 10, 248: 9}  # pixel format, encodings, update requests, fence
_INPUT = {4: 8, 5: 6, 6: 8, 250: 4, 251: 8}  # key, pointer, clipboard, xvp, SetDesktopSize


@dataclass
class ViewOnlyFilter:
    """Passes the RFB handshake and the client's harmless messages; drops its input.

    Security type None only (how the desktop's VNC server runs), RFB 3.7 or 3.8: anything else
    ends the connection rather than risk misreading where a message starts."""

    buffer: bytearray
    stage: str = "version"
    discard: int = 0

    @staticmethod
    def new() -> ViewOnlyFilter:
        return ViewOnlyFilter(bytearray())

    def feed(self, data: bytes) -> bytes:
        """The bytes to send on to the VNC server (raises RfbRefused)."""
        if self.discard:
            skipped = min(self.discard, len(data))
            self.discard -= skipped
            data = data[skipped:]
        self.buffer += data
        out = bytearray()
        while self.buffer:
            taken = self._step(out)
            if taken == 0:
                break
            del self.buffer[:taken]
        return bytes(out)

    def _step(self, out: bytearray) -> int:
        buffer = self.buffer
        if self.stage == "version":
            if len(buffer) < 12:
                return 0
            if bytes(buffer[:12]) not in (b"RFB 003.008\n", b"RFB 003.007\n"):
                raise RfbRefused("only RFB 3.7 and 3.8 clients")
            out += buffer[:12]
            self.stage = "security"
            return 12
        if self.stage == "security":
            if buffer[0] != 1:
                raise RfbRefused("only the security type None")
            out.append(1)
            self.stage = "init"
            return 1
        if self.stage == "init":
            out.append(1)  # shared: a viewer never disconnects the others
            self.stage = "messages"
            return 1
        return self._message(out)

    def _message(self, out: bytearray) -> int:
        kind = self.buffer[0]
        fixed = _HARMLESS.get(kind) or _INPUT.get(kind)
        if fixed is None:
            raise RfbRefused(f"unknown RFB message type {kind}")
        if len(self.buffer) < fixed:
            return 0
        total = fixed + self._variable_length(kind)
        if kind in _INPUT:
            available = min(total, len(self.buffer))
            self.discard = total - available
            return available
        if len(self.buffer) < total:
            return 0
        out += self.buffer[:total]
        return total

    def _variable_length(self, kind: int) -> int:
        header = bytes(self.buffer)
        if kind == 2:  # SetEncodings: u16 count of s32
            return 4 * struct.unpack_from(">H", header, 2)[0]
        if kind == 6:  # ClientCutText: s32 length (negative: extended clipboard)
            return abs(struct.unpack_from(">i", header, 4)[0])
        if kind == 248:  # Fence: u8 payload length
            return header[8]
        if kind == 251:  # SetDesktopSize: u8 screen count of 16 bytes
            return 16 * header[6]
        return 0


class DesktopServer:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.control = daemon.service(DesktopControl)
        self._token = daemon.config.auth_token
        self.cookies = SignInCookies(
            daemon.service(BrowserSessionKey).key,
            "desktop",
            daemon.config.novnc_port,
            daemon.config.browser_session_seconds,
        )
        self.novnc = novnc_dir()
        self._vnc_host, _, port = daemon.config.vnc_address.rpartition(":")
        self._vnc_port = int(port)
        self._modes: weakref.WeakKeyDictionary[ServerConnection, bool] = weakref.WeakKeyDictionary()

    # -- before the upgrade ---------------------------------------------------------------------

    def _given_token(self, request: Request, query: dict[str, str]) -> bool:
        bearer = bearer_token(request.headers.get("Authorization", ""))
        return secret_matches(bearer or query.get("token", ""), self._token)

    def _session(self, request: Request, scope: str) -> Session | None:
        host = request.headers.get("Host", "")
        return self.cookies.session(request.headers.get("Cookie", ""), scope, host)

    async def process_request(
        self, connection: ServerConnection, request: Request
    ) -> Response | None:
        full_path, query = _query(request)
        scope, path = scoped(full_path)
        if "token" in query and not _is_upgrade(request.headers):
            return self._exchange_token(connection, request, path, query)
        session = self._session(request, scope)
        if not (self._given_token(request, query) or session is not None):
            return _refused(connection)
        if _is_upgrade(request.headers):
            if path != "/websockify":
                return connection.respond(http.HTTPStatus.NOT_FOUND, f"no such path: {path}\n")
            if not PtyWebSocketServer.origin_allowed(request):
                return connection.respond(http.HTTPStatus.FORBIDDEN, "origin not allowed\n")
            self._modes[connection] = query.get("mode") == "control"
            return None
        if path == "/session":
            response = connection.respond(http.HTTPStatus.NO_CONTENT, "")
        else:
            response = await self._file(connection, path)
        if session is not None and session.refresh:
            response.headers["Set-Cookie"] = session.refresh
        return response

    def _exchange_token(
        self, connection: ServerConnection, request: Request, path: str, query: dict[str, str]
    ) -> Response:
        if not self._given_token(request, query):
            return _refused(connection)
        scope = new_scope()
        cookie = self.cookies.set_cookie(scope, request.headers.get("Host", ""))
        response = connection.respond(http.HTTPStatus.SEE_OTHER, "")
        for name, value in sign_in_redirect(path, list(query.items()), scope, [cookie]):
            response.headers[name] = value
        response.headers["Cache-Control"] = "no-store"
        return response

    async def _file(self, connection: ServerConnection, path: str) -> Response:
        file = self._file_for(path)
        if file is None:
            return connection.respond(http.HTTPStatus.NOT_FOUND, f"no such path: {path}\n")
        try:
            body = await asyncio.to_thread(file.read_bytes)
        except OSError:
            return connection.respond(http.HTTPStatus.NOT_FOUND, f"no such path: {path}\n")
        content_type = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if file.suffix in (".js", ".mjs"):
            content_type = "text/javascript"
        return _response(connection, http.HTTPStatus.OK, body, f"{content_type}; charset=utf-8")

    def _file_for(self, path: str) -> Path | None:
        if path in PAGE_ASSETS:
            return PAGE_ASSETS[path]
        if not path.startswith("/novnc/") or self.novnc is None:
            return None
        root = self.novnc.resolve()
        file = (root / path.removeprefix("/novnc/")).resolve()
        # Checked on what it resolves to: no `..` or symlink leads out of noVNC's folder.
        if not file.is_relative_to(root) or not file.is_file():
            return None
        return file

    # -- after the upgrade ----------------------------------------------------------------------

    async def handle(self, connection: ServerConnection) -> None:
        interactive = self._modes.pop(connection, False)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self._vnc_host, self._vnc_port), CONNECT_SECONDS
            )
        except (OSError, TimeoutError):
            where = f"{self._vnc_host}:{self._vnc_port}"
            log.warning("the desktop page cannot reach the VNC server on %s", where)
            await connection.close(CLOSE_VNC_UNREACHABLE, f"no VNC server answers on {where}")
            return
        self.control.joined(interactive=interactive)
        try:
            await self._bridge(connection, reader, writer, interactive)
        finally:
            self.control.left(interactive=interactive)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _bridge(
        self,
        connection: ServerConnection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        interactive: bool,
    ) -> None:
        to_browser = asyncio.create_task(_pump_to_browser(reader, connection))
        view_only = None if interactive else ViewOnlyFilter.new()
        try:
            async for message in connection:
                data = message.encode() if isinstance(message, str) else message
                if view_only is not None:
                    data = view_only.feed(data)
                if data:
                    writer.write(data)
                    await writer.drain()
                if to_browser.done():
                    break
        except RfbRefused as exc:
            log.info("closed a view-only desktop connection: %s", exc)
            await connection.close(CLOSE_BAD_RFB, f"view-only: {exc}")
        except (ConnectionClosed, OSError):
            pass
        finally:
            to_browser.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await to_browser


async def _pump_to_browser(reader: asyncio.StreamReader, connection: ServerConnection) -> None:
    try:
        while data := await reader.read(READ_BYTES):
            await connection.send(data)
        await connection.close(CLOSE_VNC_UNREACHABLE, "the VNC server closed the connection")
    except (ConnectionClosed, OSError):
        pass


def _refused(connection: ServerConnection) -> Response:
    return connection.respond(
        http.HTTPStatus.UNAUTHORIZED,
        "missing or wrong token: open this page as /?token=<the daemon's token>\n",
    )


@contextlib.asynccontextmanager
async def serving(
    daemon: Daemon, sockets: list[socket.socket] | None = None
) -> AsyncIterator[Server | None]:
    """Runs the desktop page and its bridge for the duration of the block (port 0: not at all)."""
    config = daemon.config
    if config.novnc_port == 0:
        yield None
        return
    desktop = DesktopServer(daemon)
    if desktop.novnc is None:
        log.warning("the desktop page has no noVNC: install novnc, or run scripts/setup")
    server = await serve(
        desktop.handle,
        **serve_kwargs(config.host, config.novnc_port, sockets or []),  # type: ignore[arg-type]
        process_request=desktop.process_request,
        compression=None,
        max_size=MAX_CLIENT_MESSAGE_BYTES,
        server_header=None,
        logger=websockets_log,
    )
    log.info("desktop page on %s:%d (VNC %s)", config.host, config.novnc_port, config.vnc_address)
    try:
        yield server
    finally:
        await _shut_down(server)
