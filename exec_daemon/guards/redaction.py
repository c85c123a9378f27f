"""Secret redaction (--secret-redaction-enabled): injected secrets never leave the daemon.

The secrets are the values of the variables named in CLOUD_AGENT_INJECTED_SECRET_NAMES
(comma-separated) in the daemon's environment; a later UpdateEnvironmentVariables adds to them
(a value once known stays redacted: it may live on in files and shells). A shell call's own
variable (ShellArgs.env) named in its secret_env or among those names is redacted from that
call's answer only (deltas, result, the echoed args): calls may come from the agent, which must
not be able to hide text (a line of a diff) from everything the daemon sends later. Values shorter than 4
characters are skipped. Each occurrence becomes `[REDACTED]`; where secrets overlap the longest
one wins (leftmost-longest matching with an Aho-Corasick automaton, ~0.5-0.8 GB/s on ASCII).

Covered: every string and bytes field of every tool result (so Read, Grep, shell output, Await
tails and output files read back through any tool), every streamed delta, rejections and hook
messages (this middleware sits outside permissions and hooks), the answer's hook feedback and
rewritten args, and ExecError messages. Files on disk keep their bytes: redaction happens when
content leaves the daemon.

ControlService: GetDiff and ReadTextFile are redacted too (their text reaches people and
models). ReadBinaryFile is not: it is the orchestrator's byte-exact file transfer (offsets,
total_size and eof count the file's bytes), and a chunk cannot see a secret crossing its edge.

Streams: a secret may be split across two deltas (a program printing one byte per flush). Each
stream (shell stdout, shell stderr, a subagent's text, an edit's new content) keeps back the
longest tail that could still grow into a secret — only as long as it is a proper prefix of one
— and sends it with the next delta or when the call ends. A shell's stdout and stderr are also
read together, in the order they were written: a secret split between them (its start on
stdout, the rest on stderr) is masked in both, in the deltas and in the result's fields. So
while one stream ends with what may begin a secret, the other stream's later text waits too.

Cut outputs: where a long output was cut (the shell keeps its start and its end), the end of
the kept start that could begin a secret and the start of the kept end that could finish one
are masked too (even one character: it cannot be told from the start of a secret).
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import ahocorasick_rs
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from agent.v1.files_pb2 import EditToolCallDelta
from agent.v1.shell_pb2 import ShellArgs
from agent.v1.tool_call_pb2 import ToolCallDelta
from exec_daemon.kernel.context import Invocation, Middleware, Next
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.secrets import registered_secrets
from exec_daemon.kernel.state import Daemon

log = logging.getLogger(__name__)

REDACTED = "[REDACTED]"
SECRET_NAMES_VARIABLE = "CLOUD_AGENT_INJECTED_SECRET_NAMES"
MIN_SECRET_LENGTH = 4
# Texts longer than this are redacted slice by slice (the automaton is fastest on slices).
_SLICE = 256 * 1024
# Where the shell cut an output too long to keep whole (tools/shell/output.py, KeptBytes.text):
# a secret may straddle the cut, its start ending the kept head, its end starting the tail.
_CUT_MARKER = re.compile(r"\n\[exec-daemon: \d+ bytes of [a-z]+ cut here[^\n]*\]\n")
_CUT_MARKER_START = "[exec-daemon: "


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
        if _CUT_MARKER_START in text:
            masked = self._redact_plain(self._mask_cut_edges(text))
            return text if masked == text else masked
        return self._redact_plain(text)

    def _redact_plain(self, text: str) -> str:
        if len(text) > _SLICE:
            stream = StreamRedactor()
            parts = [stream.feed(self, text[i : i + _SLICE]) for i in range(0, len(text), _SLICE)]
            parts.append(stream.flush(self))
            joined = "".join(parts)
            return text if joined == text else joined
        return self._splice(text, self._matches(text))

    def _mask_cut_edges(self, text: str) -> str:
        """Masks what may be a piece of a secret on either side of an output's cut markers."""
        parts: list[str] = []
        position = 0
        for cut in _CUT_MARKER.finditer(text):
            # As a stream is cut: a possible secret start before the marker is masked, a secret
            # held whole there is masked whole.
            sendable, held = self.redact_stream_part(text[position : cut.start()])
            parts.append(sendable + (REDACTED if held else ""))
            parts.append(cut.group())
            position = cut.end()
            piece = self._leading_secret_end(text[position : position + self.longest])
            if piece:
                parts.append(REDACTED)
                position += piece
        if not parts:
            return text
        parts.append(text[position:])
        return "".join(parts)

    def _leading_secret_end(self, text: str) -> int:
        """The length of the longest start of `text` that is a proper end of a secret."""
        for length in range(min(len(text), self.longest - 1), 0, -1):
            start = text[:length]
            if any(len(secret) > length and secret.endswith(start) for secret in self.secrets):
                return length
        return 0

    def straddling_end(self, before: str, text: str) -> int:
        """How many characters at the start of `text` belong to a secret that begins in
        `before` (the text just before it)."""
        if self._text is None or not before or not text:
            return 0
        before = before[-(self.longest - 1) :]
        for _index, start, stop in self._matches(before + text[: self.longest]):
            if start < len(before) < stop:
                return stop - len(before)
        return 0

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

    def held_bytes(self) -> int:
        return len(_utf8(self._tail))


class InterleavedRedactor:
    """The streams of one output in the order they were written (a shell's stdout and stderr).

    A secret is masked wherever a reader could put it together: whole in one stream although
    the other stream's text came in between, or split between the streams (the first part on
    stdout, the rest on stderr: the interleaved output shows it whole). Each stream keeps back
    its own possible secret start, and so does the interleaved text.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[str, str]] = []
        # Raw characters of each stream sent so far.
        self.consumed: dict[str, int] = {}
        # (stream, offset in that stream's raw text, text): pieces of secrets split between
        # streams, for the call's result (its per-stream fields show each piece alone).
        self.split_pieces: list[tuple[str, int, str]] = []
        # Streams whose text sent last (in this release) ended inside a masked secret.
        self._ends_masked: set[str] = set()

    def feed(self, matcher: SecretMatcher, stream: str, text: str) -> list[tuple[str, str]]:
        """What can be sent now, as (stream, redacted text) in order."""
        if text:
            self._pending.append((stream, text))
        return self._release(matcher, final=False)

    def flush(self, matcher: SecretMatcher) -> list[tuple[str, str]]:
        return self._release(matcher, final=True)

    def _release(self, matcher: SecretMatcher, final: bool) -> list[tuple[str, str]]:
        pieces, starts = self._pending, []
        position = 0
        for _stream, text in pieces:
            starts.append(position)
            position += len(text)
        combined = "".join(text for _stream, text in pieces)
        hold = len(combined)
        masks: list[tuple[int, int, bool]] = []  # global start, end, split between streams
        if matcher:
            for local_text, segments in self._views(pieces, starts):
                cut = matcher.held_tail_start(local_text)
                if not final and cut < len(local_text):
                    hold = min(hold, _to_global(segments, cut))
                for _index, start, end in matcher._matches(local_text):
                    if segments:
                        masks.extend((a, b, False) for a, b in _spans(segments, start, end))
                    else:
                        masks.append((start, end, _streams_between(pieces, starts, start, end) > 1))
        end = hold
        kept = [mask for mask in masks if mask[0] < hold or final]
        for _start, stop, _split in kept:
            end = max(end, stop)
        if final:
            end = len(combined)
        return self._emit(pieces, starts, combined, end, kept)

    def _views(
        self, pieces: list[tuple[str, str]], starts: list[int]
    ) -> list[tuple[str, list[tuple[int, int, int]]]]:
        """The interleaved text (no segments: positions are global), then each stream's own
        text with its (local start, global start, length) segments."""
        views: list[tuple[str, list[tuple[int, int, int]]]] = [
            ("".join(text for _stream, text in pieces), [])
        ]
        names = list(dict.fromkeys(stream for stream, _text in pieces))
        if len(names) < 2:
            return views
        for name in names:
            segments, parts, local = [], [], 0
            for (stream, text), start in zip(pieces, starts, strict=True):
                if stream == name:
                    segments.append((local, start, len(text)))
                    parts.append(text)
                    local += len(text)
            views.append(("".join(parts), segments))
        return views

    def _emit(
        self,
        pieces: list[tuple[str, str]],
        starts: list[int],
        combined: str,
        end: int,
        masks: list[tuple[int, int, bool]],
    ) -> list[tuple[str, str]]:
        self._ends_masked = set()
        out: list[tuple[str, str]] = []
        rest: list[tuple[str, str]] = []
        for (stream, text), start in zip(pieces, starts, strict=True):
            stop = start + len(text)
            sent_to = min(stop, max(start, end))
            if sent_to > start:
                piece = self._redact_piece(stream, combined, start, sent_to, masks)
                if out and out[-1][0] == stream:
                    out[-1] = (stream, out[-1][1] + piece)
                elif piece:
                    out.append((stream, piece))
                self.consumed[stream] = self.consumed.get(stream, 0) + sent_to - start
            if sent_to < stop:
                rest.append((stream, combined[sent_to:stop]))
        self._pending = rest
        return out

    def _redact_piece(
        self, stream: str, combined: str, start: int, stop: int, masks: list[tuple[int, int, bool]]
    ) -> str:
        inside = _merged(
            (max(a, start), min(b, stop), split) for a, b, split in masks if a < stop and b > start
        )
        if not inside:
            self._ends_masked.discard(stream)
            return combined[start:stop]
        parts: list[str] = []
        position = start
        for a, b, split in inside:
            parts.append(combined[position:a])
            # A secret written in several pieces of this stream shows as one marker.
            if a > start or stream not in self._ends_masked:
                parts.append(REDACTED)
            if split:
                offset = self.consumed.get(stream, 0) + a - start
                self.split_pieces.append((stream, offset, combined[a:b]))
            position = b
        parts.append(combined[position:stop])
        if position == stop:
            self._ends_masked.add(stream)
        else:
            self._ends_masked.discard(stream)
        return "".join(parts)


def _merged(masks: Iterable[tuple[int, int, bool]]) -> list[tuple[int, int, bool]]:
    """Overlapping masks as one (secrets side by side stay two)."""
    merged: list[tuple[int, int, bool]] = []
    for a, b, split in sorted(masks):
        if merged and a < merged[-1][1]:
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], b), last[2] or split)
        else:
            merged.append((a, b, split))
    return merged


def _streams_between(pieces: list[tuple[str, str]], starts: list[int], start: int, end: int) -> int:
    """How many streams wrote the interleaved text's [start, end)."""
    names = {
        stream
        for (stream, text), first in zip(pieces, starts, strict=True)
        if first < end and first + len(text) > start
    }
    return len(names)


def _to_global(segments: list[tuple[int, int, int]], local: int) -> int:
    """A stream's own position as a position in the interleaved text (no segments: itself)."""
    if not segments:
        return local
    index = bisect.bisect_right([segment[0] for segment in segments], local) - 1
    if index < 0:
        return segments[0][1]
    local_start, global_start, length = segments[index]
    return global_start + min(local - local_start, length)


def _spans(segments: list[tuple[int, int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The interleaved spans of a stream's own [start, end) (empty for the interleaved view)."""
    spans = []
    for local_start, global_start, length in segments:
        a, b = max(start, local_start), min(end, local_start + length)
        if a < b:
            spans.append((global_start + a - local_start, global_start + b - local_start))
    return spans


class SecretStore:
    """The daemon's known secrets; follows the environment (UpdateEnvironmentVariables)."""

    def __init__(self, daemon: Daemon) -> None:
        self._known: set[str] = set()
        self._secret_names: set[str] = set()
        self.matcher = SecretMatcher(())
        self.learn(daemon.env.snapshot())
        daemon.env.subscribe(self.learn)

    def learn(self, env: dict[str, str]) -> None:
        self._secret_names = {
            name.strip() for name in env.get(SECRET_NAMES_VARIABLE, "").split(",") if name.strip()
        }
        self._add({env.get(name, "") for name in self._secret_names} | registered_secrets())

    def command_env_secret_names(self, args: ShellArgs) -> frozenset[str]:
        """The names of a shell call's own variables whose values are secrets (named in its
        secret_env, or among the daemon's secret names)."""
        declared = set(args.secret_env) | self._secret_names
        return frozenset(name for name in args.env if name in declared)

    def command_env_secrets(self, args: ShellArgs) -> frozenset[str]:
        """The values of a shell call's own variables that are secrets. They are redacted from
        that call's answer only: a call (the agent's, perhaps) cannot make the daemon hide text
        from others."""
        return frozenset(
            value
            for name in self.command_env_secret_names(args)
            if len(value := args.env[name]) >= MIN_SECRET_LENGTH
        )

    def _add(self, values: set[str]) -> None:
        new = {value for value in values if len(value) >= MIN_SECRET_LENGTH} - self._known
        if new:
            self._known |= new
            self.matcher = SecretMatcher(self._known)
            log.info("redacting %d injected secret(s)", len(self._known))


def json_text_redaction(store: SecretStore) -> Callable[[str], str]:
    """Redacts JSON text (the session record's lines): each secret as JSON writes it inside a
    string, a quote, a backslash or a control character in it escaped, as well as raw."""
    made: list[SecretMatcher] = [SecretMatcher(()), SecretMatcher(())]

    def redact(text: str) -> str:
        matcher, escaped = made
        if matcher is not store.matcher:
            matcher = store.matcher
            forms = {json.dumps(s, ensure_ascii=False)[1:-1] for s in matcher.secrets}
            escaped = SecretMatcher(forms | set(matcher.secrets))
            made[:] = [matcher, escaped]
        return escaped.redact(text)

    return redact


async def redact_outgoing_text(daemon: Daemon, text: str) -> str:
    """`text` as ControlService may send it: redacted when --secret-redaction-enabled (off the
    event loop when it is long: a diff may be tens of megabytes)."""
    if not daemon.config.secret_redaction_enabled:
        return text
    matcher = daemon.service(SecretStore).matcher
    if len(text) <= _SLICE:
        return matcher.redact(text)
    return await asyncio.to_thread(matcher.redact, text)


def secret_context_bytes(daemon: Daemon) -> int:
    """How much text before a window redaction needs to see (0 when redaction is off)."""
    if not daemon.config.secret_redaction_enabled:
        return 0
    return 4 * daemon.service(SecretStore).matcher.longest


async def redact_outgoing_window(
    daemon: Daemon, text: str, *, before: str, at_end: bool
) -> tuple[str, int]:
    """A window of a longer text (ReadTextFile's pages), redacted: (what to send, how many
    characters of `text` it covers). What may begin a secret at the window's end is left for the
    next window, which then holds the secret whole (masked instead when nothing else is in the
    window); the end of a secret begun in `before` (the text preceding the window) is masked."""
    if not daemon.config.secret_redaction_enabled or not text:
        return text, len(text)
    matcher = daemon.service(SecretStore).matcher
    if not matcher:
        return text, len(text)
    head = matcher.straddling_end(before, text)
    masked_head = REDACTED if head else ""
    if at_end:
        return masked_head + await redact_outgoing_text(daemon, text[head:]), len(text)
    # As a stream is cut: a secret the window holds whole is masked whole even where a possible
    # start of another secret (held back for the next window) begins inside it.
    rest = text[head:]
    if len(rest) > _SLICE:
        body, held = await asyncio.to_thread(matcher.redact_stream_part, rest)
    else:
        body, held = matcher.redact_stream_part(rest)
    covered = len(text) - len(held)
    if covered == 0:
        return REDACTED, len(text)
    return masked_head + body, covered


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


class CallSecrets:
    """The daemon's secrets and one call's own (ShellArgs.env declared secret)."""

    def __init__(self, store: SecretStore, values: frozenset[str]) -> None:
        self._store = store
        self._values = values
        self._base: SecretMatcher | None = None
        self._matcher = store.matcher

    @property
    def matcher(self) -> SecretMatcher:
        base = self._store.matcher  # it may learn more while the call runs
        if base is not self._base:
            self._base = base
            self._matcher = SecretMatcher((*base.secrets, *self._values))
        return self._matcher


def call_secrets(store: SecretStore, args: Message) -> SecretStore | CallSecrets:
    """The secrets of one call: the daemon's, and a shell call's own declared ones."""
    if isinstance(args, ShellArgs) and args.env:
        own = store.command_env_secrets(args)
        if own:
            return CallSecrets(store, own)
    return store


def redact_json_value(value: Any, matcher: SecretMatcher) -> Any:
    """JSON data (dicts, lists, strings, numbers...) with every secret in its strings and keys
    masked, as a copy."""
    if isinstance(value, str):
        return matcher.redact(value)
    if isinstance(value, list):
        return [redact_json_value(item, matcher) for item in value]
    if isinstance(value, dict):
        return {
            redact_json_value(key, matcher): redact_json_value(item, matcher)
            for key, item in value.items()
        }
    return value


class _CallStreams:
    """The held-back tails of one call's streamed deltas."""

    def __init__(self, store: SecretStore | CallSecrets) -> None:
        self._store = store
        self._shell = InterleavedRedactor()
        self._tasks: dict[str, StreamRedactor] = {}
        # Per edited path: its held-back tail and where in the file the next raw text begins.
        self._edits: dict[str, tuple[StreamRedactor, int]] = {}

    def redact_delta(self, delta: ToolCallDelta) -> list[ToolCallDelta]:
        """The deltas to send now (none while everything in it is held back)."""
        matcher = self._store.matcher
        kind = delta.WhichOneof("delta")
        if kind == "shell_tool_call_delta":
            stream = delta.shell_tool_call_delta.WhichOneof("delta")
            if stream not in ("stdout", "stderr"):
                return [delta]
            text = getattr(delta.shell_tool_call_delta, stream)
            return _shell_deltas(self._shell.feed(matcher, stream, text))
        if kind == "task_tool_call_delta":
            task = delta.task_tool_call_delta
            text = self._tasks.setdefault(task.agent_id, StreamRedactor()).feed(matcher, task.text)
            return [_task_delta(matcher, task.agent_id, text)] if text else []
        if kind == "edit_tool_call_delta" and matcher:
            return self._edit_delta(matcher, delta.edit_tool_call_delta)
        if matcher:
            redact_message(delta, matcher)
        return [delta]

    def _edit_delta(self, matcher: SecretMatcher, edit: EditToolCallDelta) -> list[ToolCallDelta]:
        """Edit content carries the file offset it starts at: text held back from one delta goes
        out at the start of the next, at its own (earlier) offset."""
        stream, _next = self._edits.get(edit.path, (StreamRedactor(), edit.offset))
        held_bytes = stream.held_bytes()
        text = stream.feed(matcher, edit.content)
        self._edits[edit.path] = (stream, edit.offset + len(_utf8(edit.content)))
        if not text:
            return []
        return [_edit(matcher, edit.path, text, edit.offset - held_bytes)]

    def remainders(self) -> list[ToolCallDelta]:
        matcher = self._store.matcher
        deltas = _shell_deltas(self._shell.flush(matcher))
        for agent_id, task_stream in self._tasks.items():
            text = task_stream.flush(matcher)
            if text:
                deltas.append(_task_delta(matcher, agent_id, text))
        for path, (edit_stream, next_offset) in self._edits.items():
            held_bytes = edit_stream.held_bytes()
            text = edit_stream.flush(matcher)
            if text:
                deltas.append(_edit(matcher, path, text, next_offset - held_bytes))
        return deltas

    def redact_split_secrets(self, result: Message) -> None:
        """Masks, in the result's stdout and stderr, the pieces of secrets split between them."""
        if self._shell.split_pieces:
            _mask_split_pieces(result, self._shell.split_pieces, self._shell.consumed)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _shell_deltas(parts: list[tuple[str, str]]) -> list[ToolCallDelta]:
    deltas = []
    for stream, text in parts:
        if text:
            # Built in place: a message passed to a constructor is serialized and parsed (upb).
            delta = ToolCallDelta()
            setattr(delta.shell_tool_call_delta, stream, text)
            deltas.append(delta)
    return deltas


def _task_delta(matcher: SecretMatcher, agent_id: str, text: str) -> ToolCallDelta:
    return ToolCallDelta(task_tool_call_delta={"agent_id": matcher.redact(agent_id), "text": text})


def _edit(matcher: SecretMatcher, path: str, text: str, offset: int) -> ToolCallDelta:
    return ToolCallDelta(
        edit_tool_call_delta=EditToolCallDelta(
            path=matcher.redact(path), content=text, offset=max(0, offset)
        )
    )


def _mask_split_pieces(
    message: Message, pieces: list[tuple[str, int, str]], totals: dict[str, int]
) -> None:
    """In every `stdout`/`stderr` field of `message`: each piece at its offset in that stream,
    counted from the start (a kept head) or, for a cut output, from the end (the kept tail)."""
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_MESSAGE and not field.is_repeated:
            _mask_split_pieces(value, pieces, totals)
        elif field.name in ("stdout", "stderr") and isinstance(value, str):
            text = value
            total = totals.get(field.name, 0)
            for stream, offset, piece in sorted(pieces, key=lambda p: -p[1]):
                if stream != field.name:
                    continue
                for at in (offset, len(text) - (total - offset)):
                    if 0 <= at and text[at : at + len(piece)] == piece:
                        text = text[:at] + REDACTED + text[at + len(piece) :]
                        break
            if text is not value:
                setattr(message, field.name, text)


def redaction_middleware(daemon: Daemon) -> Middleware:
    store = daemon.service(SecretStore)

    async def redaction(inv: Invocation, call_next: Next) -> Message:
        secrets = call_secrets(store, inv.args)
        streams = _CallStreams(secrets)
        emit = inv.ctx.emit

        async def redacting_emit(delta: ToolCallDelta) -> None:
            for cleaned in streams.redact_delta(delta):
                await emit(cleaned)

        async def send_remainders() -> None:
            for delta in streams.remainders():
                await emit(delta)

        ctx = inv.ctx.with_emit(redacting_emit)
        try:
            result = await call_next(replace(inv, ctx=ctx))
        except CodedError as exc:
            await send_remainders()
            raise CodedError(exc.code, secrets.matcher.redact(exc.message)) from exc
        except asyncio.CancelledError:
            await send_remainders()
            raise
        await send_remainders()
        matcher = secrets.matcher
        if matcher:
            streams.redact_split_secrets(result)
            redact_message(result, matcher)
            redact_message(ctx.report.feedback, matcher)
            if ctx.report.args_run is None and isinstance(inv.args, ShellArgs) and inv.args.env:
                # The answer echoes the args: a call's own secret variables are masked there.
                echoed = ShellArgs()
                echoed.CopyFrom(inv.args)
                ctx.report.args_run = echoed
            if ctx.report.args_run is not None:
                redact_message(ctx.report.args_run, matcher)
        return result

    return redaction
