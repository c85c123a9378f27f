"""Runs one ToolCall: finds its handler, wraps it in the cross-cutting middleware, builds the answer.

Every tool call of every transport (ExecStream, ControlService.Exec) goes through
`Dispatcher.run`, the one place where permissions, hooks, secret redaction and tracing wrap a call
(as `Middleware`s, outermost first).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from google.protobuf.message import Message

from agent.v1.common_pb2 import HookFeedback
from agent.v1.exec_pb2 import ExecError
from agent.v1.tool_call_pb2 import ToolCall, ToolCallDelta
from exec_daemon.kernel.state import Daemon
from exec_daemon.kernel.wire import fields

log = logging.getLogger(__name__)

Emit = Callable[[ToolCallDelta], Awaitable[None]]


async def _discard(_delta: ToolCallDelta) -> None:
    return None


@dataclass
class CallReport:
    """What the middleware learned while running a call, beyond its result; goes into the answer."""

    # The args the handler actually ran with, when the middleware changed them (a hook's
    # rewrite, the sandbox policy a run mode imposes).
    args_run: Message | None = None
    feedback: HookFeedback = field(default_factory=HookFeedback)


@dataclass(frozen=True)
class CallContext:
    """What a handler knows about the call it runs."""

    daemon: Daemon
    call_id: int = 0
    agent_id: str = ""
    # The ToolCall variant, e.g. "shell_tool_call".
    tool: str = ""
    # Sends a ToolCallDelta for this call (after the middleware, e.g. redaction, saw it).
    emit: Emit = _discard
    # Free-form values middleware hands to handlers (e.g. the effective run mode).
    extras: Mapping[str, Any] = field(default_factory=dict)
    # agent.v1.RunMode asked for by this call; 0 = the daemon's --run-mode.
    run_mode: int = 0
    # Filled by the middleware while the call runs (one per call, made by Dispatcher.run).
    report: CallReport = field(default_factory=CallReport)

    def with_emit(self, emit: Emit) -> CallContext:
        return replace(self, emit=emit)


Handler = Callable[[Any, CallContext], Awaitable[Message]]


@dataclass(frozen=True)
class Invocation:
    tool: str
    args: Message
    ctx: CallContext


Next = Callable[[Invocation], Awaitable[Message]]
Middleware = Callable[[Invocation, Next], Awaitable[Message]]


class ToolCallError(Exception):
    """The call cannot be run at all; it is answered with ExecError{code, message}."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_exec_error(self) -> ExecError:
        return ExecError(code=self.code, message=self.message)


def tool_variant(tool_call: ToolCall) -> str:
    """The name of the ToolCall variant that is set, or a ToolCallError saying why none is."""
    variant = tool_call.WhichOneof("tool")
    if variant is not None:
        return variant
    numbers = [number for number, _type, _value in fields(tool_call.SerializeToString())]
    if numbers:
        raise ToolCallError(
            "invalid_argument", f"unknown tool: ToolCall field {numbers[0]} is not a known variant"
        )
    raise ToolCallError("invalid_argument", "the ToolCall has no tool set")


def result_case(result: Message, case: str, reason: str) -> Message:
    """Sets the oneof case `case` (e.g. "rejected", "aborted", "error") of a tool result.

    Every result message names its shared cases the same way and each has a `reason` (or, for
    `error`, a `message`) string, so any tool can be answered generically.
    """
    field_desc = result.DESCRIPTOR.fields_by_name.get(case)
    if field_desc is None:
        raise ToolCallError(case, reason)
    sub = getattr(result, case)
    sub.SetInParent()
    for text_field in ("reason", "message"):
        if text_field in sub.DESCRIPTOR.fields_by_name:
            setattr(sub, text_field, reason)
            break
    return result


def result_class(tool: str) -> type[Message]:
    variant_desc = ToolCall.DESCRIPTOR.fields_by_name[tool].message_type
    cls: type[Message] = variant_desc.fields_by_name["result"].message_type._concrete_class
    return cls


def only_for(*tools: str) -> Callable[[Middleware], Middleware]:
    """Marks a middleware as concerning these tools only: other tools' chains leave it out."""

    def mark(middleware: Middleware) -> Middleware:
        setattr(middleware, "applies_to", frozenset(tools))  # noqa: B010 (a function attribute)
        return middleware

    return mark


class Dispatcher:
    def __init__(
        self,
        daemon: Daemon,
        handlers: Mapping[str, Handler],
        middlewares: Sequence[Middleware] = (),
    ) -> None:
        self.daemon = daemon
        self._handlers = handlers
        self._middlewares = list(middlewares)
        # One chain per tool, holding only the middleware that concerns it (built on first use).
        self._chains: dict[str, Next] = {}

    def _chain_for(self, tool: str) -> Next:
        chain = self._chains.get(tool)
        if chain is None:
            concerned = [
                middleware
                for middleware in self._middlewares
                if tool in getattr(middleware, "applies_to", (tool,))
            ]
            chain = self._chains[tool] = self._build_chain(concerned)
        return chain

    def _build_chain(self, middlewares: list[Middleware]) -> Next:
        async def call_handler(inv: Invocation) -> Message:
            handler = self._handlers.get(inv.tool)
            if handler is None:
                raise ToolCallError(
                    "unimplemented", f"{inv.tool} is not implemented by this daemon"
                )
            return await handler(inv.args, inv.ctx)

        chain: Next = call_handler
        for middleware in reversed(middlewares):
            chain = _bind(middleware, chain)
        return chain

    async def run(self, tool_call: ToolCall, ctx: CallContext) -> ToolCall:
        """Runs the call and returns the ToolCall with `result` set.

        Raises ToolCallError when the call cannot be run; any other exception is a handler bug
        and is logged here with its traceback and answered as `internal` (the text never leaves
        the daemon).
        """
        tool = tool_variant(tool_call)
        variant = getattr(tool_call, tool)
        ctx = replace(ctx, tool=tool, report=CallReport())
        try:
            result = await self._chain_for(tool)(Invocation(tool=tool, args=variant.args, ctx=ctx))
        except ToolCallError:
            raise
        except Exception as exc:
            log.exception("tool call %s (id %d) crashed", tool, ctx.call_id)
            raise ToolCallError("internal", f"{tool} failed with an internal error") from exc
        answer = ToolCall()
        answered = getattr(answer, tool)
        answered.args.CopyFrom(ctx.report.args_run or variant.args)
        answered.result.CopyFrom(result)
        if ctx.report.feedback.ByteSize():
            answer.hook_feedback.CopyFrom(ctx.report.feedback)
        return answer


def _bind(middleware: Middleware, call_next: Next) -> Next:
    async def bound(inv: Invocation) -> Message:
        return await middleware(inv, call_next)

    return bound
