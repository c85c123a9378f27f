"""An async Python client for the daemon (used by the tests, handy for scripts).

async with ExecDaemonClient("http://127.0.0.1:8080", token) as client:
    print(await client.ping())
    outcome = await client.run(shell_call("echo hi"))
    async with client.exec_stream() as stream:
        call = await stream.start(tool_call)
        async for message in call: ...       # deltas, then the result (or an ExecError)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from connectrpc.protocol import ProtocolType
from pyqwest import Client, HTTPTransport, HTTPVersion

from agent.v1.control_connect import ControlServiceClient
from agent.v1.control_pb2 import ExecRequest, PingRequest, PingResponse
from agent.v1.exec_connect import ExecServiceClient
from agent.v1.exec_pb2 import (
    AbortToolCall,
    ExecClientControlMessage,
    ExecClientMessage,
    ExecError,
    ExecServerMessage,
    ExecStreamElement,
    Heartbeat,
    StreamClose,
)
from agent.v1.record_pb2 import GetSessionRecordRequest, SessionRecordEntry
from agent.v1.tool_call_pb2 import ToolCall, ToolCallDelta


class StreamEndedError(ConnectionError):
    """The daemon ended the stream (shutdown, lost connection) before the call answered."""


@dataclass
class CallOutcome:
    """Everything one tool call answered: its deltas, then a result or an ExecError."""

    deltas: list[ToolCallDelta] = field(default_factory=list)
    result: ToolCall | None = None
    error: ExecError | None = None

    def add(self, message: ExecServerMessage) -> None:
        kind = message.WhichOneof("message")
        if kind == "tool_call_delta":
            self.deltas.append(message.tool_call_delta)
        elif kind == "tool_call_result":
            self.result = message.tool_call_result
        elif kind == "error":
            self.error = message.error

    @property
    def done(self) -> bool:
        return self.result is not None or self.error is not None


class ExecDaemonClient:
    def __init__(
        self,
        address: str,
        token: str,
        *,
        http2: bool = True,
        protocol: ProtocolType = ProtocolType.CONNECT,
        timeout_ms: int | None = None,
    ) -> None:
        version = HTTPVersion.HTTP2 if http2 else HTTPVersion.HTTP1
        self._http = Client(HTTPTransport(http_version=version, enable_otel=False))
        self.headers = {"authorization": f"Bearer {token}"}
        common = {
            "protocol": protocol,
            "http_client": self._http,
            "send_compression": None,
            "timeout_ms": timeout_ms,
        }
        self.control = ControlServiceClient(address, **common)  # type: ignore[arg-type]
        self.exec = ExecServiceClient(address, **common)  # type: ignore[arg-type]

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self.control.close()
        await self.exec.close()
        # pyqwest's runtime threads may still call back into Python right after the last
        # request; a process exiting at that moment aborts (cf. pyqwest issue #164). Let them
        # drain first.
        await asyncio.sleep(0.05)

    async def ping(self) -> PingResponse:
        return await self.control.ping(PingRequest(), headers=self.headers)

    async def run(self, tool_call: ToolCall, agent_id: str = "", run_mode: int = 0) -> CallOutcome:
        """Runs one call through ControlService.Exec and collects its answer."""
        outcome = CallOutcome()
        async for message in self.control.exec(
            ExecRequest(tool_call=tool_call, agent_id=agent_id, run_mode=run_mode),
            headers=self.headers,
        ):
            outcome.add(message)
        if not outcome.done:
            raise StreamEndedError("the daemon ended the call's stream before it answered")
        return outcome

    def session_record(
        self, agent_id: str = "", since: int = 0
    ) -> AsyncIterator[SessionRecordEntry]:
        """ControlService.GetSessionRecord's entries."""
        return self.control.get_session_record(
            GetSessionRecordRequest(agent_id=agent_id, since=since), headers=self.headers
        )

    def exec_stream(self) -> ExecStream:
        return ExecStream(self)


class StreamCall:
    """One call on an ExecStream: iterate it for its deltas and its final answer."""

    def __init__(self, call_id: int) -> None:
        self.id = call_id
        self.outcome = CallOutcome()
        self._queue: asyncio.Queue[ExecServerMessage | StreamEndedError] = asyncio.Queue()

    def _deliver(self, message: ExecServerMessage) -> None:
        self.outcome.add(message)
        self._queue.put_nowait(message)

    def _end(self, why: StreamEndedError) -> None:
        """The stream is over: whoever iterates this unanswered call gets `why`."""
        if not self.outcome.done:
            self._queue.put_nowait(why)

    def __aiter__(self) -> AsyncIterator[ExecServerMessage]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ExecServerMessage]:
        while True:
            message = await self._queue.get()
            if isinstance(message, StreamEndedError):
                self._queue.put_nowait(message)  # every later iteration fails the same way
                raise message
            yield message
            if message.WhichOneof("message") in ("tool_call_result", "error"):
                return

    async def wait(self) -> CallOutcome:
        async for _ in self:
            pass
        return self.outcome


class ExecStream:
    """A bidirectional ExecStream with calls matched by id."""

    def __init__(self, client: ExecDaemonClient) -> None:
        self._client = client
        self._outgoing: asyncio.Queue[ExecStreamElement | None] = asyncio.Queue()
        self._calls: dict[int, StreamCall] = {}
        self._next_id = 1
        self.heartbeats: list[Heartbeat] = []
        self.unmatched: list[ExecServerMessage] = []
        self._reader: asyncio.Task[None] | None = None
        self.error: BaseException | None = None
        self.ended = asyncio.Event()

    async def __aenter__(self) -> Self:
        responses = self._client.exec.exec_stream(self._requests(), headers=self._client.headers)
        self._reader = asyncio.create_task(self._read(responses))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _requests(self) -> AsyncIterator[ExecStreamElement]:
        while (element := await self._outgoing.get()) is not None:
            yield element

    async def _read(self, responses: AsyncIterator[ExecServerMessage]) -> None:
        try:
            async for message in responses:
                if message.WhichOneof("message") == "heartbeat":
                    self.heartbeats.append(message.heartbeat)
                elif message.id in self._calls:
                    self._calls[message.id]._deliver(message)
                else:
                    self.unmatched.append(message)
        except Exception as exc:
            self.error = exc
        finally:
            cause = f": {self.error}" if self.error is not None else ""
            for call in self._calls.values():
                call._end(
                    StreamEndedError(
                        f"the daemon ended the stream before call {call.id} answered{cause}"
                    )
                )
            self.ended.set()

    async def send(self, element: ExecStreamElement) -> None:
        await self._outgoing.put(element)

    async def start(
        self,
        tool_call: ToolCall,
        agent_id: str = "",
        call_id: int | None = None,
        run_mode: int = 0,
    ) -> StreamCall:
        if call_id is None:
            call_id = self._next_id
        self._next_id = max(self._next_id, call_id + 1)
        # Answers are matched by id: a second call with a pending id shares its StreamCall.
        call = self._calls.get(call_id) or StreamCall(call_id)
        self._calls[call_id] = call
        if self.ended.is_set():
            call._end(StreamEndedError(f"the stream had ended before call {call_id} started"))
            return call
        await self.send(
            ExecStreamElement(
                exec_client_message=ExecClientMessage(
                    id=call_id,
                    tool_call=tool_call,
                    agent_id=agent_id,
                    run_mode=run_mode,
                )
            )
        )
        return call

    async def abort(self, call_id: int) -> None:
        await self.send(
            ExecStreamElement(
                exec_client_control_message=ExecClientControlMessage(
                    abort=AbortToolCall(id=call_id)
                )
            )
        )

    async def heartbeat(self) -> None:
        await self.send(
            ExecStreamElement(
                exec_client_control_message=ExecClientControlMessage(heartbeat=Heartbeat())
            )
        )

    async def close(self) -> None:
        """Says no more calls will come, waits for the server to end the stream."""
        with contextlib.suppress(Exception):
            await self.send(
                ExecStreamElement(
                    exec_client_control_message=ExecClientControlMessage(stream_close=StreamClose())
                )
            )
        await self._outgoing.put(None)
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
