"""Connect clients against the real daemon: connect-python over h2c and HTTP/1.1, and a curl-level
user posting Connect JSON over plain HTTP/1.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from connectrpc.protocol import ProtocolType

from agent.v1.control_pb2 import UpdateEnvironmentVariablesRequest
from tests.daemon_process import RunningDaemon
from tests.interop import (
    CONNECT_END_STREAM_FLAG,
    daemon_for_module,
    frame,
    http1_post,
    read_todos,
    unframe,
    update_todos,
)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with daemon_for_module(tmp_path_factory) as running:
        yield running


HTTP_VERSIONS = [pytest.param(True, id="h2c"), pytest.param(False, id="http1.1")]


@pytest.mark.parametrize("http2", HTTP_VERSIONS)
async def test_ping(daemon: RunningDaemon, http2: bool) -> None:
    async with daemon.client(http2=http2) as client:
        pong = await client.ping()
    assert pong.version
    assert pong.pid == daemon.process.pid
    assert pong.workspace == str(daemon.workspace)


@pytest.mark.parametrize("http2", HTTP_VERSIONS)
async def test_update_environment_variables_merges_then_replaces(
    daemon: RunningDaemon, http2: bool
) -> None:
    async with daemon.client(http2=http2) as client:
        merged = await client.control.update_environment_variables(
            UpdateEnvironmentVariablesRequest(env={"INTEROP_A": "1"}), headers=client.headers
        )
        replaced = await client.control.update_environment_variables(
            UpdateEnvironmentVariablesRequest(env={"A": "1", "B": "2"}, replace=True),
            headers=client.headers,
        )
    assert merged.variable_count > 1  # the daemon's own environment plus INTEROP_A
    assert replaced.variable_count == 2


@pytest.mark.parametrize("http2", HTTP_VERSIONS)
async def test_server_streaming_exec_runs_a_tool(daemon: RunningDaemon, http2: bool) -> None:
    agent_id = f"exec-{http2}"  # the daemon is shared: one todo list per test
    async with daemon.client(http2=http2) as client:
        written = await client.run(update_todos("a", "b"), agent_id=agent_id)
        read = await client.run(read_todos(), agent_id=agent_id)
    assert written.error is None and written.result is not None
    assert read.result is not None
    todos = read.result.read_todos_tool_call.result.success.todos
    assert [todo.id for todo in todos] == ["a", "b"]


@pytest.mark.parametrize(
    "protocol", [ProtocolType.CONNECT, ProtocolType.GRPC, ProtocolType.GRPC_WEB]
)
async def test_bidi_exec_stream_over_h2c(daemon: RunningDaemon, protocol: ProtocolType) -> None:
    agent_id = f"bidi-{protocol.name}"
    async with (
        daemon.client(protocol=protocol) as client,
        client.exec_stream() as stream,
    ):
        written = await (await stream.start(update_todos("x"), agent_id=agent_id)).wait()
        calls = [await stream.start(read_todos(), agent_id=agent_id) for _ in range(5)]
        outcomes = await asyncio.wait_for(asyncio.gather(*(c.wait() for c in calls)), 10)
    assert written.result is not None
    for outcome in outcomes:
        assert outcome.error is None
        assert outcome.result is not None
        assert [t.id for t in outcome.result.read_todos_tool_call.result.success.todos] == ["x"]
    assert not stream.unmatched
    assert stream.error is None


def test_connect_json_unary_over_plain_http1(daemon: RunningDaemon) -> None:
    """What `curl -H 'content-type: application/json' -d '{}'` does."""
    response = http1_post(daemon, "/agent.v1.ControlService/Ping", b"{}", "application/json")
    assert response.status == 200
    assert response.headers["content-type"] == "application/json"
    pong = json.loads(response.body)
    assert pong["version"]
    assert pong["workspace"] == str(daemon.workspace)
    assert int(pong["uptimeMs"]) >= 0  # canonical JSON: lowerCamelCase, uint64 as a string

    replaced = http1_post(
        daemon,
        "/agent.v1.ControlService/UpdateEnvironmentVariables",
        json.dumps({"env": {"ONLY": "1"}, "replace": True}).encode(),
        "application/json",
    )
    assert replaced.status == 200
    assert json.loads(replaced.body) == {"variableCount": 1}


def test_connect_json_server_streaming_over_plain_http1(daemon: RunningDaemon) -> None:
    request = {"toolCall": {"readTodosToolCall": {"args": {}}}, "agentId": "curl"}
    response = http1_post(
        daemon,
        "/agent.v1.ControlService/Exec",
        frame(json.dumps(request).encode()),
        "application/connect+json",
    )
    assert response.status == 200
    frames = unframe(response.body)
    *messages, (end_flags, end_payload) = frames
    assert end_flags & CONNECT_END_STREAM_FLAG
    assert json.loads(end_payload) == {}  # no error
    assert [json.loads(payload) for _, payload in messages] == [
        {"toolCallResult": {"readTodosToolCall": {"args": {}, "result": {"success": {}}}}}
    ]


def test_connect_json_error_is_a_clean_connect_error(daemon: RunningDaemon) -> None:
    response = http1_post(
        daemon,
        "/agent.v1.ControlService/UpdateEnvironmentVariables",
        b'{"env": "not a map"}',
        "application/json",
    )
    assert response.status == 400
    error = json.loads(response.body)
    assert error["code"] == "invalid_argument"
