"""A tool whose behaviour the test scripts through its args, to exercise the spine.

Registered under the `reflect_tool_call` variant: `ReflectArgs.next_steps` holds the script,
space-separated steps run in order — `delta:TEXT` (emit a stdout delta), `sleep:SECONDS`,
`crash` (raise), `fail:CODE` (raise CodedError). The handler records what happened to it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agent.v1.agent_pb2 import ReflectArgs, ReflectResult, ReflectSuccess, ReflectToolCall
from agent.v1.shell_pb2 import ShellToolCallDelta
from agent.v1.tool_call_pb2 import ToolCall, ToolCallDelta
from exec_daemon.kernel.context import CallContext, Handler
from exec_daemon.kernel.errors import CodedError, ErrorCode

VARIANT = "reflect_tool_call"


@dataclass
class ScriptedTool:
    started: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)

    async def __call__(self, args: ReflectArgs, ctx: CallContext) -> ReflectResult:
        self.started.append(ctx.call_id)
        try:
            for step in args.next_steps.split():
                verb, _, value = step.partition(":")
                if verb == "delta":
                    await ctx.emit(
                        ToolCallDelta(shell_tool_call_delta=ShellToolCallDelta(stdout=value))
                    )
                elif verb == "sleep":
                    await asyncio.sleep(float(value))
                elif verb == "crash":
                    raise RuntimeError("secret-internal-detail")
                elif verb == "fail":
                    raise CodedError(ErrorCode(value), f"scripted failure {value}")
        except asyncio.CancelledError:
            self.cancelled.append(ctx.call_id)
            raise
        self.finished.append(ctx.call_id)
        return ReflectResult(success=ReflectSuccess())

    def handlers(self) -> dict[str, Handler]:
        return {VARIANT: self}


def script(steps: str) -> ToolCall:
    return ToolCall(reflect_tool_call=ReflectToolCall(args=ReflectArgs(next_steps=steps)))
