"""Connections of the RPC port that end: closed by the client, or never asking anything.

hypercorn 0.18 (`hypercorn.asyncio.tcp_server.TCPServer`) has one timer per connection, the idle
one (`keep_alive_timeout`, 600 s here so pooled connections live), and two gaps:

1. A client that connects and closes without sending a byte: h11 sees the end, hypercorn's
   connection waits out the idle timer before closing its side, so the socket sits in
   CLOSE-WAIT, its fd held, for 600 s. Now, once the client's side has ended, the timer stops
   and the daemon closes its side at once (the calls in flight were already told the client
   went away, as before).
2. A connection that never completes a request (connects and says nothing, a request head cut
   short, an HTTP/2 preface with no stream) held its fd for the same 600 s, or for ever: h11
   takes the preface (`PRI * HTTP/2.0`) for a request, which stops the idle timer, and HTTP/2
   restarts it only when a stream ends. Until its first
   request arrives (h11: the whole head; h2: a stream's headers), its idle timer is the header
   timeout (`--header-timeout-seconds`, `hypercorn_config` sets it on the config as
   `header_timeout`); after that, keep-alive as before. A connection with a call running is
   never idle, so a long ExecStream is never cut.

And one thing hypercorn has no word for: `close_all` ends every open connection at once (after
the VM is restored from a snapshot, its clients' connections are dead or about to be: each
client should learn it now and reconnect, not wait on a socket that never answers). An HTTP/2
connection is told GOAWAY first; then each, as at the idle timeout, closes its calls (the calls
are told the client went away) and its socket.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h2.exceptions
from hypercorn.asyncio.tcp_server import TCPServer
from hypercorn.events import Event, Updated
from hypercorn.protocol import ProtocolWrapper
from hypercorn.protocol.h2 import H2Protocol

_installed = False
# The connections being read (each TCPServer while its `_read_data` runs).
_open: set[TCPServer] = set()


async def _idle_timeout(self: TCPServer) -> None:
    served = getattr(self, "_exec_daemon_served", False)
    limit = self.config.keep_alive_timeout if served else _header_timeout(self.config)
    try:
        await asyncio.wait_for(self.context.terminated.wait(), limit)
    except TimeoutError:
        pass
    await asyncio.shield(self._initiate_server_close())


def _header_timeout(config: Any) -> float:
    return float(getattr(config, "header_timeout", config.keep_alive_timeout))


def install() -> None:
    global _installed
    if _installed:
        return
    original_send = TCPServer.protocol_send
    original_read = TCPServer._read_data

    async def protocol_send(self: TCPServer, event: Event) -> None:
        if isinstance(event, Updated):
            if not event.idle:
                self._exec_daemon_served = True  # type: ignore[attr-defined]
            if getattr(self, "_exec_daemon_ended", False):
                return  # the client is gone: no idle timer keeps the connection
        await original_send(self, event)

    async def _read_data(self: TCPServer) -> None:
        _open.add(self)
        try:
            await original_read(self)
        finally:
            _open.discard(self)
        self._exec_daemon_ended = True  # type: ignore[attr-defined]
        await self.idle_task.stop()

    original_handle = ProtocolWrapper.handle

    async def handle(self: ProtocolWrapper, event: Event) -> None:
        was_h2 = isinstance(self.protocol, H2Protocol)
        await original_handle(self, event)
        upgraded = not was_h2 and isinstance(self.protocol, H2Protocol)
        if upgraded and self.protocol.keep_alive_requests == 0:  # type: ignore[union-attr]
            # The HTTP/2 preface, which h11 counted as a request: no request yet after all.
            server = getattr(self.send, "__self__", None)
            if isinstance(server, TCPServer):
                server._exec_daemon_served = False  # type: ignore[attr-defined]
            await self.send(Updated(idle=True))

    ProtocolWrapper.handle = handle  # type: ignore[method-assign]
    TCPServer.protocol_send = protocol_send  # type: ignore[method-assign]
    TCPServer._read_data = _read_data  # type: ignore[method-assign]
    TCPServer._idle_timeout = _idle_timeout  # type: ignore[method-assign]
    _installed = True


async def close_all() -> int:
    """Closes every open connection of the daemon's HTTP ports (GOAWAY first for HTTP/2); how many."""
    servers = list(_open)
    for server in servers:
        await _say_goaway(server)
    await asyncio.gather(
        *(asyncio.shield(server._initiate_server_close()) for server in servers),
        return_exceptions=True,
    )
    return len(servers)


async def _say_goaway(server: TCPServer) -> None:
    protocol = getattr(getattr(server, "protocol", None), "protocol", None)
    if not isinstance(protocol, H2Protocol) or protocol.closed:
        return
    try:
        protocol.connection.close_connection()
        await protocol._flush()
    except (h2.exceptions.ProtocolError, OSError):
        return  # the connection is closed next in any case
