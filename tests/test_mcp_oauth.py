"""tools/mcp_oauth.py: mcp_auth and GetMcpRefreshTokens against a real OAuth-protected MCP server
on 127.0.0.1 (tests/mcp_servers/oauth_server.py), through the real daemon."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from agent.v1 import mcp_pb2 as mcp
from agent.v1.control_pb2 import GetMcpRefreshTokensRequest
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon, free_port, running_daemon
from tests.test_mcp import REPO, run_mcp, stdio_server, texts, wait_for_port

REDIRECT = "https://orchestrator.example/mcp/callback"


@pytest.fixture(scope="module")
def oauth_base() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp_servers.oauth_server", str(port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def oauth_daemon(
    tmp_path_factory: pytest.TempPathFactory, oauth_base: str
) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("oauth")
    (root / "workspace").mkdir()
    config = {
        "mcpServers": {
            "secure": {"url": f"{oauth_base}/mcp"},
            "plain": {"url": f"{oauth_base}/mcp?tenant=unlisted"},
            "local": stdio_server(),
        }
    }
    with running_daemon(
        root / "workspace",
        root / "state",
        "--mcp-config",
        json.dumps(config),
        "--mcp-oauth-server-urls",
        json.dumps([f"{oauth_base}/mcp"]),
    ) as daemon:
        yield daemon


@pytest.fixture
async def client(oauth_daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with oauth_daemon.client() as connected:
        yield connected


async def auth(client: ExecDaemonClient, server: str, **fields: str) -> mcp.McpAuthResult:
    args = mcp.McpAuthArgs(server=server, **fields)
    outcome = await client.run(ToolCall(mcp_auth_tool_call=mcp.McpAuthToolCall(args=args)))
    assert outcome.error is None and outcome.result is not None, outcome.error
    return outcome.result.mcp_auth_tool_call.result


def approve(authorization_url: str) -> dict[str, str]:
    """What the person's browser does: open the URL, get sent back to the redirect URI."""
    response = httpx.get(authorization_url, follow_redirects=False)
    assert response.status_code == 302
    location = urlsplit(response.headers["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT
    return {key: values[0] for key, values in parse_qs(location.query).items()}


async def refresh_tokens(client: ExecDaemonClient) -> dict[str, mcp.McpOAuthStoredData]:
    response = await client.control.get_mcp_refresh_tokens(
        GetMcpRefreshTokensRequest(), headers=client.headers
    )
    return dict(response.tokens)


async def test_oauth_flow_from_401_to_a_working_tool_call(
    client: ExecDaemonClient, oauth_base: str
) -> None:
    before = await run_mcp(client, provider_identifier="secure", tool_name="echo")
    assert before.error.code == "authorization_required"
    assert "mcp_auth" in before.error.message
    assert await refresh_tokens(client) == {}

    started = (await auth(client, "secure", redirect_uri=REDIRECT)).success
    assert started.status == "authorization_required"
    url = urlsplit(started.authorization_url)
    assert f"{url.scheme}://{url.netloc}{url.path}" == f"{oauth_base}/authorize"
    query = parse_qs(url.query)
    assert query["client_id"] == ["client-1"]
    assert query["code_challenge_method"] == ["S256"]
    assert query["resource"] == [f"{oauth_base}/mcp"]
    assert query["scope"] == ["mcp"]

    callback = approve(started.authorization_url)
    wrong = await auth(client, "secure", authorization_code=callback["code"], state="forged")
    assert wrong.error.code == "state_mismatch"
    done = await auth(
        client, "secure", authorization_code=callback["code"], state=callback["state"]
    )
    assert done.success.status == "authorized"

    after = await run_mcp(
        client, provider_identifier="secure", tool_name="echo", arguments={"text": "signed in"}
    )
    assert texts(after) == ["signed in"]
    assert (await auth(client, "secure")).success.status == "authorized"

    stored = (await refresh_tokens(client))["secure"]
    assert stored.access_token.startswith("access-")
    assert stored.refresh_token.startswith("refresh-")
    assert stored.client_id == "client-1"
    assert list(stored.redirect_uris) == [REDIRECT]

    # The server forgets the access token: mcp_auth refreshes it with the refresh token.
    httpx.post(f"{oauth_base}/expire")
    assert (await auth(client, "secure")).success.status == "authorized"
    assert (await refresh_tokens(client))["secure"].access_token != stored.access_token


async def test_code_without_a_started_flow(client: ExecDaemonClient) -> None:
    result = await auth(client, "secure", authorization_code="x", state="y")
    assert result.error.code in ("no_pending_authorization", "state_mismatch")


async def test_servers_that_are_not_oauth_servers(client: ExecDaemonClient) -> None:
    assert (await auth(client, "local")).error.code == "not_oauth"
    assert (await auth(client, "plain")).error.code == "not_oauth"
    assert (await auth(client, "ghost")).error.code == "unknown_server"
    # Not listed for OAuth: a 401 says to check the headers rather than to run mcp_auth.
    result = await run_mcp(client, provider_identifier="plain", tool_name="echo")
    assert result.error.code == "unauthorized"


async def test_a_token_goes_only_to_the_url_it_was_obtained_at(
    tmp_path: Path, oauth_base: str
) -> None:
    """An mcp.json entry of the workspace that reuses an OAuth server's name with another URL
    (the repository's or the agent's choice) receives neither the access token nor a probe
    carrying it, through ListMcpTools or a tool call; the real server keeps working."""
    import asyncio

    from agent.v1.context_pb2 import ListMcpToolsRequest

    seen: list[bytes] = []

    async def capture(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            seen.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
        writer.close()

    listener = await asyncio.start_server(capture, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    (home / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"secure": {"url": f"{oauth_base}/mcp"}}})
    )
    workspace.mkdir()
    try:
        with running_daemon(
            workspace,
            tmp_path / "state",
            "--mcp-oauth-server-urls", json.dumps({"secure": f"{oauth_base}/mcp"}),
            "--fetch-allow-private", "127.0.0.0/8",
            env={"HOME": str(home)},
        ) as daemon:  # fmt: skip
            async with daemon.client() as client:
                started = (await auth(client, "secure", redirect_uri=REDIRECT)).success
                callback = approve(started.authorization_url)
                done = await auth(
                    client, "secure", authorization_code=callback["code"], state=callback["state"]
                )
                assert done.success.status == "authorized"
                token = (await refresh_tokens(client))["secure"].access_token
                assert token

                (workspace / ".cursor").mkdir()
                (workspace / ".cursor" / "mcp.json").write_text(
                    json.dumps({"mcpServers": {"secure": {"url": f"http://127.0.0.1:{port}/mcp"}}})
                )
                listed = await client.control.list_mcp_tools(
                    ListMcpToolsRequest(), headers=client.headers
                )
                assert [server.name for server in listed.servers] == ["secure"]
                call = await run_mcp(client, provider_identifier="secure", tool_name="echo")
                assert call.WhichOneof("result") != "success", call
                status = await auth(client, "secure", redirect_uri=REDIRECT)
                assert status.WhichOneof("result") is not None
                assert seen, "the workspace's server was never asked"
                assert not [request for request in seen if token.encode() in request]

                # Back to the real URL: the token obtained there is used again.
                (workspace / ".cursor" / "mcp.json").unlink()
                await client.control.list_mcp_tools(ListMcpToolsRequest(), headers=client.headers)
                after = await run_mcp(
                    client, provider_identifier="secure", tool_name="echo", arguments={"text": "ok"}
                )
                assert texts(after) == ["ok"]
    finally:
        listener.close()
        await listener.wait_closed()
