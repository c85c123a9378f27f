"""The agent's own bookkeeping tools, and those only the orchestrator can answer.

- reflect_tool_call: keeps the agent's reflections (per agent, newest ones, in memory).
- switch_mode_tool_call: the agent's mode (agent, ask, plan, debug), per agent.
- truncated_tool_call: a call whose arguments were cut on the way; nothing runs.
- ask_question_tool_call, start_grind_planning_tool_call, start_grind_execution_tool_call,
  generate_image_tool_call: need a person, the orchestrator's batch runner or an image model,
  none of which is inside the VM; they answer `unavailable` saying so.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import TypeVar

from agent.v1.agent_pb2 import (
    AskQuestionArgs,
    AskQuestionResult,
    GenerateImageArgs,
    GenerateImageResult,
    ReflectArgs,
    ReflectResult,
    ReflectSuccess,
    StartGrindExecutionArgs,
    StartGrindExecutionResult,
    StartGrindPlanningArgs,
    StartGrindPlanningResult,
    SwitchModeArgs,
    SwitchModeResult,
    SwitchModeSuccess,
    TruncatedToolCallArgs,
    TruncatedToolCallResult,
)
from agent.v1.common_pb2 import ToolError
from exec_daemon.config import off_without
from exec_daemon.dispatch import CallContext
from exec_daemon.state import Daemon

MODES = ("agent", "ask", "plan", "debug")
DEFAULT_MODE = "agent"
REFLECTIONS_PER_AGENT = 50
# Conversations whose state is kept; the least recently used one is forgotten beyond this.
MAX_AGENTS = 1000

V = TypeVar("V")


@dataclass(frozen=True)
class Reflection:
    at_ms: int
    unexpected_action_outcomes: str
    relevant_instructions: str
    scenario_analysis: str
    critical_synthesis: str
    next_steps: str


def _mark_used(table: OrderedDict[str, V], agent_id: str) -> None:
    """Makes `agent_id` the most recently used entry; forgets the oldest beyond MAX_AGENTS."""
    table.move_to_end(agent_id)
    while len(table) > MAX_AGENTS:
        table.popitem(last=False)


class AgentStates:
    """Mode and reflections of every conversation (agent_id), in memory, bounded."""

    def __init__(self, daemon: Daemon) -> None:
        self._modes: OrderedDict[str, str] = OrderedDict()
        self._reflections: OrderedDict[str, deque[Reflection]] = OrderedDict()

    def mode(self, agent_id: str) -> str:
        return self._modes.get(agent_id, DEFAULT_MODE)

    def set_mode(self, agent_id: str, mode: str) -> None:
        self._modes[agent_id] = mode
        _mark_used(self._modes, agent_id)

    def add_reflection(self, agent_id: str, reflection: Reflection) -> int:
        kept = self._reflections.setdefault(agent_id, deque(maxlen=REFLECTIONS_PER_AGENT))
        kept.append(reflection)
        _mark_used(self._reflections, agent_id)
        return len(kept)

    def reflections(self, agent_id: str) -> list[Reflection]:
        return list(self._reflections.get(agent_id, ()))


def current_mode(daemon: Daemon, agent_id: str) -> str:
    """The mode an agent is in ("agent" until it switches)."""
    return daemon.service(AgentStates).mode(agent_id)


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
    states = ctx.daemon.service(AgentStates)
    previous = states.mode(ctx.agent_id)
    states.set_mode(ctx.agent_id, target)
    return SwitchModeResult(success=SwitchModeSuccess(from_mode_id=previous, to_mode_id=target))


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


def _orchestrator_only(what: str) -> ToolError:
    return ToolError(
        code="unavailable",
        message=f"{what} is handled by the orchestrator, not inside the VM; "
        "this daemon cannot answer it",
    )


async def ask_question(args: AskQuestionArgs, ctx: CallContext) -> AskQuestionResult:
    return AskQuestionResult(
        error=_orchestrator_only("ask_question (a person answers it through the client)")
    )


async def start_grind_planning(
    args: StartGrindPlanningArgs, ctx: CallContext
) -> StartGrindPlanningResult:
    return StartGrindPlanningResult(
        error=_orchestrator_only("start_grind_planning (batch planning runs in the backend)")
    )


async def start_grind_execution(
    args: StartGrindExecutionArgs, ctx: CallContext
) -> StartGrindExecutionResult:
    return StartGrindExecutionResult(
        error=_orchestrator_only("start_grind_execution (batch execution runs in the backend)")
    )


async def generate_image(args: GenerateImageArgs, ctx: CallContext) -> GenerateImageResult:
    if not ctx.daemon.config.generate_image_enabled:
        reason = off_without("image generation", "--generate-image-enabled")
    else:
        reason = "no image generation endpoint is configured for this daemon"
    return GenerateImageResult(
        error=ToolError(
            code="unavailable",
            message=f"{reason}; generating images needs a model the orchestrator provides, "
            "so it must handle generate_image",
        )
    )
