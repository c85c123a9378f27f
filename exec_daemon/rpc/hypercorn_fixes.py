"""Works around two bugs of hypercorn 0.18's HTTP/2 protocol, and batches its writes.

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

Batching: hypercorn's sending task sent one DATA frame (16 KiB, the client's usual maximum
frame size) per socket write, so a 512 KiB shell output delta cost 32 writes, each through
the asyncio transport and the loopback TCP stack: under a 100 MB output, those writes were the
daemon's largest cost (py-spy). It now frames up to SEND_BATCH_BYTES of a stream (as far as
the flow-control window allows) and writes them at once. Frame sizes, flow control and the
order of frames are unchanged; another stream waits for at most one batch.

Framing: h2's `send_data` takes one frame's data, and per frame it ran its state machines,
built a `DataFrame` and serialized it: under a 100 MB output (6,400 frames of 16 KiB) that was
the largest part of the daemon's CPU after the copies (py-spy). `send_data_frames` does for a
whole batch what `send_data` does for one frame — the same checks, the same state machine
inputs and flow-control accounting, once — and writes the frames' 9-byte headers itself: the
bytes on the wire are the same (tests/test_hypercorn_fixes.py compares them with h2's).
"""

from __future__ import annotations

import struct
from typing import Any

import h2
import h2.exceptions
from h2.connection import ConnectionInputs, H2Connection
from h2.stream import StreamInputs
from hypercorn.protocol import h2 as hypercorn_h2
from hypercorn.protocol.h2 import H2Protocol, StreamBuffer

# What the sending task frames of one stream before one socket write.
SEND_BATCH_BYTES = 256 << 10


# `send_data_frames` writes into h2's private send buffer and drives its state machines as h2
# 4.x does; another h2 gets h2's own `send_data`, a frame at a time.
OWN_FRAMING = h2.__version__.startswith("4.") and isinstance(
    getattr(H2Connection(), "_data_to_send", None), bytearray
)

# A frame header: 24-bit length, type, flags, stream id (RFC 9113, 4.1).
_FRAME_HEADER = struct.Struct(">HBBBL")
_DATA_FRAME = 0x0


def send_data_frames(connection: H2Connection, stream_id: int, data: bytes) -> None:
    """`connection.send_data` for `data` of any length within the flow-control window: as many
    DATA frames (none flagged, unpadded) as the peer's maximum frame size makes of it."""
    frame_size = connection.max_outbound_frame_size
    if len(data) <= frame_size:
        connection.send_data(stream_id, data)
        return
    window = connection.local_flow_control_window(stream_id)
    if len(data) > window:
        raise h2.exceptions.FlowControlError(
            f"Cannot send {len(data)} bytes, flow control window is {window}"
        )
    if not OWN_FRAMING:
        for start in range(0, len(data), frame_size):
            connection.send_data(stream_id, data[start : start + frame_size])
        return
    connection.state_machine.process_input(ConnectionInputs.SEND_DATA)
    stream = connection.streams[stream_id]
    stream.state_machine.process_input(StreamInputs.SEND_DATA)
    stream.outbound_flow_control_window -= len(data)
    connection.outbound_flow_control_window -= len(data)
    out = connection._data_to_send
    view = memoryview(data)
    stream_bits = stream_id & 0x7FFFFFFF
    for start in range(0, len(data), frame_size):
        piece = view[start : start + frame_size]
        length = len(piece)
        out += _FRAME_HEADER.pack(length >> 8, length & 0xFF, _DATA_FRAME, 0, stream_bits)
        out += piece


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


async def _send_data(self: H2Protocol, stream_id: int) -> None:
    """hypercorn's `H2Protocol._send_data`, framing up to SEND_BATCH_BYTES before a write."""
    try:
        buffer = self.stream_buffers[stream_id]
        batch = max(0, min(self.connection.local_flow_control_window(stream_id), SEND_BATCH_BYTES))
        data = await buffer.pop(batch)
        if data:
            send_data_frames(self.connection, stream_id, data)
            await self._flush()
        else:
            self.priority.block(stream_id)
        if buffer.complete:
            self.connection.end_stream(stream_id)
            await self._flush()
            del self.stream_buffers[stream_id]
            self.priority.remove_stream(stream_id)
    except (h2.exceptions.StreamClosedError, KeyError, h2.exceptions.ProtocolError):
        # The stream or connection closed while data waited: closed here too (as hypercorn).
        await self.stream_buffers[stream_id].close()
        del self.stream_buffers[stream_id]
        self.priority.remove_stream(stream_id)


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
    H2Protocol._send_data = _send_data  # type: ignore[method-assign]
    StreamBuffer.push = _push  # type: ignore[method-assign]
    StreamBuffer.pop = _pop  # type: ignore[method-assign]
    _installed = True
