"""The PTY WebSocket server on `--pty-websocket-port` (wire-contract.md "PTY WebSocket protocol").

- `GET /` and `/assets/...`: the web terminal (public files: no data, no token needed; the
  page asks for the token and sends it with every data request).
- `GET /terminals`: the terminals as JSON.
- `GET /record` (a public page, like `/`) replays the session record (--record); its data,
  behind the token: `GET /record/entries?since=SEQ[&agent=ID]` ({"more", "entries"}, at most
  RECORD_PAGE entries after `since`) and `GET /record/blob/NAME` (a long string an entry
  references).
- WebSocket `/terminals/new?cols=&rows=[&command=][&cwd=][&name=][&shared=1]` creates a
  terminal and attaches (`shared=1`: in a tmux session the agent can read and type into,
  exec_daemon/terminals/tmux.py); `/terminals/{id}[?since=OFFSET]` attaches to one (no `since`:
  all the scrollback still held). Binary frames are raw terminal bytes both ways; a text frame
  holding a JSON object with a string `type` is control, any other text frame is input.
- Control from the client: `resize` {cols, rows} (what this viewer's window fits: the terminal
  takes the smallest size its attached viewers offer, tmux's `window-size smallest`), `signal`
  {signal}, `rename` {name} (answered `renamed`), `close` (ends the terminal). From the server:
  `attached` {id, offset, end (where the replay ends), cols, rows, truncated}, `size` {cols, rows} (the terminal's size whenever it changes: draw at that size),
  `renamed`, `exit`, `error`.

Auth is the daemon's bearer token (`authorization: Bearer` or `?token=` for browsers), compared
in constant time, refused with HTTP 401 before the upgrade; a browser page from another origin
is refused with 403. Per-message compression is off (it costs 2-3x the CPU for terminal bytes).

Close codes: 4400 bad request (size, cwd, ...), 4404 unknown terminal, 4408 client too slow (it
fell further behind than the scrollback holds: reattach with `?since=`), 1000 after `exit`.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import logging
import mimetypes
import re
import socket
import weakref
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.state import Daemon
from exec_daemon.rpc.browser_auth import bearer_token, secret_matches
from exec_daemon.rpc.ports import serve_kwargs
from exec_daemon.rpc.websocket_frames import CLOSE_RESTORED, RESTORED_REASON
from exec_daemon.telemetry.session_record import SessionRecord
from exec_daemon.terminals.pty import Attachment, ClientTooSlow, PtyManager, Terminal
from exec_daemon.terminals.tmux import SharedTerminals

log = logging.getLogger(__name__)
# websockets logs every refused handshake (every static file is one) at INFO: too chatty.
websockets_log = logging.getLogger(f"{__name__}.websockets")
websockets_log.setLevel(logging.WARNING)

CLOSE_NORMAL = 1000
CLOSE_BAD_REQUEST = 4400
CLOSE_UNKNOWN_TERMINAL = 4404
CLOSE_TOO_SLOW = 4408
# Output frames carry at most this much; bigger frames mean fewer sends when output floods.
MAX_FRAME_BYTES = 256 * 1024
MAX_INPUT_MESSAGE_BYTES = 8 << 20
CLOSE_TIMEOUT_SECONDS = 5.0
# A client dropped for being too slow has this long to read what was sent before the close.
SLOW_CLIENT_CLOSE_SECONDS = 15.0
SHUTDOWN_SECONDS = 1.0

WEB_DIR = Path(__file__).resolve().parents[1] / "web"
# The npm files the page uses (xterm.js and its addons), in node_modules' layout, with each
# package's LICENSE: copied into the package by scripts/vendor-web so a wheel serves them too.
NODE_MODULES = WEB_DIR / "vendor"
# The page and its scripts.
ASSETS: dict[str, Path] = {
    "/": WEB_DIR / "index.html",
    "/assets/terminal.js": WEB_DIR / "terminal.js",
    "/assets/terminal.css": WEB_DIR / "terminal.css",
    "/assets/xterm.mjs": NODE_MODULES / "@xterm/xterm/lib/xterm.mjs",
    "/assets/xterm.css": NODE_MODULES / "@xterm/xterm/css/xterm.css",
    "/assets/addon-fit.mjs": NODE_MODULES / "@xterm/addon-fit/lib/addon-fit.mjs",
    "/assets/addon-search.mjs": NODE_MODULES / "@xterm/addon-search/lib/addon-search.mjs",
    "/assets/addon-web-links.mjs": NODE_MODULES / "@xterm/addon-web-links/lib/addon-web-links.mjs",
    "/record": WEB_DIR / "record.html",
    "/assets/record.js": WEB_DIR / "record.js",
    "/assets/record.css": WEB_DIR / "record.css",
}
# The pages (their Content-Security-Policy is PAGE_POLICY).
PAGES = ("/", "/record")
# Scripts only from this origin (the token is in its storage: SECURITY.md); xterm.js styles
# its rows inline; never framed.
PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
)
# The replay page reads the record this many entries at a time.
RECORD_PAGE = 2000
TERMINAL_PATH = re.compile(r"^/terminals/([A-Za-z0-9_-]{1,64})$")


@dataclass(frozen=True)
class Route:
    """What a WebSocket request asked for, decided before the upgrade."""

    new: bool
    terminal_id: str
    query: dict[str, str]


class BadRequest(Exception):
    pass


def _query(request: Request) -> tuple[str, dict[str, str]]:
    parts = urlsplit(request.path)
    return parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()}


def _response(
    connection: ServerConnection, status: http.HTTPStatus, body: bytes, content_type: str
) -> Response:
    response = connection.respond(status, "")
    del response.headers["Content-Type"]
    del response.headers["Content-Length"]
    response.headers["Content-Type"] = content_type
    response.headers["Content-Length"] = str(len(body))
    response.headers["Cache-Control"] = "no-store"
    response.body = body
    return response


def _is_upgrade(headers: Headers) -> bool:
    return "websocket" in headers.get("Upgrade", "").lower()


def _int_param(query: dict[str, str], name: str, default: int | None) -> int | None:
    value = query.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {value[:40]!r}") from None


def _record_page(record: SessionRecord, agent: str, since: int) -> bytes:
    """Up to RECORD_PAGE entries after `since`, as JSON (blocking: off the loop)."""
    record.flush()
    entries = record.read(agent, since)
    lines = [line for _entry, line in record.read_batch(entries, RECORD_PAGE + 1)]
    more = len(lines) > RECORD_PAGE
    body = ",".join(lines[:RECORD_PAGE])
    return f'{{"more":{"true" if more else "false"},"entries":[{body}]}}'.encode(
        "utf-8", "surrogatepass"
    )


class PtyWebSocketServer:
    """Serves the terminals of one daemon's PtyManager."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.manager = daemon.service(PtyManager)
        self.shared = daemon.service(SharedTerminals)
        self._token = daemon.config.auth_token
        self._asset_cache: dict[str, bytes] = {}
        self._routes: weakref.WeakKeyDictionary[ServerConnection, Route] = (
            weakref.WeakKeyDictionary()
        )
        self._closing: set[asyncio.Task[None]] = set()

    # -- before the upgrade ---------------------------------------------------------------------

    def authorized(self, request: Request, query: dict[str, str]) -> bool:
        bearer = bearer_token(request.headers.get("Authorization", ""))
        matches = secret_matches(bearer or query.get("token", ""), self._token)
        second_header = self.daemon.config.auth_header
        if second_header:
            # --auth-header (routers that strip Authorization): the token alone or `Bearer ...`.
            given = request.headers.get(second_header, "")
            matches |= secret_matches(bearer_token(given) or given, self._token)
        return matches

    @staticmethod
    def origin_allowed(request: Request) -> bool:
        """Non-browser clients send no Origin; a browser must come from this server's own page."""
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        host = request.headers.get("Host", "")
        return origin in (f"http://{host}", f"https://{host}")

    async def process_request(
        self, connection: ServerConnection, request: Request
    ) -> Response | None:
        path, query = _query(request)
        if path in ASSETS and not _is_upgrade(request.headers):
            return await self._asset(connection, path)
        if not self.authorized(request, query):
            return connection.respond(http.HTTPStatus.UNAUTHORIZED, "missing or wrong token\n")
        if not self.origin_allowed(request):
            return connection.respond(http.HTTPStatus.FORBIDDEN, "origin not allowed\n")
        if path == "/terminals" and not _is_upgrade(request.headers):
            listing = [terminal.info() for terminal in self.manager.list()]
            body = json.dumps(listing).encode()
            return _response(connection, http.HTTPStatus.OK, body, "application/json")
        if path.startswith("/record/") and not _is_upgrade(request.headers):
            return await self._record(connection, path, query)
        if path == "/terminals/new":
            self._routes[connection] = Route(True, "", query)
            return None
        match = TERMINAL_PATH.match(path)
        if match:
            self._routes[connection] = Route(False, match.group(1), query)
            return None
        return connection.respond(http.HTTPStatus.NOT_FOUND, f"no such path: {path}\n")

    async def _record(
        self, connection: ServerConnection, path: str, query: dict[str, str]
    ) -> Response:
        """`/record/entries?since=&agent=`: the session record's next entries, as
        {"entries", "more"}; `/record/blob/NAME`: a long string an entry references."""
        record = self.daemon.service(SessionRecord)
        if not record.enabled:
            return connection.respond(
                http.HTTPStatus.NOT_FOUND, "the daemon keeps no session record (--record)\n"
            )
        if path == "/record/entries":
            try:
                since = _int_param(query, "since", 0) or 0
            except BadRequest as exc:
                return connection.respond(http.HTTPStatus.BAD_REQUEST, f"{exc}\n")
            body = await asyncio.to_thread(_record_page, record, query.get("agent", ""), since)
            return _response(connection, http.HTTPStatus.OK, body, "application/json")
        if path.startswith("/record/blob/"):
            text = await asyncio.to_thread(record.blob, path[len("/record/blob/") :])
            if text is None:
                return connection.respond(http.HTTPStatus.NOT_FOUND, "no such blob\n")
            body = text.encode("utf-8", "surrogatepass")
            return _response(connection, http.HTTPStatus.OK, body, "text/plain; charset=utf-8")
        return connection.respond(http.HTTPStatus.NOT_FOUND, f"no such path: {path}\n")

    async def _asset(self, connection: ServerConnection, path: str) -> Response:
        body = self._asset_cache.get(path)
        if body is None:
            try:
                body = await asyncio.to_thread(ASSETS[path].read_bytes)
            except OSError:
                log.error("web terminal file %s is missing (run scripts/vendor-web)", ASSETS[path])
                return connection.respond(
                    http.HTTPStatus.NOT_FOUND, f"{path} is not installed (run scripts/vendor-web)\n"
                )
            self._asset_cache[path] = body
        content_type = mimetypes.guess_type(ASSETS[path].name)[0] or "application/octet-stream"
        if ASSETS[path].suffix in (".mjs", ".js"):
            content_type = "text/javascript"
        response = _response(connection, http.HTTPStatus.OK, body, f"{content_type}; charset=utf-8")
        if path in PAGES:
            response.headers["Content-Security-Policy"] = PAGE_POLICY
        return response

    # -- after the upgrade ----------------------------------------------------------------------

    async def handle(self, connection: ServerConnection) -> None:
        route = self._routes.pop(connection, None)
        if route is None:  # pragma: no cover - process_request always routes an upgrade
            await connection.close(CLOSE_BAD_REQUEST, "bad request")
            return
        try:
            terminal, since = await self._terminal_for(route)
        except BadRequest as exc:
            await connection.close(CLOSE_BAD_REQUEST, _reason(str(exc)))
            return
        except CodedError as exc:
            code = CLOSE_UNKNOWN_TERMINAL if exc.code == "not_found" else CLOSE_BAD_REQUEST
            await connection.close(code, _reason(exc.message))
            return
        attachment, truncated = terminal.attach(since)
        try:
            await self._serve_attachment(connection, terminal, attachment, truncated)
        finally:
            attachment.detach()

    async def _terminal_for(self, route: Route) -> tuple[Terminal, int | None]:
        query = route.query
        if not route.new:
            since = _int_param(query, "since", None)
            if since is not None and since < 0:
                raise BadRequest("since must be >= 0")
            return self.manager.get(route.terminal_id), since
        cols = _int_param(query, "cols", 80)
        rows = _int_param(query, "rows", 24)
        assert cols is not None and rows is not None
        name = query.get("name", "")
        if len(name) > 200:
            raise BadRequest("name is longer than 200 characters")
        shared = query.get("shared", "0")
        if shared not in ("0", "1"):
            raise BadRequest(f"shared must be 0 or 1, got {shared[:40]!r}")
        # shared=1 (what the web page asks): a tmux session the agent reads and types into too.
        create = self.shared.create if shared == "1" else self._create_plain
        terminal = await create(
            command=query.get("command") or None,
            cwd=query.get("cwd") or None,
            cols=cols,
            rows=rows,
            name=name,
        )
        return terminal, None

    async def _create_plain(self, **kwargs: Any) -> Terminal:
        return self.manager.create(**kwargs)

    async def _serve_attachment(
        self,
        connection: ServerConnection,
        terminal: Terminal,
        attachment: Attachment,
        truncated: bool,
    ) -> None:
        await connection.send(
            json.dumps(
                {
                    "type": "attached",
                    "id": terminal.id,
                    "offset": attachment.offset,
                    # Where the replay of earlier output ends and live output begins.
                    "end": terminal.scrollback.end,
                    "cols": terminal.cols,
                    "rows": terminal.rows,
                    "truncated": truncated,
                }
            )
        )
        sender = asyncio.create_task(self._send_output(connection, terminal, attachment))
        attachment.on_size = lambda cols, rows: self._send_soon(
            connection, {"type": "size", "cols": cols, "rows": rows}
        )
        attachment.on_overrun = lambda: self._drop_slow_client(connection, sender, attachment)
        try:
            async for message in connection:
                await self._on_message(connection, attachment, message)
        except ConnectionClosed:
            pass
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender

    async def _send_output(
        self, connection: ServerConnection, terminal: Terminal, attachment: Attachment
    ) -> None:
        try:
            while chunk := await attachment.read(MAX_FRAME_BYTES):
                await connection.send(chunk)
            await connection.send(json.dumps({"type": "exit", "code": terminal.exit_code}))
            await connection.close(CLOSE_NORMAL, "terminal exited")
        except ClientTooSlow as exc:
            attachment.detach()
            await self._close_too_slow(connection, exc.offset)
        except ConnectionClosed:
            pass

    def _drop_slow_client(
        self, connection: ServerConnection, sender: asyncio.Task[None], attachment: Attachment
    ) -> None:
        """The client is stuck while the ring moved past it: stop feeding it, tell it why."""
        sender.cancel()
        attachment.detach()
        self._in_background(self._close_too_slow(connection, attachment.offset))

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close_too_slow(self, connection: ServerConnection, offset: int) -> None:
        log.info("dropping a PTY client that fell behind at offset %d", offset)
        reason = f"client too slow; output lost after offset {offset}"
        try:
            # close() first waits for the client to take what is already buffered: bounded.
            async with asyncio.timeout(SLOW_CLIENT_CLOSE_SECONDS):
                await connection.close(CLOSE_TOO_SLOW, reason)
        except TimeoutError:
            connection.transport.abort()
        except ConnectionClosed:
            pass

    def _send_soon(self, connection: ServerConnection, message: dict[str, Any]) -> None:
        self._in_background(_send_quietly(connection, message))

    async def _on_message(
        self, connection: ServerConnection, attachment: Attachment, message: str | bytes
    ) -> None:
        terminal = attachment.terminal
        if isinstance(message, str):
            control = _control(message)
            if control is None:
                message = message.encode()
            else:
                error = await self._control(attachment, control)
                if error:
                    await connection.send(json.dumps({"type": "error", "message": error}))
                elif control["type"] == "rename":
                    reply = {"type": "renamed", "name": terminal.name}
                    await connection.send(json.dumps(reply))
                return
        try:
            terminal.write(message)
        except CodedError as exc:
            await connection.send(json.dumps({"type": "error", "message": exc.message}))
            return
        await terminal.drain()

    async def _control(self, attachment: Attachment, control: dict[str, Any]) -> str | None:
        """Applies a control message; returns the error to report, if any."""
        kind = control["type"]
        terminal = attachment.terminal
        try:
            if kind == "resize":
                cols, rows = control.get("cols"), control.get("rows")
                if not (isinstance(cols, int) and isinstance(rows, int)):
                    return "resize needs integer cols and rows"
                # What this viewer's window fits; the terminal takes the smallest offer.
                terminal.offer_size(attachment, cols, rows)
            elif kind == "rename":
                name = control.get("name")
                if not isinstance(name, str):
                    return "rename needs a string name"
                terminal.rename(name)
            elif kind == "close":
                await self.shared.close(terminal)
            elif kind == "signal":
                name = control.get("signal")
                if not isinstance(name, str):
                    return 'signal needs a signal name, e.g. "SIGINT"'
                terminal.send_signal(name)
            else:
                return (
                    f"unknown control message type {kind[:40]!r}; "
                    "one of resize, signal, rename, close"
                )
        except CodedError as exc:
            return exc.message
        return None


def _control(text: str) -> dict[str, Any] | None:
    """The control message a text frame holds, or None when the frame is input."""
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        return value
    return None


async def _send_quietly(connection: ServerConnection, message: dict[str, Any]) -> None:
    with contextlib.suppress(ConnectionClosed):
        await connection.send(json.dumps(message))


def _reason(text: str) -> str:
    """A close reason fits in 123 bytes of UTF-8."""
    encoded = text.encode()[:123]
    return encoded.decode(errors="ignore")


@contextlib.asynccontextmanager
async def serving(
    daemon: Daemon, sockets: list[socket.socket] | None = None
) -> AsyncIterator[Server | None]:
    """Runs the PTY WebSocket server for the duration of the block (port 0: not at all)."""
    config = daemon.config
    if config.pty_websocket_port == 0:
        yield None
        return
    pty_server = PtyWebSocketServer(daemon)
    server = await serve(
        pty_server.handle,
        **serve_kwargs(config.host, config.pty_websocket_port, sockets or []),  # type: ignore[arg-type]
        process_request=pty_server.process_request,
        compression=None,
        max_size=MAX_INPUT_MESSAGE_BYTES,
        close_timeout=CLOSE_TIMEOUT_SECONDS,
        server_header=None,
        logger=websockets_log,
    )
    log.info("PTY WebSocket server on %s:%d", config.host, config.pty_websocket_port)
    try:
        yield server
    finally:
        # Terminals are ended while the connections close, not after: shutdown stays short.
        await asyncio.gather(_shut_down(server), pty_server.manager.aclose())


async def _shut_down(server: Server) -> None:
    """Closes every connection with 1001; a client that does not answer in time is cut off."""
    server.close()
    try:
        await asyncio.wait_for(asyncio.shield(server.wait_closed()), SHUTDOWN_SECONDS)
    except TimeoutError:
        for connection in list(server.all_connections):
            connection.transport.abort()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), SHUTDOWN_SECONDS)


async def close_all(server: Server) -> int:
    """Closes every open connection with 1012 (the VM was restored from a snapshot: reconnect);
    how many. The terminals go on; a client attaches to them again. The desktop page's server
    (exec_daemon/rpc/desktop_server.py) is one of these too."""
    connections = list(server.connections)
    await asyncio.gather(
        *(c.close(CLOSE_RESTORED, RESTORED_REASON) for c in connections),
        return_exceptions=True,
    )
    return len(connections)
