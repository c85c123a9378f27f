"""A low-level async client for the daemon's RPCs (the SDK, exec_daemon/sdk/, is built on it;
the tests use it directly).

    async with ExecDaemonClient("http://127.0.0.1:8080", find_token()) as client:
        print(await client.ping())
        call = ToolCall(shell_tool_call=ShellToolCall(args=ShellArgs(command="echo hi")))
        outcome = await client.run(call)                # deltas, then the result (or an ExecError)
        diff = await client.control.get_diff(GetDiffRequest())  # every RPC carries the token
        async with client.exec_stream() as stream:
            started = await stream.start(call)
            async for message in started: ...           # deltas, then the result (or an ExecError)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from connectrpc.protocol import ProtocolType
from connectrpc.request import RequestContext
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

# Where a token comes from when none is given: the variable `serve` reads, then the file
# `./scripts/serve` keeps (mode 0600) in the folder it serves.
TOKEN_VARIABLE = "EXEC_DAEMON_AUTH_TOKEN"
TOKEN_FILE_NAME = ".exec-daemon-token"


class TokenNotFound(LookupError):
    """No token was given, none is in the environment and no token file was found (or usable)."""


def find_token(token: str | None = None, start: Path | None = None) -> str:
    """The daemon's token: `token` when given, else EXEC_DAEMON_AUTH_TOKEN, else the
    `.exec-daemon-token` file (as `./scripts/serve` keeps it) in `start` (default: the current
    folder) or the nearest folder above it. A file group or others may read is refused, as
    `serve --auth-token-file` refuses it."""
    if token:
        return token
    if from_env := os.environ.get(TOKEN_VARIABLE, "").strip():
        return from_env
    folder = (start or Path.cwd()).absolute()
    for candidate in (folder, *folder.parents):
        path = candidate / TOKEN_FILE_NAME
        try:
            with path.open("rb") as file:
                mode = os.fstat(file.fileno()).st_mode
                if mode & 0o077:
                    raise TokenNotFound(
                        f"{path} may be read by others (mode {mode & 0o777:04o}); chmod 600 it"
                    )
                found = file.read().decode("utf-8", "replace").strip()
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        if not found:
            raise TokenNotFound(f"{path} is empty")
        return found
    raise TokenNotFound(
        f"no token: pass one, set {TOKEN_VARIABLE}, or run in the folder where ./scripts/serve "
        f"keeps {TOKEN_FILE_NAME}"
    )


class BearerToken:
    """Adds `authorization: Bearer <token>` to every RPC that does not set it itself."""

    def __init__(self, token: str) -> None:
        self.value = f"Bearer {token}"

    async def on_start(self, ctx: RequestContext) -> None:
        if "authorization" not in ctx.request_headers:
            ctx.request_headers["authorization"] = self.value

    async def on_end(self, token: None, ctx: RequestContext, error: Exception | None) -> None:
        return None


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
        # Owned here: connect's clients never close an http_client they were given, and the
        # transport's pool would hold its connections open until it is garbage-collected.
        self._transport = HTTPTransport(http_version=version, enable_otel=False)
        self._http = Client(self._transport)
        self.headers = {"authorization": f"Bearer {token}"}
        common = {
            "protocol": protocol,
            "http_client": self._http,
            "send_compression": None,
            "timeout_ms": timeout_ms,
            # No token, no header: a caller that passes its own (or none) on purpose.
            "interceptors": (BearerToken(token),) if token else (),
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
        await self._transport.aclose()
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
        # The latest ones only: a stream may live for days.
        self.heartbeats: deque[Heartbeat] = deque(maxlen=1024)
        self.unmatched: deque[ExecServerMessage] = deque(maxlen=1024)
        self._reader: asyncio.Task[None] | None = None
        self.error: BaseException | None = None
        self.ended = asyncio.Event()
        # When the daemon last sent anything (heartbeats included): a watchdog's clock.
        self.last_message_at = time.monotonic()

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
                self.last_message_at = time.monotonic()
                if message.WhichOneof("message") == "heartbeat":
                    self.heartbeats.append(message.heartbeat)
                elif message.id in self._calls:
                    call = self._calls[message.id]
                    call._deliver(message)
                    if call.outcome.result is not None:
                        # A long-lived stream keeps no old answers. (Not on an ExecError: one
                        # answering a duplicate id comes before the running call's result.)
                        del self._calls[message.id]
                else:
                    self.unmatched.append(message)
        except Exception as exc:
            self.error = self.error or exc  # drop() said why first
        finally:
            cause = f": {self.error}" if self.error is not None else ""
            for call in self._calls.values():
                call._end(
                    StreamEndedError(
                        f"the daemon ended the stream before call {call.id} answered{cause}"
                    )
                )
            self.ended.set()

    def drop(self, why: str) -> None:
        """Gives the stream up (the daemon went silent): its unanswered calls fail with `why`."""
        self.error = self.error or StreamEndedError(why)
        if self._reader is not None:
            self._reader.cancel()

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
