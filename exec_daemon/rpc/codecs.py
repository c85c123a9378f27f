"""Codecs for ExecStream that keep one malformed tool call from ending the whole stream.

A message whose framing is intact but whose body does not decode (bad bytes, a wrong JSON type)
becomes a `MalformedElement` carrying the call id when it can still be read, so the stream
answers that id with ExecError{invalid_argument} and carries on.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from connectrpc.codec import Codec
from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
from google.protobuf.json_format import ParseError
from google.protobuf.message import DecodeError, Message

from agent.v1.exec_pb2 import ExecStreamElement
from exec_daemon.kernel.wire import first_field

log = logging.getLogger(__name__)


MAX_CALL_ID = 2**32 - 1


@dataclass(frozen=True)
class MalformedElement:
    call_id: int | None
    reason: str


def _call_id_from_binary(data: bytes) -> int | None:
    client_message = first_field(data, 1, 2)
    if not isinstance(client_message, bytes):
        return None
    call_id = first_field(client_message, 1, 0)
    return call_id if isinstance(call_id, int) else None


def _call_id_from_json(data: bytes | bytearray) -> int | None:
    try:
        document = json.loads(data)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    client_message = document.get("execClientMessage", document.get("exec_client_message"))
    if not isinstance(client_message, dict):
        return None
    call_id = client_message.get("id", 0)
    if isinstance(call_id, str) and call_id.isdigit():
        call_id = int(call_id)
    # A call id is a uint32: anything else (-1, 1.5, true, 2**32) names no call, so the stream
    # itself is answered invalid_argument.
    if type(call_id) is not int or not 0 <= call_id <= MAX_CALL_ID:
        return None
    return call_id


class _LenientCodec(Codec[Message, Any]):
    def __init__(self, inner: Codec, find_id: Any) -> None:
        self._inner = inner
        self._find_id = find_id

    def name(self) -> str:
        return self._inner.name()

    def encode(self, message: Message) -> bytes:
        return self._inner.encode(message)

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> Any:
        try:
            return self._inner.decode(data, message_class)
        except (DecodeError, ParseError, ValueError, TypeError, KeyError) as exc:
            if message_class is not ExecStreamElement:
                raise
            log.info("malformed ExecStream element: %s", exc)
            return MalformedElement(
                call_id=self._find_id(bytes(data)),
                reason=f"the message could not be decoded as {message_class.__name__}",
            )


def exec_stream_codecs() -> list[Codec]:
    return [
        _LenientCodec(google_protobuf_binary_codec(), _call_id_from_binary),
        _LenientCodec(google_protobuf_json_codec(), _call_id_from_json),
    ]
