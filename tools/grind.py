"""The grind tools: a goal planned by a subagent, then the plan's steps run by subagents.

- start_grind_planning_tool_call: a planning subagent (in plan mode: it reads, and writes only
  its plan, with create_plan) makes a plan for the goal; its file is
  `.cursor/plans/<plan_id>.md` (tools/plans.py).
- start_grind_execution_tool_call: runs each open step of the plan (the call's `tasks`, else the
  plan file's unchecked todos), one after the other, each as a general-purpose subagent
  (tools/subagents.py) given the plan file; progress streams as TaskToolCallDelta; what each
  step answered goes to `grind-<execution_id>.json` in the artifacts folder. Each step's todo in
  the plan file is marked `[~]` when it starts and ticked `[x]` when it is done (the file
  rewritten atomically, as it is then, under one lock for the daemon's grinds), so a rerun goes
  on with the steps not done; a step that failed stays `[~]`, open. Starting a step claims it:
  under that lock the plan is read again, and a step another run of the daemon holds (started,
  not yet ended) or that is no longer open is skipped (the report says so), so two runs of one
  plan at once never run the same step.
Both need --model-endpoint (and --model), like Task.
"""

from __future__ import annotations

import asyncio
import enum
import json
import re
import time
import uuid
from pathlib import Path

from agent.v1.agent_pb2 import (
    StartGrindExecutionArgs,
    StartGrindExecutionResult,
    StartGrindExecutionSuccess,
    StartGrindPlanningArgs,
    StartGrindPlanningResult,
    StartGrindPlanningSuccess,
    SubagentType,
)
from agent.v1.common_pb2 import ToolError
from agent.v1.todos_pb2 import TodoItem, TodoStatus
from exec_daemon.kernel.agents import AgentModes, Subagent, SubagentSessions
from exec_daemon.kernel.config import off_without
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, ToolSpec, no_subject
from exec_daemon.kernel.state import Daemon
from tools.plans import PLANS_DIRECTORY
from tools.subagents import (
    KINDS,
    Conversations,
    SubagentKind,
    prepared,
    read_agent_file,
    run_subagent,
)
from tools.workspace import atomic_write, write_rules

PLAN_MAX_BYTES = 1024 * 1024
_PLAN_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,59}$")
# An open todo line of a plan file (tools/plans.py's plan_markdown): "- [ ] text <!-- id: x -->".
_OPEN_TODO = re.compile(r"^- \[[ ~]\] (?P<content>.+?)(?: <!-- id: (?P<id>[^>]+?) -->)?$")
# Any todo line, its checkbox captured with what is around it.
_TODO_LINE = re.compile(
    r"^(?P<before>\s*- \[)(?P<box>[ x~-])(?P<after>\] (?P<content>.+?)"
    r"(?: <!-- id: (?P<id>[^>]+?) -->)?\s*)$"
)
IN_PROGRESS, DONE = "~", "x"

PLANNER = SubagentKind(
    "grindPlanner",
    "Make a plan for the goal below: read the code it concerns, then save the plan with "
    "create_plan (a short name, an overview, the plan in markdown, and one todo per step, each "
    "step small enough for one agent to do and check). Then answer with the plan's name.",
    allows=Effect.PLAN,
)


async def start_grind_planning(
    args: StartGrindPlanningArgs, ctx: CallContext
) -> StartGrindPlanningResult:
    """Plans the goal with a planning subagent; answers the plan's id."""
    if not ctx.daemon.config.model_endpoint:
        return _planning_error(
            "unavailable", off_without("grind planning (a subagent)", "--model-endpoint")
        )
    if not args.goal.strip():
        return _planning_error("invalid_argument", "the goal is empty")
    agent_id = f"grind-planner-{uuid.uuid4().hex[:12]}"
    _register(ctx, agent_id, "plan the goal", SubagentType.SUBAGENT_TYPE_CUSTOM)
    # Plan mode: the permissions guard lets it write nothing but its plan.
    ctx.daemon.service(AgentModes).set_mode(agent_id, "plan")
    prompt = f"Goal: {args.goal.strip()}"
    if args.context_paths:
        prompt += "\n\nStart from these paths: " + ", ".join(args.context_paths)
    try:
        run = prepared(
            ctx.daemon, agent_id, PLANNER, readonly=False, model="", feature="grind planning"
        )
        final = await run_subagent(run, prompt, ctx)
    except CodedError as failure:
        return _planning_error(failure.code, failure.message)
    created = ctx.daemon.service(Conversations).last_success(agent_id, "create_plan")
    if created is None or not created.get("plan_path"):
        return _planning_error(
            "failed_precondition",
            f"the planning subagent {agent_id} saved no plan (no create_plan call succeeded); "
            f"it answered: {final[:500]}",
        )
    plan_id = Path(str(created["plan_path"])).stem
    return StartGrindPlanningResult(success=StartGrindPlanningSuccess(plan_id=plan_id))


def _planning_error(code: str, message: str) -> StartGrindPlanningResult:
    return StartGrindPlanningResult(error=ToolError(code=code, message=message))


def _register(ctx: CallContext, agent_id: str, description: str, subagent_type: int) -> None:
    ctx.daemon.service(SubagentSessions).add(
        Subagent(
            agent_id=agent_id,
            readonly=False,
            subagent_type=subagent_type,
            parent_agent_id=ctx.agent_id,
            description=description,
            started_ms=int(time.time() * 1000),
        )
    )


START_GRIND_PLANNING = ToolSpec(
    "start_grind_planning_tool_call",
    start_grind_planning,
    effects=Effect.PLAN,  # its subagent writes the plan file, nothing else
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("StartGrindPlanning"),
    subject=no_subject,
)


# --- execution -----------------------------------------------------------------------------------


def open_steps(plan_text: str) -> list[TodoItem]:
    """The plan file's todos not yet done (unchecked or in progress), in order."""
    steps: list[TodoItem] = []
    for line in plan_text.splitlines():
        found = _OPEN_TODO.match(line.strip())
        if found:
            steps.append(
                TodoItem(
                    id=found["id"] or f"todo-{len(steps) + 1}",
                    content=found["content"],
                    status=TodoStatus.TODO_STATUS_PENDING,
                )
            )
    return steps


def with_box(plan_text: str, step: TodoItem, box: str) -> str | None:
    """The plan with `step`'s open todo (found by its id, else by its text) marked `box`; None
    when the plan has no such open todo (a step the call named, not in the plan)."""
    lines = plan_text.splitlines(keepends=True)
    fallback = None
    for index, line in enumerate(lines):
        found = _TODO_LINE.match(line.rstrip("\r\n"))
        if found is None or found["box"] not in " ~":
            continue
        if found["id"] is not None and found["id"] == step.id:
            fallback = index
            break
        if fallback is None and found["id"] is None and found["content"] == step.content:
            fallback = index
    if fallback is None:
        return None
    found = _TODO_LINE.match(lines[fallback].rstrip("\r\n"))
    assert found is not None
    ending = lines[fallback][len(lines[fallback].rstrip("\r\n")) :]
    lines[fallback] = found["before"] + box + found["after"] + ending
    return "".join(lines)


class PlanMarks:
    """Marks a plan's todos as its grind goes (one lock: two grinds of one plan, or a grind and
    its own subagent's edit, never interleave a read and a write here), and which steps the
    daemon's runs hold now."""

    def __init__(self, daemon: Daemon) -> None:
        self._lock = asyncio.Lock()
        self._held: set[tuple[str, str]] = set()

    async def claim(self, ctx: CallContext, path: Path, step: TodoItem) -> str:
        """Marks `step` `[~]` and holds it for the caller; "" when it did, else why it is not
        to be run: another run holds it, or the plan (read again now) has it done."""
        key = _step_key(path, step)
        async with self._lock:
            if key in self._held:
                return "another run of the plan is doing it"
            outcome = await asyncio.to_thread(_mark, ctx, path, step, IN_PROGRESS)
            if outcome == _Marked.NOT_OPEN:
                return "the plan has it done"
            self._held.add(key)
            return ""

    async def mark(self, ctx: CallContext, path: Path, step: TodoItem, box: str) -> None:
        async with self._lock:
            await asyncio.to_thread(_mark, ctx, path, step, box)

    def let_go(self, path: Path, step: TodoItem) -> None:
        """The run that claimed `step` ended it (done, failed or cancelled)."""
        self._held.discard(_step_key(path, step))


def _step_key(path: Path, step: TodoItem) -> tuple[str, str]:
    return str(path), step.id or step.content


class _Marked(enum.Enum):
    MARKED = "marked"
    # The plan has a todo of that id or text, but done or cancelled.
    NOT_OPEN = "not open"
    # A step the call named that the plan does not hold (or no plan file): run, not marked.
    ABSENT = "absent"


def _mark(ctx: CallContext, path: Path, step: TodoItem, box: str) -> _Marked:
    text = read_agent_file(ctx.daemon, path, PLAN_MAX_BYTES)
    marked = with_box(text, step, box) if text is not None else None
    if marked is not None:
        atomic_write(path, marked.encode("utf-8"), rules=write_rules(ctx))
        return _Marked.MARKED
    return _Marked.NOT_OPEN if text is not None and _has_todo(text, step) else _Marked.ABSENT


def _has_todo(plan_text: str, step: TodoItem) -> bool:
    """The plan holds a todo (open or not) of `step`'s id, else of its text."""
    for line in plan_text.splitlines():
        found = _TODO_LINE.match(line.rstrip("\r\n"))
        if found is not None and (
            found["id"] == step.id or (found["id"] is None and found["content"] == step.content)
        ):
            return True
    return False


def _read_plan(ctx: CallContext, plan_id: str) -> tuple[Path, str]:
    if not _PLAN_ID.match(plan_id):
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT,
            f"invalid plan_id {plan_id!r}: give the id start_grind_planning answered",
        )
    path = Path(ctx.daemon.workspace) / PLANS_DIRECTORY / f"{plan_id}.md"
    text = read_agent_file(ctx.daemon, path, PLAN_MAX_BYTES)
    if text is None:
        raise CodedError(ErrorCode.NOT_FOUND, f"no plan {plan_id!r}: {path} does not exist")
    return path, text


async def start_grind_execution(
    args: StartGrindExecutionArgs, ctx: CallContext
) -> StartGrindExecutionResult:
    """Runs the plan's open steps, each as a subagent, one after the other."""
    if not ctx.daemon.config.model_endpoint:
        return _execution_error(
            "unavailable", off_without("grind execution (subagents)", "--model-endpoint")
        )
    try:
        path, text = await asyncio.to_thread(_read_plan, ctx, args.plan_id)
    except CodedError as failure:
        return _execution_error(failure.code, failure.message)
    steps = list(args.tasks) or open_steps(text)
    if not steps:
        return _execution_error(
            "failed_precondition", f"the plan {path} has no open step (every todo is checked)"
        )
    execution_id = f"{args.plan_id}-{uuid.uuid4().hex[:8]}"
    report: list[dict[str, str]] = []
    general = KINDS[SubagentType.SUBAGENT_TYPE_UNSPECIFIED]
    for number, step in enumerate(steps, start=1):
        agent_id = f"grind-{execution_id}-{number}"
        _register(ctx, agent_id, step.content, SubagentType.SUBAGENT_TYPE_UNSPECIFIED)
        prompt = (
            f"You carry out step {number} of {len(steps)} of the plan in {path} (read it "
            f"first). Do only this step, check it works, and report what you changed:\n\n"
            f"{step.content}"
        )
        marks = ctx.daemon.service(PlanMarks)
        try:
            skipped = await marks.claim(ctx, path, step)
        except CodedError as failure:
            return _step_error(failure, number, step, execution_id)
        if skipped:
            report.append({"step": step.id, "content": step.content, "skipped": skipped})
            continue
        final: str | None = None
        try:
            run = prepared(
                ctx.daemon, agent_id, general, readonly=False, model="", feature="grind execution"
            )
            final = await run_subagent(run, prompt, ctx)
            report.append(
                {"step": step.id, "content": step.content, "agent_id": agent_id, "answer": final}
            )
            await _save_report(ctx, execution_id, str(path), report)
            await marks.mark(ctx, path, step, DONE)
        except CodedError as failure:
            if final is None:
                return _step_error(failure, number, step, execution_id)
            return _execution_error(
                failure.code,
                f"execution {execution_id}: step {number} ({step.id}) was done, but: "
                f"{failure.message}",
            )
        finally:
            marks.let_go(path, step)
    return StartGrindExecutionResult(success=StartGrindExecutionSuccess(execution_id=execution_id))


async def _save_report(
    ctx: CallContext, execution_id: str, plan_path: str, steps: list[dict[str, str]]
) -> None:
    report = {"execution_id": execution_id, "plan": plan_path, "steps": steps}
    path = Path(ctx.daemon.config.artifacts_folder) / f"grind-{execution_id}.json"
    data = (json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    await asyncio.to_thread(atomic_write, path, data)


def _step_error(
    failure: CodedError, number: int, step: TodoItem, execution_id: str
) -> StartGrindExecutionResult:
    done = f"; steps done before it: {number - 1}" if number > 1 else ""
    return _execution_error(
        failure.code,
        f"step {number} ({step.id}: {step.content}) failed: {failure.message}{done} "
        f"(execution {execution_id})",
    )


def _execution_error(code: str, message: str) -> StartGrindExecutionResult:
    return StartGrindExecutionResult(error=ToolError(code=code, message=message))


START_GRIND_EXECUTION = ToolSpec(
    "start_grind_execution_tool_call",
    start_grind_execution,
    effects=Effect.WORKSPACE | Effect.MACHINE,  # its subagents change anything Task's may
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("StartGrindExecution"),
    subject=no_subject,
)
