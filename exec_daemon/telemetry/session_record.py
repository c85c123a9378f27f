"""The session record (--record, --record-folder): every tool call, guard decision, terminal
byte, edit and connection, one timeline per workspace that outlives the daemon.

Entries are JSON objects, one a line: `seq` (counts on across restarts), `t` (Unix ns), `agent`,
`parent` (a subagent's parent agent), `kind` and the kind's fields:
- `call`: a call began: `call_id`, `tool` (the ToolCall variant), `args`, `run_mode`.
- `result`: it ended: `call_id`, `tool`, `outcome` (the result's case, `error <code>`,
  `aborted`), `refused` (rejected, permission denied, or an ExecError permission_denied) and
  `reason` (a rejection's `refused_by`, e.g. permissions or hook, and `needs_approval`: a
  person may still approve it), `ms`, `result` (the result message summed up: strings cut to SUMMARY_CHARS; a
  shell's output is in its `cast`, an edit's change in its `edit`), `guards` (`run_mode`, `args_run`: the args a
  hook or the sandbox policy changed, `hook_feedback`).
- `cast`: a shell call's output as an asciicast v2 recording (`asciicast`, its text).
- `edit`: a file a call changed: `path`, `diff` (unified).
- `egress`: a connection a call asked for (`tool`, `url`, `host`, `allowed`), or one a
  call to an MCP server over HTTP (`server`), or one a sandboxed command asked the sandbox's
  proxy for (`tool` "sandbox_proxy", `host`, `port`,
  `allowed`, `reason`).
- `file_change`: files the workspace watcher saw change, whoever changed them (a command too):
  `changes` ([added|modified|deleted, path] pairs). Paths only: the watcher keeps no earlier
  content to diff against (a tool's edit has its diff in `edit`).
- `pty`: output of a terminal of the PTY port: `terminal`, `events` ([seconds since the
  terminal started, text] pairs, asciicast's timing).
- `dropped`: `count` entries of the oldest segment were removed to keep the record in its cap
  (`total`: over the folder's life), or (`reason` "queue full") were never written: more than
  MAX_WAITING waited for the writer.

Secrets: every line is passed through the daemon's redaction (exec_daemon/guards/redaction.py,
handed in by the composition root: `redact_json` finds secrets as JSON writes them, a quote or
a backslash in one escaped) before it is written, whether or not
--secret-redaction-enabled redacts what calls answer; output split into pieces is checked whole
too (a secret printed a byte at a time). Strings longer than INLINE_CHARS are written to
`blobs/` and referenced (`{"ref", "chars", "head"}`).

Cost on the event loop: a call's args and result are serialized (protobuf's C code) and queued;
everything else (parsing, JSON, redaction, writing) is done by the `session-record` thread.
The queue is bounded (MAX_WAITING): past it, entries are dropped and counted.

On disk: `segment-<first seq>.jsonl` files, a new one past `max_bytes // SEGMENTS`; the oldest
are removed (and their entries counted in a `dropped` entry) while the folder holds more than
`max_bytes`. One daemon writes a folder at a time (a lock on `.lock`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import itertools
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from agent.v1.tool_call_pb2 import ToolCallDelta
from exec_daemon.kernel.agents import SubagentSessions
from exec_daemon.kernel.context import Invocation, Middleware, Next, call_run_mode
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.state import Daemon

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
SEGMENTS = 8
MIN_SEGMENT_BYTES = 64 * 1024
SEGMENT_PREFIX = "segment-"
BLOBS = "blobs"
LOCK_FILE = ".lock"
DROPPED_MARK = b'"kind":"dropped"'
PRIVATE_FLAGS = os.O_CLOEXEC | os.O_NOFOLLOW
# Strings longer than this go to blobs/ and are referenced.
INLINE_CHARS = 16 * 1024
HEAD_CHARS = 512
# A result is summed up: its strings cut to this many characters, its lists to SUMMARY_ITEMS.
SUMMARY_CHARS = 300
SUMMARY_ITEMS = 50
# A file_change entry lists this many paths at most (and counts the rest).
MAX_CHANGES = 1000
# A shell call's recorded output, at most; the rest is counted.
MAX_CAST_CHARS = 4 * 1024 * 1024
MAX_WAITING = 65_536
# A call's args or result bigger than this (serialized) is recorded by its size only: the queue
# holds what waits for the writer.
MAX_MESSAGE_BYTES = 1 << 20
WAKE_AT = 512
WRITE_EVERY_SECONDS = 0.25
CAST_TOOLS = frozenset({"shell_tool_call"})
REFUSED_CASES = frozenset({"rejected", "permission_denied"})
EGRESS_TOOLS = {"fetch_tool_call", "web_fetch_tool_call"}

# A queued message decoded into the entry's `guards` object.
GUARDS_PREFIX = "guards_"

Redact = Callable[[str], str]
Entry = dict[str, Any]


@dataclass(slots=True)
class _Pending:
    """An entry as queued by the loop: its fields, and the messages still to be decoded."""

    time_ns: int
    agent: str
    kind: str
    fields: Entry
    # Field name -> (message class, serialized bytes): decoded on the thread.
    messages: dict[str, tuple[type[Message], bytes]] = field(default_factory=dict)


@dataclass(slots=True)
class _Flush:
    done: threading.Event


class SessionRecord:
    """The record of one workspace's sessions (a `daemon.service`, provided by the composition
    root); `enabled` False when the daemon runs without it (every method then does nothing)."""

    def __init__(
        self,
        folder: Path | None,
        *,
        redact: Redact = str,
        redact_json: Redact | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        parents: Callable[[str], str] = lambda _agent: "",
    ) -> None:
        self.folder = folder
        self.enabled = folder is not None
        self.max_bytes = max_bytes
        self.segment_bytes = max(MIN_SEGMENT_BYTES, max_bytes // SEGMENTS)
        self._redact = redact
        self._redact_json = redact_json or redact
        self._parents = parents
        self._queue: deque[_Pending | _Flush] = deque()
        # Entries not queued (MAX_WAITING were waiting), and how many of them were said.
        self.dropped_waiting = 0
        self._dropped_waiting_said = 0
        # Entries removed to keep the cap, over the folder's life.
        self.dropped_total = 0
        self._dropped_unsaid = 0
        self._wake = threading.Event()
        self._closed = False
        self._lock_fd: int | None = None
        self._seq = 0
        self._segment: Any = None
        self._segment_size = 0
        self._thread: threading.Thread | None = None
        self._pty_started: dict[str, float] = {}

    # -- on the event loop --------------------------------------------------------------------

    def start(self) -> None:
        """Takes the folder's lock and starts the writer (blocking: call it off the loop)."""
        if self.folder is None or self._thread is not None:
            return
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        (self.folder / BLOBS).mkdir(mode=0o700, exist_ok=True)
        fd = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | PRIVATE_FLAGS, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            log.warning(
                "session record: %s is in use by another daemon; not recording", self.folder
            )
            self.enabled = False
            return
        self._lock_fd = fd
        self._seq, self.dropped_total = _last_seq_and_dropped(self.folder)
        self._thread = threading.Thread(target=self._run, name="session-record", daemon=True)
        self._thread.start()

    def add(
        self,
        kind: str,
        agent: str,
        fields: Entry,
        messages: dict[str, tuple[type[Message], bytes]] | None = None,
    ) -> None:
        if not self.enabled:
            return
        if messages:
            for name, (_cls, data) in list(messages.items()):
                if len(data) > MAX_MESSAGE_BYTES:  # said by its size only
                    del messages[name]
                    fields[f"{name}_bytes"] = len(data)
        queue = self._queue
        if len(queue) >= MAX_WAITING:
            self.dropped_waiting += 1
            return
        queue.append(_Pending(time.time_ns(), agent, kind, fields, messages or {}))
        if len(queue) >= WAKE_AT:
            self._wake.set()

    def terminal_output(self, terminal_id: str, data: bytes) -> None:
        """A PTY terminal's output (exec_daemon/terminals/pty.py calls it as bytes arrive)."""
        if not self.enabled:
            return
        started = self._pty_started.setdefault(terminal_id, time.monotonic())
        self.add(
            "pty",
            "",
            {"terminal": terminal_id, "at": time.monotonic() - started, "data": data},
        )

    def proxy_egress(self, host: str, port: int, allowed: bool, reason: str) -> None:
        """A request a sandbox's network proxy let through or refused (sandbox/proxy.py)."""
        fields = {"tool": "sandbox_proxy", "host": host, "port": port, "allowed": allowed}
        self.add("egress", "", {**fields, "reason": reason})

    def workspace_changes(self, changes: list[tuple[str, str]]) -> None:
        """Files the workspace watcher saw change (tools/sem_search.py): by commands too."""
        listed = sorted(changes)[:MAX_CHANGES]
        fields: Entry = {"changes": [list(change) for change in listed]}
        if len(changes) > len(listed):
            fields["changes_count"] = len(changes)
        self.add("file_change", "", fields)

    def flush(self, timeout: float = 10.0) -> None:
        """Waits (blocking: off the loop) until what was added so far is written."""
        if not self.enabled or self._thread is None:
            return
        done = threading.Event()
        self._queue.append(_Flush(done))
        self._wake.set()
        done.wait(timeout)

    def read(self, agent_id: str = "", since: int = 0) -> Iterator[tuple[Entry, str]]:
        """The entries after `since`, oldest first, each with its line; of `agent_id` and its
        subagents when given (blocking: off the loop)."""
        if self.folder is None:
            return
        agents = {agent_id}
        for path in _segments(self.folder):
            try:
                lines = path.read_bytes().decode("utf-8", "surrogateescape").splitlines()
            except FileNotFoundError:  # removed by the cap meanwhile
                continue
            for line in lines:
                try:
                    entry = json.loads(line)
                except ValueError:  # a line cut by a crash
                    continue
                if agent_id:
                    if entry.get("parent") in agents:
                        agents.add(entry.get("agent", ""))
                    if entry.get("agent") not in agents:
                        continue
                if entry.get("seq", 0) > since:
                    yield entry, line

    def read_batch(
        self, entries: Iterator[tuple[Entry, str]], size: int
    ) -> list[tuple[Entry, str]]:
        """Up to `size` more of `entries` (blocking)."""
        return list(itertools.islice(entries, size))

    def blob(self, name: str) -> str | None:
        """A referenced string's text (blocking), or None when unknown or removed."""
        if self.folder is None or not _is_blob_name(name):
            return None
        try:
            return (self.folder / BLOBS / name).read_text(encoding="utf-8")
        except OSError:
            return None

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def close(self, timeout: float = 5.0) -> None:
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._segment is not None:
            self._segment.close()
            self._segment = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- on the writer thread -----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            self._wake.wait(WRITE_EVERY_SECONDS)
            self._wake.clear()
            try:
                self._write_waiting()
            except Exception:
                log.exception("session record: writing failed")
            if self._closed:
                return

    def _write_waiting(self) -> None:
        queue = self._queue
        lines: list[tuple[int, bytes]] = []
        flushes: list[_Flush] = []
        pty: dict[str, list[tuple[int, float, bytes]]] = {}
        while queue:
            item = queue.popleft()
            if isinstance(item, _Flush):
                flushes.append(item)
                continue
            if item.kind == "pty":
                fields = item.fields
                pty.setdefault(fields["terminal"], []).append(
                    (item.time_ns, fields["at"], fields["data"])
                )
                continue
            lines.append(self._numbered(self._entry(item)))
        for terminal, chunks in pty.items():
            lines.append(self._numbered(self._pty_entry(terminal, chunks)))
        unsaid = self.dropped_waiting - self._dropped_waiting_said
        if unsaid:
            self._dropped_waiting_said += unsaid
            self._seq += 1
            entry = {"seq": self._seq, "t": time.time_ns(), "agent": "", "parent": ""}
            entry.update({"kind": "dropped", "count": unsaid, "reason": "queue full"})
            lines.append(self._numbered(entry))
        if lines:
            self._append(lines)
        for flush in flushes:
            flush.done.set()

    def _entry(self, item: _Pending) -> Entry:
        fields = item.fields
        for name, (cls, data) in item.messages.items():
            limit = SUMMARY_CHARS if name == "result" else None
            decoded = message_fields(cls.FromString(data), limit)
            if name.startswith(GUARDS_PREFIX):
                fields.setdefault("guards", {})[name[len(GUARDS_PREFIX) :]] = decoded
            else:
                fields[name] = decoded
        if "events" in fields:  # a cast's output
            fields = self._cast(fields)
        self._seq += 1
        entry: Entry = {
            "seq": self._seq,
            "t": item.time_ns,
            "agent": item.agent,
            "parent": self._parents(item.agent) if item.agent else "",
            "kind": item.kind,
        }
        entry.update(fields)
        return entry

    def _cast(self, fields: Entry) -> Entry:
        events: list[tuple[float, str]] = fields.pop("events")
        texts = self._redact_pieces([text for _at, text in events])
        if len(texts) != len(events):  # a secret crossed pieces: one event for all
            events = [(events[0][0], texts[0])]
        else:
            events = [(at, text) for (at, _), text in zip(events, texts, strict=True)]
        header = {
            "version": 2,
            "width": 80,
            "height": 24,
            "timestamp": fields.pop("started"),
            "title": self._redact(fields.get("command", "")[:200]),
        }
        cast = [json.dumps(header, ensure_ascii=False)]
        cast.extend(
            json.dumps([round(at, 6), "o", text], ensure_ascii=False) for at, text in events
        )
        fields["asciicast"] = "\n".join(cast) + "\n"
        return fields

    def _pty_entry(self, terminal: str, chunks: list[tuple[int, float, bytes]]) -> Entry:
        texts = [data.decode("utf-8", "replace") for _t, _at, data in chunks]
        cleaned = self._redact_pieces(texts)
        if len(cleaned) == len(chunks):
            events = [
                [round(at, 6), text] for (_t, at, _d), text in zip(chunks, cleaned, strict=True)
            ]
        else:
            events = [[round(chunks[0][1], 6), cleaned[0]]]
        self._seq += 1
        return {
            "seq": self._seq,
            "t": chunks[0][0],
            "agent": "",
            "parent": "",
            "kind": "pty",
            "terminal": terminal,
            "events": events,
        }

    def _redact_pieces(self, texts: list[str]) -> list[str]:
        """Each piece redacted; one piece, all of them redacted together, when a secret is only
        found whole."""
        redact = self._redact
        each = [redact(text) for text in texts]
        whole = redact("".join(texts))
        return each if "".join(each) == whole else [whole]

    def _long_strings_by_reference(self, value: Any) -> Any:
        """Strings longer than INLINE_CHARS written (redacted) to blobs/ and referenced."""
        if isinstance(value, str):
            return self._blob_ref(self._redact(value)) if len(value) > INLINE_CHARS else value
        if isinstance(value, dict):
            return {k: self._long_strings_by_reference(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._long_strings_by_reference(item) for item in value]
        return value

    def _blob_ref(self, text: str) -> Entry:
        assert self.folder is not None
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        name = f"{self._seq:020d}-{digest}.txt"
        path = self.folder / BLOBS / name
        with contextlib.suppress(OSError):
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
        return {"ref": name, "chars": len(text), "head": text[:HEAD_CHARS]}

    def _line(self, entry: Entry) -> bytes:
        """The entry's line: long strings by reference, every secret redacted (in the JSON text,
        in one pass: `redact_json` finds secrets as JSON writes them, quotes escaped)."""
        text = _json(entry)
        if len(text) > INLINE_CHARS:
            text = _json(self._long_strings_by_reference(entry))
        return self._redact_json(text).encode("utf-8", "surrogatepass") + b"\n"

    def _numbered(self, entry: Entry) -> tuple[int, bytes]:
        return entry["seq"], self._line(entry)

    def _append(self, lines: list[tuple[int, bytes]]) -> None:
        """Writes `lines`, starting a new segment whenever the current one is full."""
        pending: list[bytes] = []
        for seq, line in lines:
            if self._segment is None or self._segment_size >= self.segment_bytes:
                self._write(pending)
                pending = []
                self._rotate(first_seq=seq)
            pending.append(line)
            self._segment_size += len(line)
        if self._dropped_unsaid:
            # Said after the batch: its seqs were given before the segments were removed.
            self.dropped_total += self._dropped_unsaid
            self._seq += 1
            entry = {"seq": self._seq, "t": time.time_ns(), "agent": "", "parent": ""}
            entry["kind"] = "dropped"
            entry.update({"count": self._dropped_unsaid, "total": self.dropped_total})
            self._dropped_unsaid = 0
            line = self._line(entry)
            pending.append(line)
            self._segment_size += len(line)
        self._write(pending)

    def _write(self, lines: list[bytes]) -> None:
        if lines:
            self._segment.write(b"".join(lines))
            self._segment.flush()

    def _rotate(self, first_seq: int) -> None:
        assert self.folder is not None
        if self._segment is not None:
            self._segment.close()
        path = self.folder / f"{SEGMENT_PREFIX}{first_seq:020d}.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | PRIVATE_FLAGS, 0o600)
        self._segment = os.fdopen(fd, "ab")
        self._segment_size = os.fstat(fd).st_size
        self._enforce_cap(path)

    def _enforce_cap(self, current: Path) -> None:
        """Removes the oldest segments (and their blobs) while the folder is over its cap."""
        assert self.folder is not None
        dropped = 0
        while True:
            segments = [path for path in _segments(self.folder) if path != current]
            if not segments or _folder_bytes(self.folder) <= self.max_bytes:
                break
            oldest = segments[0]
            with contextlib.suppress(OSError):
                data = oldest.read_bytes()
                dropped += data.count(b"\n") - data.count(DROPPED_MARK)
                oldest.unlink()
            following = segments[1] if len(segments) > 1 else current
            _remove_blobs_before(self.folder / BLOBS, _first_seq(following))
        self._dropped_unsaid += dropped


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _json(entry: Entry) -> str:
    return _ENCODER.encode(entry)


def _segments(folder: Path) -> list[Path]:
    try:
        names = sorted(n for n in os.listdir(folder) if n.startswith(SEGMENT_PREFIX))
    except OSError:
        return []
    return [folder / name for name in names]


def _first_seq(segment: Path) -> int:
    try:
        return int(segment.name[len(SEGMENT_PREFIX) :].split(".")[0])
    except ValueError:
        return 0


def _last_seq_and_dropped(folder: Path) -> tuple[int, int]:
    """The highest seq written in `folder` and the entries dropped so far (0s for a new one)."""
    seq = dropped = 0
    for path in _segments(folder):
        with contextlib.suppress(OSError):
            for line in path.read_bytes().splitlines():
                if DROPPED_MARK in line:
                    with contextlib.suppress(ValueError, KeyError):
                        dropped = int(json.loads(line)["total"])
    for path in reversed(_segments(folder)):
        with contextlib.suppress(OSError):
            for line in reversed(path.read_bytes().splitlines()):
                with contextlib.suppress(ValueError, KeyError):
                    seq = int(json.loads(line)["seq"])
                    return seq, dropped
    return seq, dropped


def _folder_bytes(folder: Path) -> int:
    total = 0
    for base in (folder, folder / BLOBS):
        with contextlib.suppress(OSError), os.scandir(base) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return total


def _remove_blobs_before(blobs: Path, seq: int) -> None:
    with contextlib.suppress(OSError), os.scandir(blobs) as entries:
        for entry in entries:
            with contextlib.suppress(ValueError, OSError):
                if int(entry.name.split("-")[0]) < seq:
                    os.unlink(entry.path)


def _is_blob_name(name: str) -> bool:
    stem, _, suffix = name.partition(".")
    number, _, digest = stem.partition("-")
    return (
        suffix == "txt"
        and number.isdigit()
        and len(digest) == 32
        and all(c in "0123456789abcdef" for c in digest)
    )


def message_fields(message: Message, limit: int | None) -> Entry:
    """A message's set fields as JSON values (enums by name, bytes by size); with `limit`, a
    summary: strings cut to `limit` characters (and their length said), lists to SUMMARY_ITEMS."""
    fields: Entry = {}
    for descriptor, value in message.ListFields():
        entry_type = descriptor.message_type
        if descriptor.type == FieldDescriptor.TYPE_MESSAGE and entry_type is not None:
            if entry_type.GetOptions().map_entry:
                value_field = entry_type.fields_by_name["value"]
                fields[descriptor.name] = {
                    str(k): _field_value(value_field, value[k], limit) for k in value
                }
            elif descriptor.is_repeated:
                items = list(value) if limit is None else list(value[:SUMMARY_ITEMS])
                fields[descriptor.name] = [message_fields(item, limit) for item in items]
                if len(items) < len(value):
                    fields[f"{descriptor.name}_count"] = len(value)
            else:
                fields[descriptor.name] = message_fields(value, limit)
        elif descriptor.is_repeated:
            items = list(value) if limit is None else list(value[:SUMMARY_ITEMS])
            fields[descriptor.name] = [_field_value(descriptor, item, limit) for item in items]
            if len(items) < len(value):
                fields[f"{descriptor.name}_count"] = len(value)
        else:
            fields[descriptor.name] = _field_value(descriptor, value, limit)
    return fields


def _field_value(field: FieldDescriptor, value: Any, limit: int | None) -> Any:
    if isinstance(value, Message):
        return message_fields(value, limit)
    if isinstance(value, str):
        if limit is not None and len(value) > limit:
            return f"{value[:limit]}… ({len(value)} characters)"
        return value
    if isinstance(value, bytes):
        return {"bytes": len(value)}
    if field.type == FieldDescriptor.TYPE_ENUM and field.enum_type is not None:
        known = field.enum_type.values_by_number.get(value)
        return known.name if known is not None else value
    return value


# -- the middleware ----------------------------------------------------------------------------


def _outcome(result: Message) -> tuple[str, str]:
    """The result's case and its reason (rejections, errors)."""
    if "result" not in result.DESCRIPTOR.oneofs_by_name:
        return "success", ""
    case = result.WhichOneof("result") or "success"
    if case == "success":
        return case, ""
    detail = getattr(result, case)
    reason = ""
    for name in ("reason", "message", "error"):
        value = getattr(detail, name, None)
        if isinstance(value, str) and value:
            reason = value
            break
    if case == "error":
        code = getattr(detail, "code", "")
        case = f"error {code}" if code else "error"
    return case, reason


def _refusal(rejected: Message) -> Entry:
    """Who refused a call and whether a person may still approve it (agent.v1.Rejected)."""
    details = getattr(rejected, "details", rejected)
    return {
        "refused_by": getattr(details, "source", ""),
        "needs_approval": bool(getattr(details, "needs_approval", False)),
    }


def _changes(
    tool: str, args: Message, result: Message, mcp_url: Callable[[str], str]
) -> Iterable[tuple[str, Entry]]:
    """The edits and connections a call's args and result show."""
    case = result.WhichOneof("result") if "result" in result.DESCRIPTOR.oneofs_by_name else None
    if tool == "edit_tool_call" and case == "success":
        success = result.success  # type: ignore[attr-defined]
        yield "edit", {"path": success.path, "diff": success.diff, "created": success.created}
    elif tool == "apply_agent_diff_tool_call" and case == "success":
        yield "edit", {"path": "", "diff": args.diff}  # type: ignore[attr-defined]
    elif tool in EGRESS_TOOLS:
        url = args.url  # type: ignore[attr-defined]
        allowed = case not in REFUSED_CASES and case != "error"
        yield "egress", {"url": url, "host": urlsplit(url).hostname or "", "allowed": allowed}
    elif tool == "mcp_tool_call":
        server = args.provider_identifier  # type: ignore[attr-defined]
        url = mcp_url(server) if server else ""
        if url:  # a server over HTTP (a stdio one connects nowhere)
            host = urlsplit(url).hostname or ""
            yield "egress", {"url": url, "host": host, "server": server, "allowed": True}


def record_middleware(
    daemon: Daemon, mcp_url: Callable[[str], str] = lambda _server: ""
) -> Middleware:
    """The calls into the session record; `mcp_url`: an MCP server's URL ("" for a stdio one)."""
    record = daemon.service(SessionRecord)

    async def record_call(inv: Invocation, call_next: Next) -> Message:
        ctx = inv.ctx
        agent, call_id, tool = ctx.agent_id, ctx.call_id, inv.tool
        run_mode = call_run_mode(ctx)
        args_type = type(inv.args)
        record.add(
            "call",
            agent,
            {"call_id": call_id, "tool": tool, "run_mode": run_mode},
            {"args": (args_type, inv.args.SerializeToString())},
        )
        started = time.perf_counter()
        started_unix = time.time()
        events: list[tuple[float, str]] = []
        kept = [0]
        emit = ctx.emit

        async def recording_emit(delta: ToolCallDelta) -> None:
            if delta.WhichOneof("delta") == "shell_tool_call_delta":
                shell = delta.shell_tool_call_delta
                stream = shell.WhichOneof("delta")
                if stream in ("stdout", "stderr") and kept[0] < MAX_CAST_CHARS:
                    text = getattr(shell, stream)
                    kept[0] += len(text)
                    events.append((time.perf_counter() - started, text))
            await emit(delta)

        fields: Entry = {"call_id": call_id, "tool": tool}
        result: Message | None = None
        try:
            # Only a shell call's output is cast; the others run with their context as it is.
            recorded = (
                replace(inv, ctx=ctx.with_emit(recording_emit)) if tool in CAST_TOOLS else inv
            )
            result = await call_next(recorded)
        except CodedError as exc:
            fields["outcome"] = f"error {exc.code.value}"
            fields["reason"] = exc.message[:2000]
            fields["refused"] = exc.code.value == "permission_denied"
            raise
        except BaseException as exc:
            fields["outcome"] = "aborted" if isinstance(exc, asyncio.CancelledError) else "internal"
            raise
        else:
            outcome, reason = _outcome(result)
            fields["outcome"], fields["reason"] = outcome, reason
            fields["refused"] = outcome in REFUSED_CASES
            if outcome == "rejected":
                fields.update(_refusal(result.rejected))  # type: ignore[attr-defined]
            return result
        finally:
            fields["ms"] = round((time.perf_counter() - started) * 1000, 3)
            report = ctx.report
            guards: Entry = {"run_mode": run_mode}
            messages: dict[str, tuple[type[Message], bytes]] = {}
            if report.args_run is not None:
                messages[f"{GUARDS_PREFIX}args_run"] = (
                    type(report.args_run),
                    report.args_run.SerializeToString(),
                )
            if report.feedback.ListFields():
                messages[f"{GUARDS_PREFIX}hook_feedback"] = (
                    type(report.feedback),
                    report.feedback.SerializeToString(),
                )
            fields["guards"] = guards
            if result is not None:
                messages["result"] = (type(result), result.SerializeToString())
            record.add("result", agent, fields, messages)
            if events:
                cast = {"call_id": call_id, "tool": tool, "started": int(started_unix)}
                cast["command"] = getattr(inv.args, "command", "")
                cast["events"] = events
                record.add("cast", agent, cast)
            if result is not None:
                for kind, change in _changes(tool, inv.args, result, mcp_url):
                    record.add(kind, agent, {"call_id": call_id, "tool": tool, **change})

    return record_call


def subagent_parent(daemon: Daemon) -> Callable[[str], str]:
    """The parent agent of a subagent the Task tool started ("" for others)."""
    sessions = daemon.service(SubagentSessions)

    def parent(agent_id: str) -> str:
        subagent = sessions.get(agent_id)
        return subagent.parent_agent_id if subagent is not None else ""

    return parent
