"""agent.v1.ExecService/ExecStream: many tool calls multiplexed on one bidirectional stream."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext

from agent.v1.exec_pb2 import (
    ExecClientControlMessage,
    ExecClientMessage,
    ExecError,
    ExecServerMessage,
    ExecStreamElement,
    Heartbeat,
)
from agent.v1.tool_call_pb2 import ToolCall, ToolCallDelta
from exec_daemon.kernel.context import CallContext, result_case, result_class
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.metering import Meter, Metric
from exec_daemon.kernel.state import Daemon
from exec_daemon.rpc.codecs import MalformedElement
from exec_daemon.rpc.dispatch import Dispatcher, tool_variant
from exec_daemon.telemetry.tracing import EXTRAS_KEY, incoming_trace_headers

log = logging.getLogger(__name__)

# Messages waiting for a slow client; a full queue makes producers (e.g. shell output) wait.
OUTBOX_SIZE = 256
# ... and at most about this many bytes of them: large deltas (shell output) would otherwise let
# a slow client keep OUTBOX_SIZE times their size in memory.
OUTBOX_BYTES = 8 << 20
# A peer that has sent heartbeats and then stays silent this many intervals is taken as dead.
MISSED_HEARTBEATS = 3
# How long a cancelled call may take to clean up before the stream ends anyway.
CANCEL_GRACE_SECONDS = 5.0

_END = object()


def aborted_answer(tool_call: ToolCall, reason: str) -> ToolCall:
    tool = tool_variant(tool_call)
    answer = ToolCall()
    answered = getattr(answer, tool)
    answered.args.CopyFrom(getattr(tool_call, tool).args)
    answered.result.CopyFrom(result_case(result_class(tool)(), ErrorCode.ABORTED, reason))
    return answer


def _now_ms() -> int:
    return int(time.time() * 1000)


class Outbox(asyncio.Queue[object]):
    """A queue that is full at OUTBOX_SIZE messages or OUTBOX_BYTES bytes (one larger message
    still fits in an empty queue)."""

    def __init__(self) -> None:
        super().__init__(OUTBOX_SIZE)
        self._bytes = 0

    def full(self) -> bool:
        return super().full() or self._bytes >= OUTBOX_BYTES

    def _put(self, item: object) -> None:
        size = _message_bytes(item)
        self._bytes += size
        super()._put((item, size))  # type: ignore[misc]

    def _get(self) -> object:
        entry: tuple[object, int] = super()._get()  # type: ignore[misc, assignment]
        self._bytes -= entry[1]
        return entry[0]


def _message_bytes(item: object) -> int:
    return item.ByteSize() if isinstance(item, ExecServerMessage) else 0


class CallRunner:
    """Runs tool calls and posts their deltas and answers, in order, to one outbox."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        outbox: asyncio.Queue[object],
        extras: Mapping[str, Any] | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._outbox = outbox
        # What every call of this stream gets in CallContext.extras (e.g. its trace headers).
        self._extras = extras or {}
        self.closing = False

    async def post(self, message: ExecServerMessage) -> None:
        if self.closing:
            # Nobody reads any more (the client went away): drop instead of waiting forever.
            with contextlib.suppress(asyncio.QueueFull):
                self._outbox.put_nowait(message)
            return
        await self._outbox.put(message)

    async def run(
        self, call_id: int, tool_call: ToolCall, agent_id: str, run_mode: int = 0
    ) -> None:
        async def emit(delta: ToolCallDelta) -> None:
            # CopyFrom, not the constructor's tool_call_delta=: that one serializes and parses
            # the delta (upb), ~6x the cost of copying it, for every 512 KiB of shell output.
            message = ExecServerMessage(id=call_id)
            message.tool_call_delta.CopyFrom(delta)
            await self.post(message)

        ctx = CallContext(
            daemon=self._dispatcher.daemon,
            call_id=call_id,
            agent_id=agent_id,
            emit=emit,
            extras=self._extras,
            run_mode=run_mode,
        )
        try:
            answer = await self._dispatcher.run(tool_call, ctx)
            message = ExecServerMessage(id=call_id, tool_call_result=answer)
        except CodedError as exc:
            message = ExecServerMessage(id=call_id, error=exc.to_exec_error())
        except asyncio.CancelledError:
            reason = "aborted: the client went away" if self.closing else "aborted by the client"
            message = ExecServerMessage(
                id=call_id, tool_call_result=aborted_answer(tool_call, reason)
            )
        await self.post(message)


class LiveStreams:
    """How many ExecStreams are open (`daemon.service(LiveStreams)`), read by the meter when it
    exports: a count kept here costs a stream nothing, a metric added to twice would cost it two
    meter calls."""

    def __init__(self, daemon: Daemon) -> None:
        self.count = 0
        daemon.service(Meter).watch(Metric.LIVE_EXEC_STREAMS, self._read)

    def _read(self) -> int:
        return self.count


class ExecStreamSession:
    """One ExecStream: reads client elements, runs calls concurrently, yields server messages."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        heartbeat_seconds: float,
        extras: Mapping[str, Any] | None = None,
    ) -> None:
        self._stopping = dispatcher.daemon.stopping
        self._live = dispatcher.daemon.service(LiveStreams)
        self._outbox: asyncio.Queue[object] = Outbox()
        self._runner = CallRunner(dispatcher, self._outbox, extras)
        self._calls: dict[int, asyncio.Task[None]] = {}
        self._heartbeat_seconds = heartbeat_seconds
        self._input_done = False
        self._input_error: BaseException | None = None
        # Set by _end_with: the stream ends before any message still queued is sent.
        self._ending = False
        self._peer_heartbeats = False
        self._last_received = time.monotonic()
        self._last_sent = time.monotonic()

    async def serve(self, requests: AsyncIterator[object]) -> AsyncIterator[ExecServerMessage]:
        # The reader task keeps the request side consumed, which is also how a client reset
        # reaches us (design.md): without it a dead client would leave its calls running.
        reader = asyncio.create_task(self._read(requests))
        beater = asyncio.create_task(self._heartbeat())
        watcher = asyncio.create_task(self._end_on_shutdown())
        self._live.count += 1
        try:
            while not self._ending:
                item = await self._outbox.get()
                if item is _END:
                    break
                assert isinstance(item, ExecServerMessage)
                self._last_sent = time.monotonic()
                yield item
            if self._input_error is not None:
                raise self._input_error
        finally:
            self._live.count -= 1
            self._runner.closing = True
            for task in (reader, beater, watcher):
                task.cancel()
            await self._cancel_calls()
            with contextlib.suppress(BaseException):
                await asyncio.gather(reader, beater, watcher, return_exceptions=True)

    async def _cancel_calls(self) -> None:
        calls = list(self._calls.values())
        for task in calls:
            task.cancel()
        if calls:
            _done, pending = await asyncio.wait(calls, timeout=CANCEL_GRACE_SECONDS)
            if pending:
                log.warning(
                    "%d cancelled calls did not end within %ss", len(pending), CANCEL_GRACE_SECONDS
                )

    async def _read(self, requests: AsyncIterator[object]) -> None:
        try:
            async for element in requests:
                self._last_received = time.monotonic()
                if await self._handle(element):
                    break
        except ConnectError as exc:
            self._input_error = exc
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("reading the ExecStream failed")
            self._input_error = ConnectError(Code.INTERNAL, "the request stream failed")
        self._input_done = True
        if self._input_error is not None:
            await self._outbox.put(_END)
        else:
            await self._maybe_end()

    async def _handle(self, element: object) -> bool:
        """Acts on one client element; True when the client said it will send no more."""
        if isinstance(element, MalformedElement):
            if element.call_id is None:
                raise ConnectError(Code.INVALID_ARGUMENT, element.reason)
            await self._runner.post(
                ExecServerMessage(
                    id=element.call_id,
                    error=ExecError(code="invalid_argument", message=element.reason),
                )
            )
            return False
        assert isinstance(element, ExecStreamElement)
        kind = element.WhichOneof("element")
        if kind == "exec_client_message":
            await self._start(element.exec_client_message)
        elif kind == "exec_client_control_message":
            return await self._control(element.exec_client_control_message)
        return False

    async def _start(self, message: ExecClientMessage) -> None:
        call_id = message.id
        if call_id in self._calls:
            await self._runner.post(
                ExecServerMessage(
                    id=call_id,
                    error=ExecError(
                        code="already_exists",
                        message=f"a call with id {call_id} is already running",
                    ),
                )
            )
            return
        try:
            tool_variant(message.tool_call)
        except CodedError as exc:
            await self._runner.post(ExecServerMessage(id=call_id, error=exc.to_exec_error()))
            return
        task = asyncio.create_task(
            self._runner.run(call_id, message.tool_call, message.agent_id, message.run_mode)
        )
        self._calls[call_id] = task
        task.add_done_callback(lambda _t: self._finished(call_id, _t))

    def _finished(self, call_id: int, task: asyncio.Task[None]) -> None:
        if self._calls.get(call_id) is task:
            del self._calls[call_id]
        if self._input_done and not self._calls and not self._runner.closing:
            asyncio.get_running_loop().create_task(self._maybe_end())

    async def _maybe_end(self) -> None:
        if self._input_done and not self._calls:
            await self._outbox.put(_END)

    async def _control(self, control: ExecClientControlMessage) -> bool:
        kind = control.WhichOneof("message")
        if kind == "abort":
            task = self._calls.get(control.abort.id)
            if task is not None:
                task.cancel()
        elif kind == "heartbeat":
            self._peer_heartbeats = True
            await self._runner.post(ExecServerMessage(heartbeat=Heartbeat(sent_at_ms=_now_ms())))
        elif kind == "stream_close":
            return True
        return False

    async def _end_on_shutdown(self) -> None:
        await self._stopping.wait()
        self._end_with(ConnectError(Code.UNAVAILABLE, "the daemon is shutting down"))

    def _end_with(self, error: ConnectError) -> None:
        """Ends the stream now with `error`, even for a client that reads nothing (a full outbox):
        what is still queued is dropped; running calls are cancelled as it closes."""
        self._input_error = error
        self._input_done = True
        self._runner.closing = True
        self._ending = True
        # Wakes the stream when it waits for a message; a full outbox's stream is sending one.
        with contextlib.suppress(asyncio.QueueFull):
            self._outbox.put_nowait(_END)

    async def _heartbeat(self) -> None:
        interval = self._heartbeat_seconds
        while True:
            await asyncio.sleep(interval / 2)
            now = time.monotonic()
            if self._peer_heartbeats and now - self._last_received > MISSED_HEARTBEATS * interval:
                log.warning(
                    "ExecStream peer silent for %.0fs: closing the stream",
                    now - self._last_received,
                )
                self._end_with(ConnectError(Code.DEADLINE_EXCEEDED, "no heartbeat from the client"))
                return
            if now - self._last_sent >= interval:
                await self._runner.post(
                    ExecServerMessage(heartbeat=Heartbeat(sent_at_ms=_now_ms()))
                )


class ExecService:
    def __init__(self, dispatcher: Dispatcher, heartbeat_seconds: float) -> None:
        self._dispatcher = dispatcher
        self._heartbeat_seconds = heartbeat_seconds

    def exec_stream(
        self,
        request: AsyncIterator[ExecStreamElement],
        ctx: RequestContext[ExecStreamElement, ExecServerMessage],
    ) -> AsyncIterator[ExecServerMessage]:
        session = ExecStreamSession(
            self._dispatcher, self._heartbeat_seconds, rpc_extras(ctx.request_headers)
        )
        return session.serve(request)


def rpc_extras(headers: Mapping[str, str]) -> dict[str, Any]:
    """What the calls of one RPC get in CallContext.extras from its request headers."""
    trace_headers = incoming_trace_headers(headers)
    return {EXTRAS_KEY: trace_headers} if trace_headers else {}
