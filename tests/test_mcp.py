"""tools/mcp.py on the real daemon, against real MCP servers (tests/mcp_servers/demo_server.py).

One daemon serves the module, with several servers configured; each starts on first use.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.struct_pb2 import Struct

from agent.v1 import mcp_pb2 as mcp
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import STARTUP_SECONDS, RunningDaemon, free_port, running_daemon

REPO = Path(__file__).resolve().parent.parent
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SERVER_MODULE = "tests.mcp_servers.demo_server"


def stdio_server(*extra: str, **entry: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", SERVER_MODULE, *extra],
        "env": {"PYTHONPATH": str(REPO), **entry.pop("env", {})},
        **entry,
    }


def wait_for_port(
    port: int, process: subprocess.Popen[bytes], seconds: float = STARTUP_SECONDS
) -> None:
    import socket

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server did not listen within {seconds} s")


@pytest.fixture(scope="module")
def http_server_port() -> Iterator[int]:
    """The demo server over streamable HTTP on 127.0.0.1."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", SERVER_MODULE, "--http", str(port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield port
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def mcp_daemon(
    tmp_path_factory: pytest.TempPathFactory, http_server_port: int
) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("mcp")
    workspace, home = root / "workspace", root / "home"
    (workspace / ".cursor").mkdir(parents=True)
    (home / ".cursor").mkdir(parents=True)
    # Lowest precedence: ~/.cursor/mcp.json; its "demo" is replaced by --mcp-config's.
    (home / ".cursor" / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "demo": {"command": "/nonexistent/should-be-overridden"},
                    "homeserver": stdio_server(env={"WHERE": "home"}),
                }
            }
        )
    )
    (workspace / ".cursor" / "mcp.json").write_text(
        json.dumps(
            {"mcpServers": {"fromfile": stdio_server(env={"GREETING": "${env:TEST_GREETING}!"})}}
        )
    )
    backend_tools = root / "http-tools.json"
    backend_tools.write_text(
        json.dumps([{"name": "search_issues", "serverName": "linear", "description": "d"}])
    )
    config = {
        "mcpServers": {
            "demo": stdio_server(timeout=5),
            "crashy": stdio_server(),
            "missing": {"command": "/nonexistent/mcp-server"},
            "broken": stdio_server("--exit-at-start", "bad config: no API key"),
            "silent": {"command": "sleep", "args": ["60"], "startupTimeout": 1},
            "web": {
                "url": f"http://127.0.0.1:{http_server_port}/mcp",
                "headers": {"X-Test": "1"},
            },
            "closed": {"url": f"http://127.0.0.1:{free_port()}/mcp"},
        }
    }
    with running_daemon(
        workspace,
        root / "state",
        "--mcp-config",
        json.dumps(config),
        "--http-mcp-tools-file",
        str(backend_tools),
        env={"HOME": str(home), "TEST_GREETING": "hello"},
    ) as daemon:
        yield daemon


@pytest.fixture
async def client(mcp_daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with mcp_daemon.client() as connected:
        yield connected


def struct(values: dict[str, Any]) -> Struct:
    message = Struct()
    message.update(values)
    return message


def mcp_call(name: str = "", arguments: dict[str, Any] | None = None, **fields: Any) -> ToolCall:
    args = mcp.McpArgs(name=name, args=struct(arguments or {}), **fields)
    return ToolCall(mcp_tool_call=mcp.McpToolCall(args=args))


async def run_mcp(client: ExecDaemonClient, *args: Any, **fields: Any) -> mcp.McpResult:
    outcome = await client.run(mcp_call(*args, **fields))
    assert outcome.error is None, outcome.error
    assert outcome.result is not None
    return outcome.result.mcp_tool_call.result


def texts(result: mcp.McpResult) -> list[str]:
    assert result.WhichOneof("result") == "success", result
    return [item.text for item in result.success.content if item.WhichOneof("content") == "text"]


async def test_tool_by_provider_and_tool_name_returns_text_and_structured_content(
    client: ExecDaemonClient,
) -> None:
    result = await run_mcp(
        client, provider_identifier="demo", tool_name="echo", arguments={"text": "héllo"}
    )
    assert texts(result) == ["héllo"]
    assert not result.success.is_error
    assert dict(result.success.structured_content) == {"result": "héllo"}


async def test_prefixed_name_finds_the_tool_and_integers_stay_integers(
    client: ExecDaemonClient,
) -> None:
    result = await run_mcp(client, "demo-add", {"a": 2, "b": 40})
    structured = result.success.structured_content
    assert structured["total"] == 42
    assert list(structured["terms"]) == [2, 40]


async def test_image_content_arrives_as_bytes(client: ExecDaemonClient) -> None:
    result = await run_mcp(client, "demo-pixel")
    [item] = result.success.content
    assert item.image.mime_type == "image/png"
    assert item.image.data.startswith(PNG_SIGNATURE)


async def test_tool_error_is_reported_with_its_message(client: ExecDaemonClient) -> None:
    result = await run_mcp(client, "demo-fail", {"reason": "disk on fire"})
    assert result.success.is_error
    assert texts(result) == ["Error executing tool fail: disk on fire"]


async def test_bad_arguments_answer_the_servers_validation_error(client: ExecDaemonClient) -> None:
    result = await run_mcp(client, "demo-add", {"a": "not a number"})
    assert result.success.is_error
    [text] = texts(result)
    assert text.startswith("Error executing tool add: 2 validation errors")
    lines = text.splitlines()
    # Each argument named on its own line, with what is wrong with it.
    assert lines[lines.index("a") + 1].startswith("  Input should be a valid integer")
    assert lines[lines.index("b") + 1].startswith("  Field required")


async def test_unknown_tool_lists_the_available_tools(client: ExecDaemonClient) -> None:
    result = await run_mcp(client, provider_identifier="demo", tool_name="nope")
    assert result.WhichOneof("result") == "tool_not_found"
    found = result.tool_not_found
    assert found.name == "nope"
    assert {"demo-echo", "demo-add", "demo-slow"} <= set(found.available_tools)
    # Backend-run tools are listed too; servers that cannot start are named in the reason.
    assert "linear-search_issues" in found.available_tools
    assert "missing" in found.reason


async def test_unknown_server_names_the_configured_ones(client: ExecDaemonClient) -> None:
    result = await run_mcp(client, provider_identifier="ghost", tool_name="echo")
    assert result.error.code == "unknown_server"
    assert "ghost" in result.error.message and "demo" in result.error.message


async def test_bare_tool_name_that_several_servers_have_is_ambiguous(
    client: ExecDaemonClient,
) -> None:
    result = await run_mcp(client, "cwd")
    assert result.error.code == "ambiguous_tool"
    assert "demo-cwd" in result.error.message


async def test_missing_command_is_a_typed_error(client: ExecDaemonClient) -> None:
    result = await run_mcp(client, provider_identifier="missing", tool_name="echo")
    assert result.error.code == "server_start_failed"
    assert "command not found: /nonexistent/mcp-server" in result.error.message


async def test_server_that_exits_at_start_reports_its_stderr(client: ExecDaemonClient) -> None:
    result = await run_mcp(client, provider_identifier="broken", tool_name="echo")
    assert result.error.code == "server_start_failed"
    assert "bad config: no API key" in result.error.message


async def test_server_that_never_answers_the_handshake_times_out(
    client: ExecDaemonClient,
) -> None:
    result = await run_mcp(client, provider_identifier="silent", tool_name="echo")
    assert result.error.code == "server_start_failed"
    # Ended by the 1 s startup timeout, not by the silent server's end 60 s later.
    assert "handshake within 1 s" in result.error.message


async def test_slow_tool_times_out_and_the_server_stays_usable(client: ExecDaemonClient) -> None:
    result = await run_mcp(client, "demo-slow", {"seconds": 30}, timeout_ms=500)
    assert result.error.code == "timeout"  # not the tool's answer 30 s later
    assert "0.5 s" in result.error.message
    assert texts(await run_mcp(client, "demo-echo", {"text": "still here"})) == ["still here"]


async def test_calls_to_one_server_run_concurrently(client: ExecDaemonClient) -> None:
    await run_mcp(client, "demo-echo", {"text": "warm"})
    started = time.monotonic()
    results = await asyncio.gather(
        *(run_mcp(client, "demo-slow", {"seconds": 3}) for _ in range(3))
    )
    assert all(texts(result) == ["slept 3.0"] for result in results)
    assert time.monotonic() - started < 6  # one after another: 9 s


async def test_abort_ends_a_running_tool_call_at_once(client: ExecDaemonClient) -> None:
    await run_mcp(client, "demo-echo", {"text": "warm"})
    async with client.exec_stream() as stream:
        call = await stream.start(mcp_call("demo-slow", {"seconds": 30}))
        await asyncio.sleep(0.3)
        await stream.abort(call.id)
        # Half the tool's 30 s: the abort ended it.
        outcome = await asyncio.wait_for(call.wait(), 15)
    assert outcome.result is not None
    assert outcome.result.mcp_tool_call.result.WhichOneof("result") == "aborted"
    assert texts(await run_mcp(client, "demo-echo", {"text": "after abort"})) == ["after abort"]


async def test_crash_mid_call_is_typed_and_the_server_restarts(client: ExecDaemonClient) -> None:
    first_pid = texts(await run_mcp(client, "crashy-pid"))[0]
    result = await run_mcp(client, "crashy-crash")
    assert result.error.code == "server_crashed"
    assert "crashy" in result.error.message
    second_pid = texts(await run_mcp(client, "crashy-pid"))[0]
    assert second_pid != first_pid


async def test_servers_run_in_the_workspace_with_the_configured_environment(
    client: ExecDaemonClient, mcp_daemon: RunningDaemon
) -> None:
    assert texts(await run_mcp(client, "fromfile-cwd")) == [str(mcp_daemon.workspace)]
    # ${env:NAME} is replaced from the daemon's environment.
    assert texts(await run_mcp(client, "fromfile-env", {"name": "GREETING"})) == ["hello!"]
    assert texts(await run_mcp(client, "homeserver-env", {"name": "WHERE"})) == ["home"]


async def test_backend_tools_answer_that_the_backend_runs_them(client: ExecDaemonClient) -> None:
    result = await run_mcp(client, "linear-search_issues", {"query": "x"})
    assert result.error.code == "backend_tool"
    assert "run by the backend" in result.error.message


async def test_streamable_http_server(client: ExecDaemonClient) -> None:
    result = await run_mcp(
        client, provider_identifier="web", tool_name="echo", arguments={"text": "over http"}
    )
    assert texts(result) == ["over http"]


async def test_unreachable_http_server_is_a_typed_error(client: ExecDaemonClient) -> None:
    result = await run_mcp(client, provider_identifier="closed", tool_name="echo")
    assert result.error.code == "server_unreachable"
    assert "unreachable" in result.error.message


def list_call(server: str = "") -> ToolCall:
    args = mcp.ListMcpResourcesArgs(server=server)
    return ToolCall(list_mcp_resources_tool_call=mcp.ListMcpResourcesToolCall(args=args))


def read_call(server: str, uri: str, download_path: str = "") -> ToolCall:
    args = mcp.ReadMcpResourceArgs(server=server, uri=uri, download_path=download_path)
    return ToolCall(read_mcp_resource_tool_call=mcp.ReadMcpResourceToolCall(args=args))


async def test_lists_resources_of_one_server(client: ExecDaemonClient) -> None:
    outcome = await client.run(list_call("demo"))
    assert outcome.result is not None
    result = outcome.result.list_mcp_resources_tool_call.result
    by_uri = {item.uri: item for item in result.success.resources}
    assert set(by_uri) == {"demo://readme", "demo://pixel.png"}
    assert by_uri["demo://readme"].server == "demo"
    assert by_uri["demo://readme"].mime_type == "text/plain"
    assert by_uri["demo://readme"].description == "A text file."


async def test_lists_resources_of_every_server_and_names_the_failed_ones(
    client: ExecDaemonClient,
) -> None:
    outcome = await client.run(list_call())
    assert outcome.result is not None
    result = outcome.result.list_mcp_resources_tool_call.result
    servers = {item.server for item in result.success.resources}
    assert {"demo", "web", "fromfile"} <= servers
    failed = {failure.server: failure.message for failure in result.success.failures}
    assert "command not found" in failed["missing"]


async def test_unknown_server_for_resources(client: ExecDaemonClient) -> None:
    outcome = await client.run(list_call("ghost"))
    assert outcome.result is not None
    assert outcome.result.list_mcp_resources_tool_call.result.error.code == "unknown_server"


async def test_reads_text_and_binary_resources(client: ExecDaemonClient) -> None:
    outcome = await client.run(read_call("demo", "demo://readme"))
    assert outcome.result is not None
    success = outcome.result.read_mcp_resource_tool_call.result.success
    assert success.text == "hello from the demo server\n"
    assert success.mime_type == "text/plain"
    outcome = await client.run(read_call("web", "demo://pixel.png"))
    assert outcome.result is not None
    success = outcome.result.read_mcp_resource_tool_call.result.success
    assert success.blob.startswith(PNG_SIGNATURE) and success.mime_type == "image/png"


async def test_download_path_writes_the_resource_instead(
    client: ExecDaemonClient, mcp_daemon: RunningDaemon
) -> None:
    outcome = await client.run(read_call("demo", "demo://pixel.png", "downloads/pixel.png"))
    assert outcome.result is not None
    success = outcome.result.read_mcp_resource_tool_call.result.success
    target = mcp_daemon.workspace / "downloads" / "pixel.png"
    assert success.download_path == str(target)
    assert not success.blob and success.size_bytes == target.stat().st_size
    assert target.read_bytes().startswith(PNG_SIGNATURE)


@pytest.mark.parametrize(
    ("download_path", "target"),
    [
        (".git/config", ".git/config"),
        ("sub/../.git/hooks/pre-commit", ".git/hooks/pre-commit"),
        ("gitlink/config", ".git/config"),  # a symlink to .git: checked where it points
        ("{workspace}/.cursor/hooks.json", ".cursor/hooks.json"),
        ("{workspace}/.claude/settings.json", ".claude/settings.json"),
    ],
)
async def test_download_path_to_a_protected_path_is_refused_before_the_server_is_asked(
    client: ExecDaemonClient, mcp_daemon: RunningDaemon, download_path: str, target: str
) -> None:
    workspace = mcp_daemon.workspace
    (workspace / ".git" / "hooks").mkdir(parents=True, exist_ok=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    if not (workspace / "gitlink").is_symlink():
        (workspace / "gitlink").symlink_to(".git")
    protected = workspace / target
    before = protected.read_bytes() if protected.exists() else None
    path = download_path.format(workspace=workspace)
    outcome = await client.run(read_call("demo", "demo://pixel.png", path))
    assert outcome.result is not None
    result = outcome.result.read_mcp_resource_tool_call.result
    assert result.WhichOneof("result") == "rejected", result
    assert result.rejected.source == "protected_path"
    assert "is a protected path" in result.rejected.reason
    after = protected.read_bytes() if protected.exists() else None
    assert after == before


async def test_unknown_resource_is_not_found(client: ExecDaemonClient) -> None:
    outcome = await client.run(read_call("demo", "demo://nope"))
    assert outcome.result is not None
    result = outcome.result.read_mcp_resource_tool_call.result
    assert result.WhichOneof("result") == "not_found"
    assert "demo://nope" in result.not_found.reason


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_daemon_shutdown_ends_the_server_processes(tmp_path: Path, sig: int) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    config = {"mcpServers": {"one": stdio_server(), "two": stdio_server()}}
    with running_daemon(
        workspace, tmp_path / "state", "--mcp-config", json.dumps(config)
    ) as daemon:
        async with daemon.client() as connected:
            pids = [
                int(texts(await run_mcp(connected, f"{name}-pid"))[0]) for name in ("one", "two")
            ]
        assert all(_alive(pid) for pid in pids)
        assert daemon.stop(sig) == 0
    deadline = time.monotonic() + 3
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in pids)
