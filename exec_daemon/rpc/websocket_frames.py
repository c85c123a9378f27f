"""Where the WebSocket frames of a proxied byte stream end (RFC 6455, section 5.2), so that a
proxy that passes frames through untouched (the IDE's: exec_daemon/rpc/ide.py) can add a close
frame of its own between two of them, never inside one."""

from __future__ import annotations

import struct

# RFC 6455's "service restart": the VM was restored from a snapshot; reconnect.
CLOSE_RESTORED = 1012
RESTORED_REASON = "restored from a snapshot: reconnect"
CLOSE_OPCODE = 0x8
FIN = 0x80
MASKED = 0x80
MAX_REASON_BYTES = 123  # a control frame's payload is at most 125 bytes, 2 of them the code


class FrameBoundaries:
    """Fed every byte of one direction in order; says how far the current frame still goes."""

    def __init__(self) -> None:
        self._header = bytearray()
        self._payload_left = 0

    def feed(self, data: bytes) -> None:
        at, size = 0, len(data)
        while at < size:
            if self._payload_left:
                step = min(self._payload_left, size - at)
                self._payload_left -= step
                at += step
                continue
            self._header.append(data[at])
            at += 1
            if len(self._header) == _header_size(self._header):
                self._payload_left = _payload_size(self._header)
                self._header.clear()

    def bytes_to_boundary(self) -> int:
        """0 between two frames; else how many bytes may be read without passing the frame's
        end (1 at a time through a header, whose length its first bytes tell)."""
        return self._payload_left or (1 if self._header else 0)


def _header_size(header: bytearray) -> int:
    if len(header) < 2:
        return 2
    length = header[1] & 0x7F
    extended = 2 if length == 126 else 8 if length == 127 else 0
    return 2 + extended + (4 if header[1] & MASKED else 0)


def _payload_size(header: bytearray) -> int:
    length = header[1] & 0x7F
    if length == 126:
        return int(struct.unpack_from("!H", header, 2)[0])
    if length == 127:
        return int(struct.unpack_from("!Q", header, 2)[0])
    return length


def close_frame(code: int, reason: str) -> bytes:
    """A server's (unmasked) close frame."""
    payload = struct.pack("!H", code) + reason.encode()[:MAX_REASON_BYTES]
    return bytes([FIN | CLOSE_OPCODE, len(payload)]) + payload
