"""task_tool_call (Task): starts (or resumes) a subagent and, with --model-endpoint, runs it.

A subagent's identity is an agent_id its tool calls carry, and whether it was started read-only
(then the permission guard refuses its writes). With --model-endpoint the daemon runs the
subagent's loop itself (tools/subagents.py: its type chooses its prompt and tools, progress
streams as TaskToolCallDelta, the result carries its final message); without one, Task only
registers the subagent and the orchestrator runs its inference, its calls carrying the id. A subagent
started by a read-only agent, or by an agent in a mode that restricts it (ask, plan), is
read-only too (else starting one would be a way around the restriction), and resuming can make
an agent read-only but never lift it. A Task of a stateful type (debug, computerUse) whose
agent_id names a subagent of that type the caller started resumes it, as `resume` does. Its
`attachments` reach the model with the prompt (tools/subagent_media.py: images, a video's
frames), each read with the read tool's rules.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from agent.v1.agent_pb2 import SubagentType, TaskArgs, TaskResult, TaskSuccess
from exec_daemon.kernel.agents import AgentModes, Subagent, SubagentSessions
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.spec import EVERYTHING, Effect, Hooks, RunModeRule, ToolSpec, no_subject
from tools.subagent_media import Picture, attachment_pictures
from tools.subagents import (
    KINDS,
    Conversations,
    SubagentKind,
    kind_of,
    prepared,
    run_subagent,
)


def _error(code: str, message: str) -> TaskResult:
    return TaskResult(error={"code": code, "message": message})


async def task(args: TaskArgs, ctx: CallContext) -> TaskResult:
    started = time.monotonic()
    sessions = ctx.daemon.service(SubagentSessions)
    restricted = ctx.daemon.service(AgentModes).allows(ctx.agent_id) != EVERYTHING
    readonly = args.readonly or restricted or sessions.is_readonly(ctx.agent_id)
    running = bool(ctx.daemon.config.model_endpoint)
    resume = args.resume or _stateful_one(args, sessions, ctx.agent_id)
    kind = None
    pictures: list[Picture] = []
    if running:
        if not args.prompt.strip():
            return _error("invalid_argument", "the Task has no prompt")
        try:
            kind = await _kind_for(args, resume, ctx)
            pictures = await attachment_pictures(ctx.daemon, args.attachments)
        except CodedError as failure:
            return _error(failure.code, failure.message)
        readonly = readonly or kind.readonly
    if resume:
        agent = sessions.get(resume)
        if agent is None:
            return _error("not_found", f"no subagent {resume!r} to resume on this daemon")
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
    final_message = ""
    if kind is not None:
        try:
            run = prepared(
                ctx.daemon,
                agent.agent_id,
                kind,
                readonly=agent.readonly,
                model=args.model,
                feature="Task",
            )
            final_message = await run_subagent(run, args.prompt, ctx, pictures)
        except CodedError as failure:
            return _error(failure.code, failure.message)
    return TaskResult(
        success=TaskSuccess(
            agent_id=agent.agent_id,
            readonly=agent.readonly,
            resumed=resumed,
            duration_ms=int((time.monotonic() - started) * 1000),
            final_message=final_message,
        )
    )


def _stateful_one(args: TaskArgs, sessions: SubagentSessions, caller: str) -> str:
    """The subagent a Task resumes without being told to: one of a stateful type (debug,
    computerUse) that this agent started, named by the Task's agent_id and type."""
    existing = sessions.get(args.agent_id) if args.agent_id else None
    kind = KINDS.get(args.subagent_type)
    if (
        existing is None
        or kind is None
        or not kind.stateful
        or existing.subagent_type != args.subagent_type
        or existing.parent_agent_id != caller
    ):
        return ""
    return existing.agent_id


async def _kind_for(args: TaskArgs, resume: str, ctx: CallContext) -> SubagentKind:
    """The type a Task runs as: a resumed subagent keeps the one it was started with."""
    if resume:
        earlier = ctx.daemon.service(Conversations).kind_of(resume)
        if earlier is not None:
            return earlier
        started = ctx.daemon.service(SubagentSessions).get(resume)
        if started is not None:
            custom = started.subagent_type == SubagentType.SUBAGENT_TYPE_CUSTOM
            name = args.custom_subagent_name if custom else ""
            return await asyncio.to_thread(kind_of, ctx.daemon, started.subagent_type, name)
    # A custom type's definition is a file: read off the event loop.
    return await asyncio.to_thread(
        kind_of, ctx.daemon, args.subagent_type, args.custom_subagent_name
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
