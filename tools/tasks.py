"""task_tool_call (Task): registers a subagent session; the orchestrator runs its inference.

The daemon's part of a subagent is its identity: an agent_id its tool calls will carry, and
whether it was started read-only (then the permission guard refuses its writes). A subagent
started by a read-only agent, or by an agent in a mode that restricts it (ask, plan), is
read-only too (else starting one would be a way around the restriction), and resuming can make
an agent read-only but never lift it.
"""

from __future__ import annotations

import time
import uuid

from agent.v1.agent_pb2 import TaskArgs, TaskResult, TaskSuccess
from exec_daemon.kernel.agents import AgentModes, Subagent, SubagentSessions
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.spec import EVERYTHING, Effect, Hooks, RunModeRule, ToolSpec, no_subject


def _error(code: str, message: str) -> TaskResult:
    return TaskResult(error={"code": code, "message": message})


async def task(args: TaskArgs, ctx: CallContext) -> TaskResult:
    started = time.monotonic()
    sessions = ctx.daemon.service(SubagentSessions)
    restricted = ctx.daemon.service(AgentModes).allows(ctx.agent_id) != EVERYTHING
    readonly = args.readonly or restricted or sessions.is_readonly(ctx.agent_id)
    if args.resume:
        agent = sessions.get(args.resume)
        if agent is None:
            return _error("not_found", f"no subagent {args.resume!r} to resume on this daemon")
        agent.readonly = agent.readonly or readonly
        resumed = True
    else:
        agent_id = args.agent_id or f"subagent-{uuid.uuid4().hex}"
        if agent_id == ctx.agent_id or sessions.get(agent_id) is not None:
            return _error("already_exists", f"agent {agent_id!r} already exists: resume it instead")
        agent = Subagent(
            agent_id=agent_id,
            readonly=readonly,
            subagent_type=args.subagent_type,
            parent_agent_id=ctx.agent_id,
            description=args.description,
            started_ms=int(time.time() * 1000),
        )
        sessions.add(agent)
        resumed = False
    return TaskResult(
        success=TaskSuccess(
            agent_id=agent.agent_id,
            readonly=agent.readonly,
            resumed=resumed,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
    )


TASK = ToolSpec(
    "task_tool_call",
    task,
    # It registers an agent id; a subagent of a read-only agent is read-only too.
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("Task"),
    subject=no_subject,
)
