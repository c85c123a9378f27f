"""Runs one ToolCall: finds its handler, wraps it in the cross-cutting middleware, builds the answer.

Every tool call of every transport (ExecStream, ControlService.Exec) goes through
`Dispatcher.run`, the one place where permissions, hooks, secret redaction and tracing wrap a call
(as `Middleware`s, outermost first).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import replace

from google.protobuf.message import Message

from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.kernel.context import (
    CallContext,
    CallReport,
    Invocation,
    Middleware,
    Next,
)
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.lifecycle import Lifecycle
from exec_daemon.kernel.spec import ToolSpec
from exec_daemon.kernel.state import Daemon
from exec_daemon.kernel.wire import fields

log = logging.getLogger(__name__)


def tool_variant(tool_call: ToolCall) -> str:
    """The name of the ToolCall variant that is set, or a CodedError saying why none is."""
    variant = tool_call.WhichOneof("tool")
    if variant is not None:
        return variant
    numbers = [number for number, _type, _value in fields(tool_call.SerializeToString())]
    if numbers:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT,
            f"unknown tool: ToolCall field {numbers[0]} is not a known variant",
        )
    raise CodedError(ErrorCode.INVALID_ARGUMENT, "the ToolCall has no tool set")


class Dispatcher:
    def __init__(
        self,
        daemon: Daemon,
        specs: Iterable[ToolSpec],
        middlewares: Sequence[Middleware] = (),
    ) -> None:
        self.daemon = daemon
        self._specs = {spec.variant: spec for spec in specs}
        self._middlewares = list(middlewares)
        # One chain per tool, holding only the middleware that concerns it (built on first use).
        self._chains: dict[str, Next] = {}

    @property
    def specs(self) -> Sequence[ToolSpec]:
        return tuple(self._specs.values())

    def _chain_for(self, spec: ToolSpec) -> Next:
        chain = self._chains.get(spec.variant)
        if chain is None:
            concerned = [
                middleware
                for middleware in self._middlewares
                if getattr(middleware, "concerns", _every_tool)(spec)
            ]
            chain = self._chains[spec.variant] = self._build_chain(concerned)
        return chain

    def _build_chain(self, middlewares: list[Middleware]) -> Next:
        async def call_handler(inv: Invocation) -> Message:
            return await inv.spec.handler(inv.args, inv.ctx)

        chain: Next = call_handler
        for middleware in reversed(middlewares):
            chain = _bind(middleware, chain)
        return chain

    async def run(self, tool_call: ToolCall, ctx: CallContext) -> ToolCall:
        """Runs the call and returns the ToolCall with `result` set.

        Raises CodedError when the call cannot be run; any other exception is a handler bug
        and is logged here with its traceback and answered as `internal` (the text never leaves
        the daemon).
        """
        tool = tool_variant(tool_call)
        spec = self._specs.get(tool)
        if spec is None:
            raise CodedError(ErrorCode.UNIMPLEMENTED, f"{tool} is not implemented by this daemon")
        variant = getattr(tool_call, tool)
        ctx = replace(ctx, tool=tool, report=CallReport())
        invocation = Invocation(tool=tool, args=variant.args, ctx=ctx, spec=spec)
        lifecycle = self.daemon.service(Lifecycle)
        if not lifecycle.accepts_calls:
            raise CodedError(ErrorCode.UNAVAILABLE, "the daemon is draining: no new tool calls")
        try:
            # Counted while it runs: a drain (SIGTERM) lets it finish within its grace period.
            with lifecycle.calls.counted():
                result = await self._chain_for(spec)(invocation)
        except CodedError:
            raise
        except Exception as exc:
            log.exception("tool call %s (id %d) crashed", tool, ctx.call_id)
            raise CodedError(ErrorCode.INTERNAL, f"{tool} failed with an internal error") from exc
        answer = ToolCall()
        answered = getattr(answer, tool)
        answered.args.CopyFrom(ctx.report.args_run or variant.args)
        answered.result.CopyFrom(result)
        if ctx.report.feedback.ByteSize():
            answer.hook_feedback.CopyFrom(ctx.report.feedback)
        return answer


def _every_tool(_spec: ToolSpec) -> bool:
    return True


def _bind(middleware: Middleware, call_next: Next) -> Next:
    async def bound(inv: Invocation) -> Message:
        return await middleware(inv, call_next)

    return bound
