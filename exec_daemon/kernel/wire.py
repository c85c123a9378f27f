"""Just enough of the protobuf wire format to look inside bytes that did not decode."""

from __future__ import annotations

from collections.abc import Iterator


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, int, bytes | int]]:
    """(field number, wire type, value) for each field; stops at the first malformed byte."""
    pos = 0
    try:
        while pos < len(data):
            key, pos = read_varint(data, pos)
            number, wire_type = key >> 3, key & 7
            if wire_type == 0:
                value, pos = read_varint(data, pos)
                yield number, wire_type, value
            elif wire_type == 2:
                length, pos = read_varint(data, pos)
                if pos + length > len(data):
                    return
                yield number, wire_type, data[pos : pos + length]
                pos += length
            elif wire_type in (1, 5):
                size = 8 if wire_type == 1 else 4
                yield number, wire_type, data[pos : pos + size]
                pos += size
            else:
                return
    except ValueError:
        return


def first_field(data: bytes, number: int, wire_type: int) -> bytes | int | None:
    for found_number, found_type, value in fields(data):
        if found_number == number and found_type == wire_type:
            return value
    return None
