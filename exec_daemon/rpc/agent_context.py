"""ControlService's agent-context RPCs: GetAgentContext, ListMcpTools, WatchAgentContext.

The readers are tools/agent_context.py (rules, AGENTS.md, CLAUDE.md, skills, subagents), the MCP
catalogue tools/mcp_catalog.py, the watch tools/agent_context_watch.py; the agent's mode is
exec_daemon/kernel/agents.py's and its reflections tools/agent_state.py's. This module turns
them into the messages of proto/agent/v1/context.proto.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable

from agent.v1.context_pb2 import (
    AgentContextChange,
    AgentReflection,
    AgentRule,
    AgentSkill,
    ContextDiagnostic,
    GetAgentContextRequest,
    GetAgentContextResponse,
    McpServerInfo,
    McpServerState,
    McpToolInfo,
    RuleKind,
    SubagentDefinition,
)
from exec_daemon.guards.permissions import mcp_server_may_start
from exec_daemon.guards.redaction import SecretMatcher, SecretStore, redact_message
from exec_daemon.kernel.agents import AgentModes
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.state import Daemon
from tools.agent_context import AgentContext, AgentContexts, AppliedRule
from tools.agent_context_watch import ContextChange, ContextWatcher
from tools.agent_state import AgentStates
from tools.mcp_config import ServerSpec, from_workspace

_KINDS = {
    "always": RuleKind.RULE_KIND_ALWAYS,
    "auto_attached": RuleKind.RULE_KIND_AUTO_ATTACHED,
    "agent_requested": RuleKind.RULE_KIND_AGENT_REQUESTED,
    "manual": RuleKind.RULE_KIND_MANUAL,
    "folder": RuleKind.RULE_KIND_FOLDER,
}
_STATES = {
    "connected": McpServerState.MCP_SERVER_STATE_CONNECTED,
    "failed": McpServerState.MCP_SERVER_STATE_FAILED,
    "needs_auth": McpServerState.MCP_SERVER_STATE_NEEDS_AUTH,
    "starting": McpServerState.MCP_SERVER_STATE_STARTING,
    "backend": McpServerState.MCP_SERVER_STATE_BACKEND,
}


async def get_agent_context(
    daemon: Daemon, request: GetAgentContextRequest
) -> GetAgentContextResponse:
    """Raises CodedError for a request it refuses (too many paths)."""
    found = await daemon.service(AgentContexts).context(request.paths, request.requested_rules)
    matcher = _secret_matcher(daemon)
    memo = found.memo.get("response")
    if memo is not None and memo[0] is matcher:
        cached = memo[1]
    else:
        cached = _context_response(found)
        if matcher is not None:
            await asyncio.to_thread(redact_message, cached, matcher)
        # Kept with the context while it is fresh, for as long as the secrets are the same.
        found.memo["response"] = (matcher, cached)
    if not request.agent_id:
        return cached  # type: ignore[no-any-return]
    response = GetAgentContextResponse()
    response.CopyFrom(cached)
    response.mode = daemon.service(AgentModes).mode(request.agent_id)
    for item in daemon.service(AgentStates).reflections(request.agent_id):
        reflection = AgentReflection(
            at_ms=item.at_ms,
            unexpected_action_outcomes=item.unexpected_action_outcomes,
            relevant_instructions=item.relevant_instructions,
            scenario_analysis=item.scenario_analysis,
            critical_synthesis=item.critical_synthesis,
            next_steps=item.next_steps,
        )
        if matcher is not None:
            redact_message(reflection, matcher)
        response.reflections.append(reflection)
    return response


def _secret_matcher(daemon: Daemon) -> SecretMatcher | None:
    """The injected secrets to mask (--secret-redaction-enabled): rule files, prompts and MCP
    descriptions are files and programs the agent can write, like ReadTextFile's."""
    if not daemon.config.secret_redaction_enabled:
        return None
    return daemon.service(SecretStore).matcher


def _context_response(found: AgentContext) -> GetAgentContextResponse:
    return GetAgentContextResponse(
        rules=[_rule(applied) for applied in found.rules],
        skills=[
            AgentSkill(
                name=skill.name,
                description=skill.description,
                path=skill.path,
                files=skill.files,
                origin=skill.origin,
            )
            for skill in found.skills
        ],
        subagents=[
            SubagentDefinition(
                name=agent.name,
                description=agent.description,
                model=agent.model,
                tools=agent.tools,
                readonly=agent.readonly,
                is_background=agent.is_background,
                path=agent.path,
                prompt=agent.prompt,
                origin=agent.origin,
            )
            for agent in found.subagents
        ],
        diagnostics=[
            ContextDiagnostic(path=item.path, message=item.message) for item in found.diagnostics
        ],
    )


def _rule(applied: AppliedRule) -> AgentRule:
    rule = applied.rule
    return AgentRule(
        path=rule.path,
        kind=_KINDS[rule.kind],
        description=rule.description,
        globs=rule.globs,
        content=applied.content,
        applies=applied.applies,
        format=rule.format,
        scope=rule.scope,
        matched_paths=applied.matched_paths,
        name=rule.name,
    )


def _unconsented(daemon: Daemon) -> Callable[[ServerSpec], str | None]:
    """Why ListMcpTools must not start a server: one the workspace's mcp.json names (the
    repository's, not the operator's choice) where no tool call could start it unapproved."""

    def refusal(spec: ServerSpec) -> str | None:
        if not from_workspace(spec, daemon.config) or mcp_server_may_start(daemon, spec.name):
            return None
        return (
            f"not started: it comes from {spec.source}, whose servers the daemon starts "
            "unasked only under --run-mode run_everything or when mcpAllowlist allows one of "
            "its tools; an approved tool call starts it"
        )

    return refusal


async def list_mcp_tools(daemon: Daemon) -> tuple[list[McpServerInfo], list[str]]:
    # The catalogue loads the mcp SDK (≈ 0.7 s of imports): only when first asked.
    from tools.mcp_catalog import McpCatalog

    reports, problems = await daemon.service(McpCatalog).servers(_unconsented(daemon))
    servers = [
        McpServerInfo(
            name=report.name,
            state=_STATES[report.state],
            error=report.error,
            tools=[
                McpToolInfo(
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.input_schema,
                    title=tool.title,
                )
                for tool in report.tools
            ],
            resource_count=report.resource_count,
            prompt_count=report.prompt_count,
            source=report.source,
            transport=report.transport,
        )
        for report in reports
    ]
    matcher = _secret_matcher(daemon)
    if matcher is not None:
        for server in servers:
            redact_message(server, matcher)
    return servers, problems


async def watch_agent_context(daemon: Daemon) -> AsyncGenerator[AgentContextChange, None]:
    """First the folders watched, then one message per (debounced) change, until the daemon
    stops or the client goes. Raises CodedError (unavailable) when the watch fails."""
    watcher = daemon.service(ContextWatcher)
    queue = await watcher.subscribe()
    stopping = asyncio.ensure_future(daemon.stopping.wait())
    try:
        yield AgentContextChange(watching=watcher.roots)
        while True:
            got = asyncio.ensure_future(queue.get())
            await asyncio.wait([got, stopping], return_when=asyncio.FIRST_COMPLETED)
            if not got.done():
                got.cancel()
                return
            change = got.result()
            if change is None:
                raise CodedError(ErrorCode.UNAVAILABLE, watcher.failure or "the watch ended")
            yield _change(change)
    finally:
        stopping.cancel()
        watcher.unsubscribe(queue)


def _change(change: ContextChange) -> AgentContextChange:
    return AgentContextChange(
        paths=change.paths,
        kinds=change.kinds,
        mcp_servers_added=change.mcp_added,
        mcp_servers_removed=change.mcp_removed,
        mcp_servers_changed=change.mcp_changed,
        sequence=change.sequence,
    )
