"""Secret redaction (--secret-redaction-enabled): injected secrets never leave the daemon.

The secrets are the values of the variables named in CLOUD_AGENT_INJECTED_SECRET_NAMES
(comma-separated) in the daemon's environment; a later UpdateEnvironmentVariables adds to them
(a value once known stays redacted: it may live on in files and shells). Values shorter than 4
characters are skipped. Each occurrence becomes `[REDACTED]`; where secrets overlap the longest
one wins (leftmost-longest matching with an Aho-Corasick automaton, ~0.5-0.8 GB/s on ASCII).

Covered: every string and bytes field of every tool result (so Read, Grep, shell output, Await
tails and output files read back through any tool), every streamed delta, rejections and hook
messages (this middleware sits outside permissions and hooks), the answer's hook feedback and
rewritten args, and ExecError messages. Files on disk keep their bytes: redaction happens when
content leaves the daemon.

Streams: a secret may be split across two deltas (a program printing one byte per flush). Each
stream (shell stdout, shell stderr, a subagent's text) keeps back the longest tail that could
still grow into a secret — only as long as it is a proper prefix of one — and sends it with the
next delta or when the call ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import ahocorasick_rs
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from agent.v1.shell_pb2 import ShellToolCallDelta
from agent.v1.tool_call_pb2 import ToolCallDelta
from exec_daemon.kernel.context import Invocation, Middleware, Next
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.state import Daemon

log = logging.getLogger(__name__)

REDACTED = "[REDACTED]"
SECRET_NAMES_VARIABLE = "CLOUD_AGENT_INJECTED_SECRET_NAMES"
MIN_SECRET_LENGTH = 4
# Texts longer than this are redacted slice by slice (the automaton is fastest on slices).
_SLICE = 256 * 1024


class SecretMatcher:
    """An immutable set of secrets and the automata that find them in text and bytes."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True)
        self.secrets: tuple[str, ...] = tuple(values)
        self.longest = len(values[0]) if values else 0
        self._text = (
            ahocorasick_rs.AhoCorasick(values, matchkind=ahocorasick_rs.MatchKind.LeftmostLongest)
            if values
            else None
        )
        encoded = [value.encode("utf-8", "surrogatepass") for value in values]
        self._bytes = (
            ahocorasick_rs.BytesAhoCorasick(
                encoded, matchkind=ahocorasick_rs.MatchKind.LeftmostLongest
            )
            if values
            else None
        )
        self._by_first_char: dict[str, tuple[str, ...]] = {}
        for value in values:
            self._by_first_char[value[0]] = (*self._by_first_char.get(value[0], ()), value)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def redact(self, text: str) -> str:
        """`text` with every secret replaced; the same object when there was none."""
        if self._text is None or not text:
            return text
        if len(text) > _SLICE:
            stream = StreamRedactor()
            parts = [stream.feed(self, text[i : i + _SLICE]) for i in range(0, len(text), _SLICE)]
            parts.append(stream.flush(self))
            joined = "".join(parts)
            return text if joined == text else joined
        return self._splice(text, self._matches(text))

    def _matches(self, text: str) -> list[tuple[int, int, int]]:
        """(secret index, start, end) in characters, leftmost-longest, not overlapping."""
        assert self._text is not None and self._bytes is not None
        if text.isascii():
            return self._text.find_matches_as_indexes(text)
        # Other text is searched as UTF-8 (faster than the str automaton's own conversion, and
        # lone surrogates from undecodable bytes pass); byte offsets become character offsets.
        data = text.encode("utf-8", "surrogatepass")
        found = self._bytes.find_matches_as_indexes(data)
        matches: list[tuple[int, int, int]] = []
        byte_position = char_position = 0
        for index, start, _stop in found:
            char_position += len(data[byte_position:start].decode("utf-8", "surrogatepass"))
            byte_position = start
            matches.append((index, char_position, char_position + len(self.secrets[index])))
        return matches

    @staticmethod
    def _splice(text: str, matches: list[tuple[int, int, int]], end: int | None = None) -> str:
        if not matches:
            return text if end is None else text[:end]
        parts: list[str] = []
        position = 0
        for _index, start, stop in matches:
            parts.append(text[position:start])
            parts.append(REDACTED)
            position = stop
        parts.append(text[position:end])
        return "".join(parts)

    def redact_bytes(self, data: bytes) -> bytes:
        if self._bytes is None or not data:
            return data
        matches = self._bytes.find_matches_as_indexes(data)
        if not matches:
            return data
        parts: list[bytes] = []
        position = 0
        marker = REDACTED.encode()
        for _index, start, stop in matches:
            parts.append(data[position:start])
            parts.append(marker)
            position = stop
        parts.append(data[position:])
        return b"".join(parts)

    def held_tail_start(self, text: str) -> int:
        """Where the longest suffix of `text` that is a proper prefix of a secret begins."""
        first = max(0, len(text) - self.longest + 1)
        by_first_char = self._by_first_char
        for start in range(first, len(text)):
            candidates = by_first_char.get(text[start])
            if candidates is None:
                continue
            tail = text[start:]
            if any(len(secret) > len(tail) and secret.startswith(tail) for secret in candidates):
                return start
        return len(text)

    def redact_stream_part(self, text: str) -> tuple[str, str]:
        """(what can be sent now, redacted; the tail to keep until more text comes)."""
        cut = self.held_tail_start(text)
        if self._text is None:
            return text[:cut], text[cut:]
        sent: list[tuple[int, int, int]] = []
        position = 0
        for match in self._matches(text):
            if match[1] >= cut:
                break
            sent.append(match)
            position = match[2]
        end = max(cut, position)
        return self._splice(text, sent, end), text[end:]


class StreamRedactor:
    """One stream of text (e.g. a shell's stdout) with its held-back tail."""

    def __init__(self) -> None:
        self._tail = ""

    def feed(self, matcher: SecretMatcher, text: str) -> str:
        if not matcher:
            pending, self._tail = self._tail + text, ""
            return pending
        sendable, self._tail = matcher.redact_stream_part(self._tail + text)
        return sendable

    def flush(self, matcher: SecretMatcher) -> str:
        pending, self._tail = self._tail, ""
        return matcher.redact(pending)


class SecretStore:
    """The daemon's known secrets; follows the environment (UpdateEnvironmentVariables)."""

    def __init__(self, daemon: Daemon) -> None:
        self._known: set[str] = set()
        self.matcher = SecretMatcher(())
        self.learn(daemon.env.snapshot())
        daemon.env.subscribe(self.learn)

    def learn(self, env: dict[str, str]) -> None:
        names = [name.strip() for name in env.get(SECRET_NAMES_VARIABLE, "").split(",")]
        values = {env.get(name, "") for name in names if name}
        new = {value for value in values if len(value) >= MIN_SECRET_LENGTH} - self._known
        if new:
            self._known |= new
            self.matcher = SecretMatcher(self._known)
            log.info("redacting %d injected secret(s)", len(self._known))


# Encoded images: a secret's bytes occurring inside compressed pixels are no text anyone reads,
# and replacing them would only corrupt the picture.
_IMAGE_FIELDS = frozenset(
    {
        "agent.v1.ReadImage.data",
        "agent.v1.McpImage.data",
        "agent.v1.ComputerUseSuccess.screenshot",
        "agent.v1.GenerateImageSuccess.data",
    }
)


def redact_message(message: Message, matcher: SecretMatcher) -> None:
    """Redacts, in place, every string and bytes field of `message`, nested ones included
    (but not the bytes of encoded images)."""
    for field, value in message.ListFields():
        kind = field.type
        if field.full_name in _IMAGE_FIELDS:
            continue
        if kind == FieldDescriptor.TYPE_MESSAGE:
            entry = field.message_type
            if entry is not None and entry.GetOptions().map_entry:
                _redact_map(value, entry.fields_by_name["value"], matcher)
            elif field.is_repeated:
                for item in value:
                    redact_message(item, matcher)
            else:
                redact_message(value, matcher)
        elif kind in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
            redact = _redactor_for(kind, matcher)
            if field.is_repeated:
                for index, item in enumerate(value):
                    cleaned = redact(item)
                    if cleaned is not item:
                        value[index] = cleaned
            else:
                cleaned = redact(value)
                if cleaned is not value:
                    setattr(message, field.name, cleaned)


def _redactor_for(kind: int, matcher: SecretMatcher) -> Callable[[Any], Any]:
    return matcher.redact if kind == FieldDescriptor.TYPE_STRING else matcher.redact_bytes


def _redact_map(mapping: Any, value_field: FieldDescriptor, matcher: SecretMatcher) -> None:
    if value_field.type == FieldDescriptor.TYPE_MESSAGE:
        for key in mapping:
            redact_message(mapping[key], matcher)
    elif value_field.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
        redact = _redactor_for(value_field.type, matcher)
        for key in list(mapping):
            cleaned = redact(mapping[key])
            if cleaned is not mapping[key]:
                mapping[key] = cleaned


class _CallStreams:
    """The held-back tails of one call's streamed deltas."""

    def __init__(self, store: SecretStore) -> None:
        self._store = store
        self._streams: dict[tuple[str, str], StreamRedactor] = {}

    def redact_delta(self, delta: ToolCallDelta) -> ToolCallDelta | None:
        """The delta to send (None when everything in it is held back for now)."""
        matcher = self._store.matcher
        kind = delta.WhichOneof("delta")
        if kind == "shell_tool_call_delta":
            stream = delta.shell_tool_call_delta.WhichOneof("delta")
            if stream is None:
                return delta
            original = getattr(delta.shell_tool_call_delta, stream)
            text = self._stream(kind, stream).feed(matcher, original)
            if text is original:
                return delta
            return ToolCallDelta(shell_tool_call_delta={stream: text}) if text else None
        if kind == "task_tool_call_delta":
            task = delta.task_tool_call_delta
            text = self._stream(kind, task.agent_id).feed(matcher, task.text)
            if not text:
                return None
            return ToolCallDelta(
                task_tool_call_delta={"agent_id": matcher.redact(task.agent_id), "text": text}
            )
        if matcher:
            # Other deltas (edit content carries its own offsets) are redacted one by one.
            redact_message(delta, matcher)
        return delta

    def _stream(self, kind: str, name: str) -> StreamRedactor:
        return self._streams.setdefault((kind, name), StreamRedactor())

    def remainders(self) -> list[ToolCallDelta]:
        matcher = self._store.matcher
        deltas: list[ToolCallDelta] = []
        for (kind, name), stream in self._streams.items():
            text = stream.flush(matcher)
            if not text:
                continue
            if kind == "shell_tool_call_delta":
                deltas.append(
                    ToolCallDelta(shell_tool_call_delta=ShellToolCallDelta(**{name: text}))
                )
            else:
                deltas.append(
                    ToolCallDelta(
                        task_tool_call_delta={"agent_id": matcher.redact(name), "text": text}
                    )
                )
        return deltas


def redaction_middleware(daemon: Daemon) -> Middleware:
    store = daemon.service(SecretStore)

    async def redaction(inv: Invocation, call_next: Next) -> Message:
        streams = _CallStreams(store)
        emit = inv.ctx.emit

        async def redacting_emit(delta: ToolCallDelta) -> None:
            cleaned = streams.redact_delta(delta)
            if cleaned is not None:
                await emit(cleaned)

        async def send_remainders() -> None:
            for delta in streams.remainders():
                await emit(delta)

        ctx = inv.ctx.with_emit(redacting_emit)
        try:
            result = await call_next(replace(inv, ctx=ctx))
        except CodedError as exc:
            await send_remainders()
            raise CodedError(exc.code, store.matcher.redact(exc.message)) from exc
        except asyncio.CancelledError:
            await send_remainders()
            raise
        await send_remainders()
        matcher = store.matcher
        if matcher:
            redact_message(result, matcher)
            redact_message(ctx.report.feedback, matcher)
            if ctx.report.args_run is not None:
                redact_message(ctx.report.args_run, matcher)
        return result

    return redaction
