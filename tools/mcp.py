"""MCP tools: mcp_tool_call, list_mcp_resources_tool_call, read_mcp_resource_tool_call, mcp_auth.

The servers come from `--mcp-config`, `<workspace>/.cursor/mcp.json` and `~/.cursor/mcp.json`
(tools/mcp_config.py); the per-daemon service that starts and talks to them is
`tools.mcp_client.McpServers`; OAuth is tools/mcp_oauth.py. The `mcp` SDK costs ≈ 0.7 s of
imports, so it is loaded on the first MCP call, not when the daemon starts.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.v1.mcp_pb2 import (
    ListMcpResourcesArgs,
    ListMcpResourcesResult,
    McpArgs,
    McpAuthArgs,
    McpAuthResult,
    McpOAuthStoredData,
    McpResult,
    ReadMcpResourceArgs,
    ReadMcpResourceResult,
)
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.spec import Effect, HookEvents, Hooks, RunModeRule, Subject, ToolSpec
from exec_daemon.kernel.state import Daemon


async def mcp_call(args: McpArgs, ctx: CallContext) -> McpResult:
    from tools import mcp_client

    return await mcp_client.mcp_call(args, ctx)


MCP = ToolSpec(
    "mcp_tool_call",
    mcp_call,
    # An MCP tool can do anything its server can.
    effects=Effect.WORKSPACE | Effect.MACHINE,
    run_mode=RunModeRule.MCP_ALLOWLIST,
    hooks=Hooks("MCP", events=HookEvents.MCP),
    continues_trace=True,
    subject=lambda args: Subject(
        mcp_server=args.provider_identifier, mcp_tool=args.tool_name or args.name
    ),
)


async def list_mcp_resources(
    args: ListMcpResourcesArgs, ctx: CallContext
) -> ListMcpResourcesResult:
    from tools import mcp_client

    return await mcp_client.list_mcp_resources(args, ctx)


LIST_MCP_RESOURCES = ToolSpec(
    "list_mcp_resources_tool_call",
    list_mcp_resources,
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("ListMcpResources"),
    continues_trace=True,
    subject=lambda args: Subject(mcp_server=args.server),
)


async def read_mcp_resource(args: ReadMcpResourceArgs, ctx: CallContext) -> ReadMcpResourceResult:
    from tools import mcp_client

    return await mcp_client.read_mcp_resource(args, ctx)


def _resource_subject(args: ReadMcpResourceArgs) -> Subject:
    if not args.download_path:
        return Subject(mcp_server=args.server, effects=Effect.NONE)
    return Subject(mcp_server=args.server, paths_written=(args.download_path,))


READ_MCP_RESOURCE = ToolSpec(
    "read_mcp_resource_tool_call",
    read_mcp_resource,
    # With download_path it writes what the server sent to a file the agent names.
    effects=Effect.WORKSPACE | Effect.MACHINE,
    run_mode=RunModeRule.WRITES_NEED_APPROVAL,
    hooks=Hooks("FetchMcpResource"),
    continues_trace=True,
    subject=_resource_subject,
)


async def mcp_auth(args: McpAuthArgs, ctx: CallContext) -> McpAuthResult:
    from tools import mcp_client

    return await mcp_client.mcp_auth(args, ctx)


MCP_AUTH = ToolSpec(
    "mcp_auth_tool_call",
    mcp_auth,
    # It stores OAuth credentials for the server.
    effects=Effect.MACHINE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("McpAuth"),
    continues_trace=True,
    subject=lambda args: Subject(mcp_server=args.server),
)


def refresh_tokens(daemon: Daemon) -> Mapping[str, McpOAuthStoredData]:
    """For ControlService.GetMcpRefreshTokens: the OAuth data kept for each server."""
    from tools import mcp_client

    return mcp_client.refresh_tokens(daemon)
