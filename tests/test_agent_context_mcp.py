"""ListMcpTools and WatchAgentContext against real MCP servers (tests/mcp_servers/demo_server.py
over stdio and streamable HTTP), servers that fail to start, one that never answers, one that
wants authorization, and an mcp.json edited while a watch listens."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.v1.context_pb2 import (
    AgentContextChange,
    ListMcpToolsRequest,
    ListMcpToolsResponse,
    McpServerInfo,
    McpServerState,
    WatchAgentContextRequest,
)
from exec_daemon.client import ExecDaemonClient
from exec_daemon.registry import SPECS
from tests.guards_support import call, result_of
from tests.inprocess import InProcessDaemon, serve_in_process
from tests.polling import POLL_SECONDS, generous
from tests.test_agent_context import home
from tests.test_mcp import http_server_port, stdio_server
from tools import mcp_catalog

# Fixtures: the module-scoped demo server over HTTP; a temp HOME for the daemon.
__all__ = ["home", "http_server_port"]


@contextlib.asynccontextmanager
async def refusing_server() -> AsyncIterator[int]:
    """A loopback HTTP server answering 401 to everything (an MCP server wanting a token)."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(
                b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def write_mcp_json(space: Path, servers: dict[str, Any]) -> None:
    path = space / ".cursor" / "mcp.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))


async def list_tools(client: ExecDaemonClient) -> ListMcpToolsResponse:
    return await client.control.list_mcp_tools(ListMcpToolsRequest(), headers=client.headers)


def servers_of(response: ListMcpToolsResponse) -> dict[str, McpServerInfo]:
    return {server.name: server for server in response.servers}


async def settled_tools(
    client: ExecDaemonClient, *, still_starting: frozenset[str] = frozenset()
) -> ListMcpToolsResponse:
    """ListMcpTools asked again until no server but `still_starting` is starting: an answer
    waits a few seconds at most, and on a loaded machine a Python server may need more."""
    deadline = asyncio.get_running_loop().time() + generous(60)
    while True:
        response = await list_tools(client)
        starting = {
            server.name
            for server in response.servers
            if server.state == McpServerState.MCP_SERVER_STATE_STARTING
        }
        if starting <= still_starting:
            return response
        assert asyncio.get_running_loop().time() < deadline, response
        await asyncio.sleep(POLL_SECONDS)  # an answer from the cache comes at once


async def test_list_mcp_tools_reports_each_server(
    tmp_path: Path, home: Path, http_server_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_catalog, "ANSWER_WAIT_SECONDS", 2.0)
    space = tmp_path / "workspace"
    tools_file = tmp_path / "backend-tools.json"
    tools_file.write_text(
        json.dumps(
            [
                {
                    "name": "search_docs",
                    "description": "Search the docs",
                    "serverName": "docs",
                    "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
                }
            ]
        )
    )
    async with refusing_server() as refusing_port:
        write_mcp_json(
            space,
            {
                "local": stdio_server(),
                "web": {"url": f"http://127.0.0.1:{http_server_port}/mcp"},
                "crashes": {
                    "command": sys.executable,
                    "args": [
                        "-c",
                        "import sys; sys.stderr.write('no API key set\\n'); sys.exit(3)",
                    ],
                },
                "missing": {"command": str(tmp_path / "no-such-server")},
                "silent": {
                    "command": sys.executable,
                    "args": ["-c", "import time; time.sleep(60)"],
                    "startupTimeout": 20,
                },
                "locked": {"url": f"http://127.0.0.1:{refusing_port}/mcp"},
                "misconfigured": {"url": "ftp://example.invalid/"},
            },
        )
        async with (
            # The workspace's HTTP servers here are on loopback, which the operator allows.
            serve_in_process(
                {},
                workspace=space,
                http_mcp_tools_file=str(tools_file),
                fetch_allow_private=("127.0.0.0/8",),
            ) as served,
            served.client() as client,
        ):
            first = await list_tools(client)
            # Servers still starting after the wait are listed on a later call (from the cache
            # once their listing ends).
            response = await settled_tools(client, still_starting=frozenset({"silent"}))
            again = await list_tools(client)

    servers = servers_of(response)
    assert set(servers) == {
        "local", "web", "crashes", "missing", "silent", "locked", "misconfigured", "docs"
    }  # fmt: skip
    for name in ("local", "web"):
        server = servers[name]
        assert server.state == McpServerState.MCP_SERVER_STATE_CONNECTED, server.error
        tools = {tool.name: tool for tool in server.tools}
        assert {"echo", "add", "slow"} <= set(tools)
        assert tools["echo"].description == "Echo the text back."
        schema = json.loads(tools["add"].input_schema)
        assert schema["properties"]["a"]["type"] == "integer"
        assert sorted(schema["required"]) == ["a", "b"]
        assert server.resource_count == 2
    assert servers["local"].transport == "stdio" and servers["web"].transport == "http"
    assert servers["local"].source == str(space / ".cursor" / "mcp.json")

    crashes = servers["crashes"]
    assert crashes.state == McpServerState.MCP_SERVER_STATE_FAILED
    assert "exited during the MCP handshake" in crashes.error
    assert "no API key set" in crashes.error
    assert servers["missing"].state == McpServerState.MCP_SERVER_STATE_FAILED
    assert "command not found" in servers["missing"].error
    assert servers["misconfigured"].state == McpServerState.MCP_SERVER_STATE_FAILED
    assert "http:// or https://" in servers["misconfigured"].error
    assert servers["locked"].state == McpServerState.MCP_SERVER_STATE_NEEDS_AUTH
    assert "401" in servers["locked"].error

    # The server that never completes its handshake held no answer longer than the wait: had
    # the first answer waited for it, its startup timeout (20 s) would have made it failed.
    assert servers["silent"].state == McpServerState.MCP_SERVER_STATE_STARTING
    assert "not listed within 2 s" in servers["silent"].error
    assert servers_of(first)["silent"].state == McpServerState.MCP_SERVER_STATE_STARTING

    docs = servers["docs"]
    assert docs.state == McpServerState.MCP_SERVER_STATE_BACKEND
    assert [tool.name for tool in docs.tools] == ["search_docs"]
    assert json.loads(docs.tools[0].input_schema)["properties"]["q"]["type"] == "string"

    # The second answer comes from the cache: the same tools, the slow one still starting.
    assert servers_of(again)["local"].tools == servers["local"].tools
    assert servers_of(again)["silent"].state == McpServerState.MCP_SERVER_STATE_STARTING


async def next_change(stream: AsyncIterator[AgentContextChange]) -> AgentContextChange:
    return await asyncio.wait_for(anext(stream), 20)


async def watched(served: InProcessDaemon) -> AsyncIterator[AgentContextChange]:
    async with served.client() as client:
        async for change in client.control.watch_agent_context(
            WatchAgentContextRequest(), headers=client.headers
        ):
            yield change


async def test_editing_mcp_json_adds_a_server_and_the_watch_says_so(
    tmp_path: Path, home: Path
) -> None:
    space = tmp_path / "workspace"
    write_mcp_json(space, {"local": stdio_server()})
    async with serve_in_process({}, workspace=space) as served, served.client() as client:
        before = servers_of(await settled_tools(client))
        assert set(before) == {"local"}

        stream = watched(served)
        first = await next_change(stream)
        assert str(space.resolve()) in first.watching and not first.kinds

        write_mcp_json(space, {"local": stdio_server(), "added": stdio_server()})
        change = await next_change(stream)
        assert "mcp" in change.kinds
        assert list(change.mcp_servers_added) == ["added"]
        assert str(space / ".cursor" / "mcp.json") in change.paths

        after = servers_of(await settled_tools(client))
        assert set(after) == {"local", "added"}
        assert after["added"].state == McpServerState.MCP_SERVER_STATE_CONNECTED
        # The untouched server kept its listing (and its connection).
        assert after["local"].tools == before["local"].tools

        # Removing one server and reconfiguring the other: both said, the list follows.
        write_mcp_json(space, {"added": stdio_server(env={"DEMO_FLAVOUR": "2"})})
        change = await next_change(stream)
        assert list(change.mcp_servers_removed) == ["local"]
        assert list(change.mcp_servers_changed) == ["added"]
        after = servers_of(await settled_tools(client))
        assert set(after) == {"added"}
        assert after["added"].state == McpServerState.MCP_SERVER_STATE_CONNECTED

        # A rule edit is reported too, as a rules change.
        rules = space / ".cursor" / "rules"
        rules.mkdir(parents=True)
        (rules / "style.mdc").write_text("---\nalwaysApply: true\n---\nTabs.")
        # A file created at once in a new folder may come as the folder's creation only
        # (inotify watches the new folder after its event): either says "rules".
        change = await next_change(stream)
        assert list(change.kinds) == ["rules"] and not change.mcp_servers_added
        assert set(change.paths) <= {str(rules), str(rules / "style.mdc")}
        await stream.aclose()  # type: ignore[attr-defined]


@contextlib.asynccontextmanager
async def counting_server() -> AsyncIterator[tuple[int, list[int]]]:
    """A loopback port that counts the connections it gets (and answers none)."""
    hits: list[int] = []

    async def count(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hits.append(1)
        writer.close()

    server = await asyncio.start_server(count, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], hits
    finally:
        server.close()
        await server.wait_closed()


def marking_server(marker: Path) -> dict[str, Any]:
    """A stdio 'server' that only leaves `marker` behind: whether its command was run at all."""
    return {"command": sys.executable, "args": ["-c", f"open({str(marker)!r}, 'w').close()"]}


async def test_list_mcp_tools_starts_no_workspace_server_outside_run_everything(
    tmp_path: Path, home: Path
) -> None:
    """A server the workspace's mcp.json names (the repository's choice) is started by
    ListMcpTools only where a tool call could start it: run_everything, or a server
    mcpAllowlist allows. The operator's own --mcp-config server is listed in any mode."""
    space = tmp_path / "workspace"
    async with counting_server() as (port, hits):
        write_mcp_json(
            space,
            {
                "planted": marking_server(tmp_path / "planted-ran"),
                "allowed": marking_server(tmp_path / "allowed-ran"),
                "remote": {"url": f"http://127.0.0.1:{port}/mcp"},
            },
        )
        (home / ".cursor").mkdir()
        (home / ".cursor" / "permissions.json").write_text(
            json.dumps({"mcpAllowlist": ["allowed:*"]})
        )
        operator = json.dumps({"mcpServers": {"operator": stdio_server()}})
        async with (
            serve_in_process(
                {}, workspace=space, run_mode="allowlist", mcp_config=operator
            ) as served,
            served.client() as client,
        ):
            servers = servers_of(await settled_tools(client))
            assert servers["operator"].state == McpServerState.MCP_SERVER_STATE_CONNECTED
            for name in ("planted", "remote"):
                assert servers[name].state == McpServerState.MCP_SERVER_STATE_FAILED
                assert (
                    "run_everything" in servers[name].error
                    and "mcpAllowlist" in servers[name].error
                )
            # The allowlisted one was started (it exits at once: a failed listing).
            assert servers["allowed"].state != McpServerState.MCP_SERVER_STATE_CONNECTED
            assert (tmp_path / "allowed-ran").exists()
            assert not (tmp_path / "planted-ran").exists()
            assert not hits


async def test_workspace_http_servers_reach_public_addresses_only(
    tmp_path: Path, home: Path, http_server_port: int
) -> None:
    """An HTTP server of the workspace's mcp.json is connected to as fetch connects: not the
    daemon's own port, not loopback or link-local (cloud metadata) unless --fetch-allow-private
    allows the network. The operator's --mcp-config server on loopback still works."""
    space = tmp_path / "workspace"
    space.mkdir()
    operator = json.dumps(
        {"mcpServers": {"operator": {"url": f"http://127.0.0.1:{http_server_port}/mcp"}}}
    )
    async with counting_server() as (port, hits):
        async with (
            serve_in_process({}, workspace=space, mcp_config=operator) as served,
            served.client() as client,
        ):
            own = served.daemon.config.port
            write_mcp_json(
                space,
                {
                    "daemon": {"url": f"http://127.0.0.1:{own}/agent.v1.ControlService/Ping"},
                    "metadata": {"url": "http://169.254.169.254/latest/meta-data/"},
                    "loopback": {"url": f"http://localhost:{port}/mcp"},
                    "demo": {"url": f"http://127.0.0.1:{http_server_port}/mcp"},
                },
            )
            servers = servers_of(await settled_tools(client))
            assert servers["operator"].state == McpServerState.MCP_SERVER_STATE_CONNECTED
            assert "daemon's own port" in servers["daemon"].error
            for name in ("metadata", "loopback", "demo"):
                assert servers[name].state == McpServerState.MCP_SERVER_STATE_FAILED, servers[name]
                assert "--fetch-allow-private" in servers[name].error, servers[name]
            assert not hits


@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
async def test_a_config_file_that_never_ends_is_refused_not_read(
    tmp_path: Path, home: Path, kind: str
) -> None:
    """A repository can commit `.cursor/mcp.json` (permissions.json, .cursorignore) as a symlink to
    /dev/zero, or the agent's shell can make it a FIFO: the daemon reads only regular files,
    bounded, so ListMcpTools answers (with the problem) instead of hanging or filling memory."""
    space = tmp_path / "workspace"
    (space / ".cursor").mkdir(parents=True)
    read_spec = next(spec for spec in SPECS if spec.variant == "read_tool_call")
    (space / "notes.txt").write_text("readable\n")
    for path in (
        space / ".cursor" / "mcp.json",
        space / ".cursor" / "permissions.json",
        space / ".cursorignore",
    ):
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero")
    async with (
        serve_in_process(
            {"read_tool_call": read_spec.handler}, workspace=space, run_mode="allowlist"
        ) as served,
        served.client() as client,
    ):
        async with asyncio.timeout(20):
            response = await list_tools(client)
        assert not response.servers
        assert any("mcp.json" in problem for problem in response.problems), response
        # The read tools consult .cursorignore (and permissions.json) on every call.
        async with asyncio.timeout(20):
            read = result_of(
                await client.run(call("read_tool_call", path=str(space / "notes.txt")))
            )
        assert read.success.ranges[0].contents == "readable", read
