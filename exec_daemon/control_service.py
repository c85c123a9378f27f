"""agent.v1.ControlService: the daemon's management API (one method per RPC)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

from connectrpc.request import RequestContext

from agent.v1.control_connect import ControlService as ControlServiceBase
from agent.v1.control_pb2 import (
    ExecRequest,
    PingRequest,
    PingResponse,
    UpdateEnvironmentVariablesRequest,
    UpdateEnvironmentVariablesResponse,
)
from agent.v1.exec_pb2 import ExecServerMessage
from exec_daemon import __version__
from exec_daemon.dispatch import Dispatcher, ToolCallError, tool_variant
from exec_daemon.exec_service import CANCEL_GRACE_SECONDS, OUTBOX_SIZE, CallRunner

_END = object()


class ControlService(ControlServiceBase):
    def __init__(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher
        self._daemon = dispatcher.daemon

    async def ping(
        self, request: PingRequest, ctx: RequestContext[PingRequest, PingResponse]
    ) -> PingResponse:
        return PingResponse(
            version=__version__,
            uptime_ms=self._daemon.uptime_ms(),
            pid=os.getpid(),
            workspace=self._daemon.workspace,
        )

    async def exec(
        self, request: ExecRequest, ctx: RequestContext[ExecRequest, ExecServerMessage]
    ) -> AsyncIterator[ExecServerMessage]:
        try:
            tool_variant(request.tool_call)
        except ToolCallError as exc:
            yield ExecServerMessage(error=exc.to_exec_error())
            return
        outbox: asyncio.Queue[object] = asyncio.Queue(OUTBOX_SIZE)
        runner = CallRunner(self._dispatcher, outbox)

        async def run_then_end() -> None:
            await runner.run(0, request.tool_call, request.agent_id, request.run_mode)
            await outbox.put(_END)

        task = asyncio.create_task(run_then_end())
        try:
            while (item := await outbox.get()) is not _END:
                assert isinstance(item, ExecServerMessage)
                yield item
        finally:
            runner.closing = True
            task.cancel()
            await asyncio.wait([task], timeout=CANCEL_GRACE_SECONDS)

    async def update_environment_variables(
        self,
        request: UpdateEnvironmentVariablesRequest,
        ctx: RequestContext[UpdateEnvironmentVariablesRequest, UpdateEnvironmentVariablesResponse],
    ) -> UpdateEnvironmentVariablesResponse:
        count = self._daemon.env.update(
            dict(request.env), replace=request.replace, unset=list(request.unset)
        )
        return UpdateEnvironmentVariablesResponse(variable_count=count)
