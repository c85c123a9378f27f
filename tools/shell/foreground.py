"""Runs one foreground call: streams its output as deltas, enforces its timeout, handles abort."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from agent.v1.tool_call_pb2 import ToolCallDelta
from exec_daemon.kernel.context import CallContext
from tools.shell.output import OutputCapture
from tools.shell.results import Ending
from tools.shell.session import ExitStatus

# Output waiting for a slow client above this pauses the reading of the pipes (the command then
# blocks on a full pipe instead of the daemon's memory growing); reading resumes below LOW.
HIGH_WATER_BYTES = 4 << 20
LOW_WATER_BYTES = 1 << 20
# Consecutive chunks of one stream are sent as one delta up to this size.
DELTA_BYTES = 512 << 10
# While output keeps coming, deltas go out at most this often: a fast stream then travels in a
# few large deltas instead of thousands of pipe-sized ones, each of which costs both ends far
# more than its bytes. The first output of a call, or the first after a quiet spell, goes out
# at once; a held delta goes as soon as the command ends or DELTA_BYTES are waiting.
FLUSH_SECONDS = 0.01


def shell_text_delta(stream: str, text: str) -> ToolCallDelta:
    """A delta carrying `text` on `stream` ("stdout" or "stderr"), built in place: a message
    given to a constructor as a field is copied by serializing and parsing it (upb), which
    cost a 512 KiB delta ~7x what setting its text does."""
    delta = ToolCallDelta()
    setattr(delta.shell_tool_call_delta, stream, text)
    return delta


class Execution(Protocol):
    """What runs the command: the agent's session or a one-shot shell."""

    def pause_output(self) -> None: ...

    def resume_output(self) -> None: ...

    async def interrupt(self) -> None: ...


SpawnTask = Callable[[Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]


class ForegroundCall:
    def __init__(self, ctx: CallContext, capture: OutputCapture, spawn_task: SpawnTask) -> None:
        self._ctx = ctx
        self._spawn_task = spawn_task
        self.capture = capture
        self._pending: deque[tuple[str, bytes]] = deque()
        self._pending_bytes = 0
        # Set when output arrives or the command ends.
        self._wake = asyncio.Event()
        # Set when held output must go now: the command ended or a full delta is waiting.
        self._flush_now = asyncio.Event()
        self._paused = False
        self.execution: Execution | None = None
        self.started = time.monotonic()
        # When the latest delta went out (none yet: the first one is never held).
        self._last_delta = -math.inf

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def sink(self, stream: str, data: bytes) -> None:
        """Called by the pipe readers with each chunk (synchronously, on the event loop)."""
        self._pending.append((stream, data))
        self._pending_bytes += len(data)
        if self._pending_bytes > HIGH_WATER_BYTES and not self._paused and self.execution:
            self.execution.pause_output()
            self._paused = True
        if self._pending_bytes >= DELTA_BYTES:
            self._flush_now.set()
        self._wake.set()

    async def forward(self, emit: bool = True) -> None:
        """Moves pending output into the capture, sending it as deltas (of at most DELTA_BYTES
        each) when `emit`."""
        while self._pending:
            stream, data = self._take(DELTA_BYTES)
            self._pending_bytes -= len(data)
            text = self.capture.feed(stream, data)
            await self.capture.spill_caught_up()
            if self._paused and self._pending_bytes < LOW_WATER_BYTES and self.execution:
                self.execution.resume_output()
                self._paused = False
            if emit and text:
                await self._emit_text(stream, text)

    def _take(self, limit: int) -> tuple[str, bytes]:
        """Up to `limit` bytes of the oldest pending output of one stream."""
        stream, data = self._pending.popleft()
        if len(data) > limit:
            self._pending.appendleft((stream, data[limit:]))
            return stream, data[:limit]
        parts = [data]
        size = len(data)
        while self._pending and self._pending[0][0] == stream and size < limit:
            part = self._pending.popleft()[1]
            if size + len(part) > limit:
                self._pending.appendleft((stream, part[limit - size :]))
                part = part[: limit - size]
            parts.append(part)
            size += len(part)
        return stream, parts[0] if len(parts) == 1 else b"".join(parts)

    async def _emit_text(self, stream: str, text: str) -> None:
        await self._ctx.emit(shell_text_delta(stream, text))

    async def flush_decoders(self, emit: bool) -> None:
        for stream in ("stdout", "stderr"):
            text = self.capture.flush_text(stream)
            if emit and text:
                await self._emit_text(stream, text)

    async def run(
        self, execution: Execution, done: asyncio.Future[ExitStatus], timeout_s: float
    ) -> tuple[Ending, ExitStatus | None]:
        """Streams until the command ends, times out (it is then interrupted) or the call is
        cancelled (abort / disconnect: interrupted too, the partial output still answered)."""
        self.execution = execution
        done.add_done_callback(self._command_ended)
        ending: Ending = "exited"
        try:
            async with asyncio.timeout(timeout_s):
                await self._stream_until(done)
        except TimeoutError:
            ending = "timeout"
            # Shielded, owned by the service: the processes end even if the call is cancelled.
            await asyncio.shield(self._spawn_task(execution.interrupt()))
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            ending = "aborted"
            await asyncio.shield(self._spawn_task(execution.interrupt()))
        emit = ending != "aborted"
        if self._paused:
            execution.resume_output()
            self._paused = False
        await self.forward(emit)
        await self.flush_decoders(emit)
        await self._spill_written()
        status = done.result() if done.done() and not done.cancelled() else None
        return ending, status

    async def _spill_written(self) -> None:
        """Waits for the spill file to be whole; a cancellation meanwhile (an abort after
        the command ended) still lets the answer be built (`finish` waits the rest out)."""
        try:
            await self.capture.settle()
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()

    def _command_ended(self, _done: asyncio.Future[ExitStatus]) -> None:
        self._flush_now.set()
        self._wake.set()

    async def _stream_until(self, done: asyncio.Future[ExitStatus]) -> None:
        while not done.done():
            await self._wake.wait()
            self._wake.clear()
            if self._pending:
                await self._hold(done)
                await self.forward()
                self._last_delta = time.monotonic()

    async def _hold(self, done: asyncio.Future[ExitStatus]) -> None:
        """Waits until FLUSH_SECONDS passed since the latest delta, or the command ended, or a
        full delta is waiting; more output meanwhile joins the pending one."""
        hold = self._last_delta + FLUSH_SECONDS - time.monotonic()
        if hold <= 0 or done.done() or self._pending_bytes >= DELTA_BYTES:
            return
        self._flush_now.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(hold):
                await self._flush_now.wait()
