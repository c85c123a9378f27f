"""The agent's own bookkeeping tools.

- reflect_tool_call: keeps the agent's reflections (per agent, newest ones, in memory).
- switch_mode_tool_call: the agent's mode (agent, ask, plan, debug), per agent, kept in the
  daemon's state (exec_daemon/kernel/agents.py); in ask mode the permissions guard refuses every
  call that changes something, in plan mode every one but create_plan. Switching to a mode that
  allows more (back to agent or debug) needs approval: the call answers `rejected` with
  needs_approval unless it carries run_mode RUN_MODE_RUN_EVERYTHING.
- truncated_tool_call: a call whose arguments were cut on the way; nothing runs.

ask_question is in tools/questions.py, generate_image in tools/images.py, the grind tools in
tools/grind.py.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from dataclasses import dataclass

from agent.v1.agent_pb2 import (
    ReflectArgs,
    ReflectResult,
    ReflectSuccess,
    SwitchModeArgs,
    SwitchModeResult,
    SwitchModeSuccess,
    TruncatedToolCallArgs,
    TruncatedToolCallResult,
)
from agent.v1.common_pb2 import Rejected, RunMode, ToolError
from exec_daemon.kernel.agents import MODE_ALLOWS, MODES, AgentModes, mark_used
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, ToolSpec, no_subject
from exec_daemon.kernel.state import Daemon

REFLECTIONS_PER_AGENT = 50


@dataclass(frozen=True)
class Reflection:
    at_ms: int
    unexpected_action_outcomes: str
    relevant_instructions: str
    scenario_analysis: str
    critical_synthesis: str
    next_steps: str


class AgentStates:
    """Reflections of every conversation (agent_id), in memory, bounded."""

    def __init__(self, daemon: Daemon) -> None:
        self._reflections: OrderedDict[str, deque[Reflection]] = OrderedDict()

    def add_reflection(self, agent_id: str, reflection: Reflection) -> int:
        kept = self._reflections.setdefault(agent_id, deque(maxlen=REFLECTIONS_PER_AGENT))
        kept.append(reflection)
        mark_used(self._reflections, agent_id)
        return len(kept)

    def reflections(self, agent_id: str) -> list[Reflection]:
        return list(self._reflections.get(agent_id, ()))


async def reflect(args: ReflectArgs, ctx: CallContext) -> ReflectResult:
    reflection = Reflection(
        at_ms=int(time.time() * 1000),
        unexpected_action_outcomes=args.unexpected_action_outcomes,
        relevant_instructions=args.relevant_instructions,
        scenario_analysis=args.scenario_analysis,
        critical_synthesis=args.critical_synthesis,
        next_steps=args.next_steps,
    )
    if not any(
        (
            reflection.unexpected_action_outcomes,
            reflection.relevant_instructions,
            reflection.scenario_analysis,
            reflection.critical_synthesis,
            reflection.next_steps,
        )
    ):
        return ReflectResult(
            error=ToolError(code="invalid_argument", message="the reflection is empty")
        )
    count = ctx.daemon.service(AgentStates).add_reflection(ctx.agent_id, reflection)
    return ReflectResult(success=ReflectSuccess(reflection_count=count))


REFLECT = ToolSpec(
    "reflect_tool_call",
    reflect,
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("Reflect"),
    subject=no_subject,
)


async def switch_mode(args: SwitchModeArgs, ctx: CallContext) -> SwitchModeResult:
    target = args.target_mode_id.strip().lower()
    if target not in MODES:
        shown = args.target_mode_id or "(empty)"
        return SwitchModeResult(
            error=ToolError(
                code="invalid_argument",
                message=f"unknown mode {shown!r}; valid modes: {', '.join(MODES)}",
            )
        )
    modes = ctx.daemon.service(AgentModes)
    previous = modes.mode(ctx.agent_id)
    widens = MODE_ALLOWS[target] & ~modes.allows(ctx.agent_id)
    if widens and ctx.run_mode != RunMode.RUN_MODE_RUN_EVERYTHING:
        # An agent (perhaps prompt-injected) must not lift its own restriction: a person does,
        # by letting the orchestrator resend the call with run_mode RUN_MODE_RUN_EVERYTHING.
        return SwitchModeResult(
            rejected=Rejected(
                reason=f"leaving {previous} mode for {target} mode lets the agent make "
                "changes: it needs approval",
                needs_approval=True,
                source="agent_mode",
            )
        )
    modes.set_mode(ctx.agent_id, target)
    return SwitchModeResult(success=SwitchModeSuccess(from_mode_id=previous, to_mode_id=target))


SWITCH_MODE = ToolSpec(
    "switch_mode_tool_call",
    switch_mode,
    # The mode only ever narrows what the agent may do; a read-only subagent stays read-only.
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("SwitchMode"),
    subject=no_subject,
)


async def truncated(args: TruncatedToolCallArgs, ctx: CallContext) -> TruncatedToolCallResult:
    tool = args.original_tool_name or "an unnamed tool"
    why = f" ({args.reason})" if args.reason else ""
    return TruncatedToolCallResult(
        error=ToolError(
            code="truncated",
            message=f"the arguments of this {tool} call were cut before they reached the "
            f"daemon{why}, so nothing was run; send the call again with smaller arguments "
            "(e.g. split a large file write into several edits)",
        )
    )


TRUNCATED = ToolSpec(
    "truncated_tool_call",
    truncated,
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("Truncated"),
    subject=no_subject,
)
