"""Works around two bugs of hypercorn 0.18's HTTP/2 protocol.

1. When a handler finishes its response while the client is still sending on that stream (a
   bidi ExecStream ended by the server, an early auth rejection), hypercorn forgets the stream
   and the client's next DATA frame hits `self.streams[stream_id]` → KeyError → the whole
   connection, with every call multiplexed on it, is torn down. Frames for a stream that has
   already ended are meaningless, so they are now ignored, as hypercorn already does for
   END_STREAM.
2. A client that grants no flow-control window (never sends WINDOW_UPDATE) made the daemon
   buffer the whole response: a stream's send buffer pauses its writer above
   `BUFFER_HIGH_WATER`, but the sending task, finding no window, pops zero bytes and that empty
   pop released the writer again. The writer now waits until the buffer itself drained below
   `BUFFER_LOW_WATER` (or the stream closed), as over HTTP/1.1, where the socket pushes back; the
   wait reaches the handler's `send`, and from there the command whose output it is.
"""

from __future__ import annotations

from typing import Any

from hypercorn.protocol import h2 as hypercorn_h2
from hypercorn.protocol.h2 import H2Protocol, StreamBuffer


class _EndedStream:
    idle = True

    async def handle(self, event: object) -> None:
        return None


_ENDED = _EndedStream()


class _StreamTable(dict[int, Any]):
    def __missing__(self, stream_id: int) -> _EndedStream:
        return _ENDED


async def _push(self: StreamBuffer, data: bytes) -> None:
    if self._complete:
        raise hypercorn_h2.BufferCompleteError()
    self.buffer.extend(data)
    await self._is_empty.clear()
    # `close()` (the stream or connection went away) marks it complete and empties it.
    while len(self.buffer) >= hypercorn_h2.BUFFER_HIGH_WATER and not self._complete:
        await self._paused.clear()
        await self._paused.wait()


async def _pop(self: StreamBuffer, max_length: int) -> bytes:
    length = min(len(self.buffer), max_length)
    data = bytes(self.buffer[:length])
    del self.buffer[:length]
    if len(self.buffer) < hypercorn_h2.BUFFER_LOW_WATER:
        await self._paused.set()
    if len(self.buffer) == 0:
        await self._is_empty.set()
    return data


_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    original_init = H2Protocol.__init__

    def __init__(self: H2Protocol, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.streams = _StreamTable(self.streams)

    H2Protocol.__init__ = __init__  # type: ignore[method-assign]
    StreamBuffer.push = _push  # type: ignore[method-assign]
    StreamBuffer.pop = _pop  # type: ignore[method-assign]
    _installed = True
