"""What a shell call printed: streamed as text, kept in memory as head + tail, spilled to a file.

Memory stays bounded whatever the output size: each of stdout, stderr and the interleaved
output keeps its first and last `KEEP_BYTES / 2` bytes. Past the spill threshold the whole
interleaved output also goes to a file (`output_location`), so nothing is lost, and the result
holds inline at most the threshold's bytes of each (its first and last halves, a marker naming
the file between); a copy that could not be written whole is removed, not reported. stdout and
stderr are kept apart, so a flood on stdout never pushes stderr out. Bytes that are not UTF-8
are decoded with U+FFFD and the result says so.

The spill file is written by one worker thread, in order, never on the event loop: a write may
wait for the disk (writeback throttling held a 100 MB output's loop ~0.5 s in writes, py-spy),
and every other call and stream would wait with it.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from exec_daemon.kernel.paths import create_exclusive, ensure_daemon_folder

# In-memory bytes kept per stream (half head, half tail).
KEEP_BYTES = 512 * 1024
# Output larger than this (or than `file_output_threshold_bytes`) is spilled to a file. Never
# above KEEP_BYTES: the spill file starts with what memory still holds in full.
DEFAULT_SPILL_THRESHOLD = KEEP_BYTES
# Output handed to the spill writer and not on disk yet, above which the call waits for it
# (its pipes then fill and the command blocks, as for a slow client).
SPILL_BACKLOG_BYTES = 8 << 20

# One thread writes every spill file, in the order the writes were handed over.
_SPILL_WRITER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shell-spill")

_REPLACE_ERRORS = "exec_daemon.shell_replace"
_replacements = 0


def _count_replacement(exc: UnicodeError) -> tuple[str, int]:
    global _replacements
    _replacements += 1
    assert isinstance(exc, UnicodeDecodeError)
    return "\ufffd", exc.end


codecs.register_error(_REPLACE_ERRORS, _count_replacement)


def decode(data: bytes | bytearray) -> tuple[str, bool]:
    """UTF-8 text of `data` and whether invalid bytes had to be replaced."""
    before = _replacements
    text = bytes(data).decode("utf-8", _REPLACE_ERRORS)
    return text, _replacements != before


class StreamDecoder:
    """Decodes a stream chunk by chunk (a character split across chunks stays whole)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(_REPLACE_ERRORS)
        self.replaced = False

    def decode(self, data: bytes, final: bool = False) -> str:
        before = _replacements
        text = self._decoder.decode(data, final)
        if _replacements != before:
            self.replaced = True
        return text


def _trim_head(data: bytes | bytearray) -> bytes:
    """`data` without a UTF-8 character cut in two at its end."""
    end = len(data)
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte & 0xC0 == 0x80:
            continue
        needed = (
            2
            if byte >> 5 == 0b110
            else 3
            if byte >> 4 == 0b1110
            else 4
            if byte >> 3 == 0b11110
            else 1
        )
        return bytes(data[: end - back]) if needed > back else bytes(data)
    return bytes(data)


def _trim_tail(data: bytes | bytearray) -> bytes:
    """`data` without the continuation bytes of a character cut in two at its start."""
    start = 0
    while start < min(3, len(data)) and data[start] & 0xC0 == 0x80:
        start += 1
    return bytes(data[start:])


class KeptBytes:
    """The first and last bytes of a stream, and how many it had in all.

    The last bytes are kept as the chunks they came in (no copy: a 100 MB output's every chunk
    was copied twice, per stream and interleaved, while only its last ones are ever shown),
    the oldest dropped once the newer ones hold the tail whole.
    """

    def __init__(self, keep: int = KEEP_BYTES) -> None:
        self._head_limit = keep // 2
        self._tail_limit = keep - keep // 2
        self.head = bytearray()
        self._tail_chunks: deque[bytes] = deque()
        self._tail_bytes = 0
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        if len(data) >= self._tail_limit:
            self._tail_chunks.clear()
            self._tail_bytes = 0
        self._tail_chunks.append(data)
        self._tail_bytes += len(data)
        while self._tail_bytes - len(self._tail_chunks[0]) >= self._tail_limit:
            self._tail_bytes -= len(self._tail_chunks.popleft())

    @property
    def tail(self) -> bytes:
        """The last bytes kept (at most half of `keep`)."""
        joined = b"".join(self._tail_chunks)
        return joined[-self._tail_limit :] if len(joined) > self._tail_limit else joined

    @property
    def cut(self) -> int:
        return self.total - len(self.head) - min(self._tail_bytes, self._tail_limit)

    def everything(self) -> bytes:
        """All bytes, when nothing was cut."""
        assert self.cut == 0
        return bytes(self.head + self.tail)

    def shown(self, budget: int) -> tuple[bytes, bytes]:
        """The first and last bytes to show within `budget` (all of them when they fit)."""
        if self.cut == 0 and self.total <= budget:
            return self.everything(), b""
        head_room = min(budget // 2, self._head_limit)
        tail_room = min(budget - head_room, self._tail_limit)
        whole = self.head + self.tail if self.cut == 0 else None
        head = (whole if whole is not None else self.head)[:head_room]
        tail = (whole if whole is not None else self.tail)[-tail_room:] if tail_room else b""
        return bytes(head), bytes(tail)

    def text(self, name: str, spill_path: str, budget: int = KEEP_BYTES) -> tuple[str, bool]:
        head_bytes, tail_bytes = self.shown(budget)
        cut = self.total - len(head_bytes) - len(tail_bytes)
        if cut == 0:
            return decode(head_bytes + tail_bytes)
        head, head_replaced = decode(_trim_head(head_bytes))
        tail, tail_replaced = decode(_trim_tail(tail_bytes))
        where = f"; the full output is in {spill_path}" if spill_path else ""
        marker = f"\n[exec-daemon: {cut} bytes of {name} cut here, {self.total} in all{where}]\n"
        return head + marker + tail, head_replaced or tail_replaced


@dataclass
class CapturedOutput:
    stdout: str
    stderr: str
    interleaved: str
    truncation_note: str
    spill_path: str
    total_bytes: int
    decoded_with_replacement: bool


class OutputCapture:
    """Collects one call's output; `feed` returns the text to stream as a delta."""

    def __init__(self, spill_threshold: int, spill_path: Callable[[], Path]) -> None:
        """`spill_path` names the file for the full output (asked only when it is needed)."""
        self._threshold = max(1, min(spill_threshold or DEFAULT_SPILL_THRESHOLD, KEEP_BYTES))
        self._spill_target = spill_path
        self._spill_fd: int | None = None
        self.spill_path = ""
        self.streams = {"stdout": KeptBytes(), "stderr": KeptBytes()}
        self.interleaved = KeptBytes()
        self._decoders = {"stdout": StreamDecoder(), "stderr": StreamDecoder()}
        self.spill_error = ""
        # The spill writer's jobs not known to be done yet (with their sizes), oldest first.
        self._spill_jobs: deque[tuple[Future[None], int]] = deque()
        self._spill_backlog = 0
        # Set by the writer thread when a write failed (the OS's reason).
        self._spill_failure = ""

    @property
    def total(self) -> int:
        return self.interleaved.total

    def feed(self, stream: str, data: bytes) -> str:
        if (
            self._spill_fd is None
            and not self.spill_error
            and self.total + len(data) > self._threshold
        ):
            self._start_spill()
        self.streams[stream].add(data)
        self.interleaved.add(data)
        if self._spill_fd is not None:
            self._spill(data)
        return self._decoders[stream].decode(data)

    def flush_text(self, stream: str) -> str:
        """Text held back in a decoder (an unfinished character at the very end)."""
        return self._decoders[stream].decode(b"", final=True)

    def _start_spill(self) -> None:
        target = self._spill_target()
        try:
            ensure_daemon_folder(target.parent)
            # A fresh name, created here or refused: nothing planted is ever written through.
            self._spill_fd = create_exclusive(target.parent, target.name)
        except OSError as exc:
            self.spill_error = f"the full output could not be written to a file: {exc.strerror}"
            return
        self.spill_path = str(target)
        self._spill(self.interleaved.everything())

    def _spill(self, data: bytes) -> None:
        """Hands `data` to the spill writer (the file is complete once `settle` returned)."""
        assert self._spill_fd is not None
        job = _SPILL_WRITER.submit(self._write_spill, self._spill_fd, data)
        self._spill_jobs.append((job, len(data)))
        self._spill_backlog += len(data)

    def _write_spill(self, fd: int, data: bytes) -> None:
        """On the writer thread; after a failed write the rest of the output is not written."""
        if self._spill_failure:
            return
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            self._spill_failure = exc.strerror or str(exc)

    def _forget_written(self) -> None:
        while self._spill_jobs and self._spill_jobs[0][0].done():
            self._spill_backlog -= self._spill_jobs.popleft()[1]

    @property
    def spill_backlog(self) -> int:
        """Bytes handed to the spill writer that are not written yet."""
        self._forget_written()
        return self._spill_backlog

    async def spill_caught_up(self, backlog: int = SPILL_BACKLOG_BYTES) -> None:
        """Waits while more than `backlog` bytes wait for the spill writer."""
        while self.spill_backlog > backlog:
            await asyncio.wrap_future(self._spill_jobs[0][0])

    async def settle(self) -> None:
        """Waits until everything handed to the spill writer is written (or failed)."""
        await self.spill_caught_up(0)

    def _settled(self) -> None:
        """Everything written (waiting for the writer when `settle` was not awaited), and a
        failed copy closed and removed: an incomplete copy is no copy (it is what filled the
        disk), not reported."""
        if self._spill_jobs:
            self._spill_jobs[-1][0].result()
            self._forget_written()
        if self._spill_failure and not self.spill_error:
            self.spill_error = (
                f"the full output could not be written to a file: {self._spill_failure}"
            )
            self.close()
            with contextlib.suppress(OSError):
                os.unlink(self.spill_path)
            self.spill_path = ""

    def close(self) -> None:
        if self._spill_fd is not None:
            if self._spill_jobs:
                self._spill_jobs[-1][0].result()
                self._forget_written()
            with contextlib.suppress(OSError):
                os.close(self._spill_fd)
            self._spill_fd = None

    @property
    def _inline_budget(self) -> int:
        """What the result holds inline of each stream: up to the threshold once the whole
        output is in the spill file; as much as memory keeps when there is no such file."""
        return self._threshold if self.spill_path else KEEP_BYTES

    def finish(self) -> CapturedOutput:
        self._settled()
        self.close()
        budget = self._inline_budget
        stdout, stdout_replaced = self.streams["stdout"].text("stdout", self.spill_path, budget)
        stderr, stderr_replaced = self.streams["stderr"].text("stderr", self.spill_path, budget)
        interleaved, _ = self.interleaved.text("output", self.spill_path, budget)
        replaced = (
            stdout_replaced
            or stderr_replaced
            or any(decoder.replaced for decoder in self._decoders.values())
        )
        return CapturedOutput(
            stdout=stdout,
            stderr=stderr,
            interleaved=interleaved,
            truncation_note=self._note(),
            spill_path=self.spill_path,
            total_bytes=self.total,
            decoded_with_replacement=replaced,
        )

    def _note(self) -> str:
        parts = []
        budget = self._inline_budget
        for name, kept in (*self.streams.items(), ("interleaved output", self.interleaved)):
            head, tail = kept.shown(budget)
            cut = kept.total - len(head) - len(tail)
            if cut:
                parts.append(
                    f"{name}: {kept.total} bytes, kept the first {len(head)} and the last "
                    f"{len(tail)}, cut {cut} in between"
                )
        if not parts and not self.spill_error:
            return ""
        note = "; ".join(parts)
        if self.spill_path and parts:
            note += f". The full output ({self.total} bytes) is in {self.spill_path}"
        if self.spill_error:
            note = f"{note}. {self.spill_error}" if note else self.spill_error
        return note
