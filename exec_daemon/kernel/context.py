"""What a tool call carries through the layers: its context, its middleware's types, its result's cases.

Handlers (tools/) get a `CallContext`; middleware (exec_daemon/guards/, telemetry/) are
`Middleware`s around the handler; the RPC layer's `Dispatcher` (exec_daemon/rpc/dispatch.py)
builds the chain and runs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from google.protobuf.message import Message

from agent.v1.common_pb2 import HookFeedback, RunMode
from agent.v1.tool_call_pb2 import ToolCall, ToolCallDelta
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.sandboxing import SandboxDecision
from exec_daemon.kernel.spec import ToolSpec
from exec_daemon.kernel.state import Daemon

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
    # Free-form values the RPC layer hands to middleware (e.g. the request's trace headers).
    extras: Mapping[str, Any] = field(default_factory=dict)
    # A shell call's sandbox decision, when the permissions guard took it (exec_daemon/kernel/sandboxing.py).
    sandbox: SandboxDecision | None = None
    # agent.v1.RunMode asked for by this call; 0 = the daemon's --run-mode.
    run_mode: int = 0
    # Filled by the middleware while the call runs (one per call, made by Dispatcher.run).
    report: CallReport = field(default_factory=CallReport)

    def with_emit(self, emit: Emit) -> CallContext:
        return replace(self, emit=emit)


RUN_EVERYTHING, ALLOWLIST, AUTO_REVIEW = "run_everything", "allowlist", "auto_review"
_RUN_MODE_NAMES = {
    RunMode.RUN_MODE_RUN_EVERYTHING: RUN_EVERYTHING,
    RunMode.RUN_MODE_ALLOWLIST: ALLOWLIST,
    RunMode.RUN_MODE_AUTO_REVIEW: AUTO_REVIEW,
}


def call_run_mode(ctx: CallContext) -> str:
    """The run mode a call runs in: its own `run_mode`, else the daemon's --run-mode."""
    return _RUN_MODE_NAMES.get(ctx.run_mode, ctx.daemon.config.run_mode)  # type: ignore[call-overload]


Handler = Callable[[Any, CallContext], Awaitable[Message]]


@dataclass(frozen=True)
class Invocation:
    tool: str
    args: Message
    ctx: CallContext
    # What the tool declares (exec_daemon/kernel/spec.py): what the guards go by.
    spec: ToolSpec


Next = Callable[[Invocation], Awaitable[Message]]
Middleware = Callable[[Invocation, Next], Awaitable[Message]]


def result_case(result: Message, case: ErrorCode, reason: str) -> Message:
    """Sets the oneof case `case` (e.g. "aborted") of a tool result; a result without that case
    raises it as a CodedError.

    Every result message names its shared cases the same way and each has a `reason` (or, for
    `error`, a `message`) string, so any tool can be answered generically.
    """
    field_desc = result.DESCRIPTOR.fields_by_name.get(case)
    if field_desc is None:
        raise CodedError(case, reason)
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


def only_for(concerns: Callable[[ToolSpec], bool]) -> Callable[[Middleware], Middleware]:
    """Marks a middleware as concerning only the tools whose spec `concerns` accepts: other
    tools' chains leave it out."""

    def mark(middleware: Middleware) -> Middleware:
        setattr(middleware, "concerns", concerns)  # noqa: B010 (a function attribute)
        return middleware

    return mark
