"""Works around hypercorn 0.18's HTTP/2 bug that drops every call on a connection.

When a handler finishes its response while the client is still sending on that stream (a bidi
ExecStream ended by the server, an early auth rejection), hypercorn forgets the stream and the
client's next DATA frame hits `self.streams[stream_id]` → KeyError → the whole connection, with
every call multiplexed on it, is torn down. Frames for a stream that has already ended are
meaningless, so they are now ignored, as hypercorn already does for END_STREAM.
"""

from __future__ import annotations

from typing import Any

from hypercorn.protocol.h2 import H2Protocol


class _EndedStream:
    idle = True

    async def handle(self, event: object) -> None:
        return None


_ENDED = _EndedStream()


class _StreamTable(dict[int, Any]):
    def __missing__(self, stream_id: int) -> _EndedStream:
        return _ENDED


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
    _installed = True
