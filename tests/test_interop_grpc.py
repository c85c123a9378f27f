"""gRPC clients against the real daemon: grpcio (grpc.aio generic calls, no generated stubs) over
h2c, and gRPC-Web over plain HTTP/1.1 with the framing done by hand."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest

from agent.v1.control_pb2 import ExecRequest, PingRequest, PingResponse
from agent.v1.exec_pb2 import (
    ExecClientControlMessage,
    ExecClientMessage,
    ExecServerMessage,
    ExecStreamElement,
    StreamClose,
)
from agent.v1.tool_call_pb2 import ToolCall
from tests.daemon_process import RunningDaemon
from tests.interop import (
    END_FRAME_FLAG,
    RawResponse,
    daemon_for_module,
    frame,
    grpc_web_trailers,
    http1_post,
    read_todos,
    unframe,
    update_todos,
)

PING = "/agent.v1.ControlService/Ping"
EXEC = "/agent.v1.ControlService/Exec"
EXEC_STREAM = "/agent.v1.ExecService/ExecStream"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with daemon_for_module(tmp_path_factory) as running:
        yield running


@pytest.fixture
async def channel(daemon: RunningDaemon) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{daemon.port}") as opened:
        yield opened


def auth(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def ping_method(channel: grpc.aio.Channel) -> grpc.aio.UnaryUnaryMultiCallable:
    return channel.unary_unary(
        PING,
        request_serializer=PingRequest.SerializeToString,
        response_deserializer=PingResponse.FromString,
    )


def exec_stream_method(channel: grpc.aio.Channel) -> grpc.aio.StreamStreamMultiCallable:
    return channel.stream_stream(
        EXEC_STREAM,
        request_serializer=ExecStreamElement.SerializeToString,
        response_deserializer=ExecServerMessage.FromString,
    )


def start(call_id: int, tool_call: ToolCall, agent_id: str) -> ExecStreamElement:
    return ExecStreamElement(
        exec_client_message=ExecClientMessage(id=call_id, tool_call=tool_call, agent_id=agent_id)
    )


CLOSE = ExecStreamElement(
    exec_client_control_message=ExecClientControlMessage(stream_close=StreamClose())
)


async def test_ping(channel: grpc.aio.Channel, daemon: RunningDaemon) -> None:
    pong = await ping_method(channel)(PingRequest(), metadata=auth(daemon.token), timeout=10)
    assert pong.version
    assert pong.pid == daemon.process.pid


async def test_wrong_token_is_unauthenticated(channel: grpc.aio.Channel) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await ping_method(channel)(PingRequest(), metadata=auth("wrong"), timeout=10)
    assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED


@pytest.mark.parametrize(
    "path",
    [
        "/agent.v1.ControlService/NoSuchMethod",
        "/no.such.Service/Method",
    ],
)
async def test_unknown_method_is_unimplemented(
    channel: grpc.aio.Channel, daemon: RunningDaemon, path: str
) -> None:
    nope = channel.unary_unary(
        path,
        request_serializer=PingRequest.SerializeToString,
        response_deserializer=PingResponse.FromString,
    )
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await nope(PingRequest(), metadata=auth(daemon.token), timeout=10)
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_server_streaming_exec(channel: grpc.aio.Channel, daemon: RunningDaemon) -> None:
    exec_method = channel.unary_stream(
        EXEC,
        request_serializer=ExecRequest.SerializeToString,
        response_deserializer=ExecServerMessage.FromString,
    )
    call = exec_method(
        ExecRequest(tool_call=read_todos(), agent_id="grpc-exec"),
        metadata=auth(daemon.token),
        timeout=10,
    )
    messages = [message async for message in call]
    assert [m.WhichOneof("message") for m in messages] == ["tool_call_result"]
    assert await call.code() == grpc.StatusCode.OK


async def run_one_stream(
    channel: grpc.aio.Channel, token: str, agent_id: str, calls: int
) -> dict[int, ExecServerMessage]:
    """One bidi stream: writes its todos, then `calls` read_todos at once; answers by id."""
    stream = exec_stream_method(channel)(metadata=auth(token), timeout=20)
    await stream.write(start(1, update_todos(agent_id), agent_id))
    for call_id in range(2, calls + 2):
        await stream.write(start(call_id, read_todos(), agent_id))
    answers: dict[int, ExecServerMessage] = {}
    while len(answers) < calls + 1:
        message = await stream.read()
        assert message is not grpc.aio.EOF, f"stream ended after {len(answers)} answers"
        assert message.WhichOneof("message") in ("tool_call_result", "heartbeat"), message
        if message.WhichOneof("message") == "tool_call_result":
            assert message.id not in answers
            answers[message.id] = message
    await stream.write(CLOSE)
    await stream.done_writing()
    assert await stream.read() is grpc.aio.EOF
    assert await stream.code() == grpc.StatusCode.OK
    return answers


async def test_concurrent_bidi_exec_streams_on_one_connection(
    channel: grpc.aio.Channel, daemon: RunningDaemon
) -> None:
    agents = [f"grpc-stream-{n}" for n in range(8)]
    results = await asyncio.wait_for(
        asyncio.gather(*(run_one_stream(channel, daemon.token, agent, 10) for agent in agents)),
        30,
    )
    for agent, answers in zip(agents, results, strict=True):
        assert sorted(answers) == list(range(1, 12))
        for call_id in range(2, 12):
            todos = answers[call_id].tool_call_result.read_todos_tool_call.result.success.todos
            # Each stream sees its own conversation's todo list, never another stream's.
            assert [t.id for t in todos] == [agent]


async def test_bidi_unset_tool_gets_an_exec_error_and_the_stream_lives_on(
    channel: grpc.aio.Channel, daemon: RunningDaemon
) -> None:
    stream = exec_stream_method(channel)(metadata=auth(daemon.token), timeout=10)
    await stream.write(start(1, ToolCall(), "grpc-unset"))
    error = await stream.read()
    await stream.write(start(2, read_todos(), "grpc-unset"))
    answer = await stream.read()
    await stream.write(CLOSE)
    await stream.done_writing()
    assert error.id == 1 and error.error.code == "invalid_argument"
    assert answer.id == 2 and answer.WhichOneof("message") == "tool_call_result"
    assert await stream.code() == grpc.StatusCode.OK


def grpc_web_call(
    daemon: RunningDaemon, path: str, request: bytes, token: str | None = None
) -> RawResponse:
    response = http1_post(
        daemon, path, frame(request), "application/grpc-web+proto", token=token,
        headers={"x-grpc-web": "1"},
    )  # fmt: skip
    assert response.status == 200
    assert response.headers["content-type"].startswith("application/grpc-web")
    return response


def test_grpc_web_unary_over_http1(daemon: RunningDaemon) -> None:
    response = grpc_web_call(daemon, PING, PingRequest().SerializeToString())
    (data_flags, data), (trailer_flags, trailers) = unframe(response.body)
    assert data_flags == 0
    assert PingResponse.FromString(data).pid == daemon.process.pid
    assert trailer_flags & END_FRAME_FLAG
    assert grpc_web_trailers(trailers)["grpc-status"] == "0"


def test_grpc_web_server_streaming_over_http1(daemon: RunningDaemon) -> None:
    request = ExecRequest(tool_call=update_todos("w"), agent_id="grpc-web")
    response = grpc_web_call(daemon, EXEC, request.SerializeToString())
    *messages, (trailer_flags, trailers) = unframe(response.body)
    assert trailer_flags & END_FRAME_FLAG
    assert grpc_web_trailers(trailers)["grpc-status"] == "0"
    (answer,) = [ExecServerMessage.FromString(payload) for _, payload in messages]
    todos = answer.tool_call_result.update_todos_tool_call.result.success.todos
    assert [t.id for t in todos] == ["w"]


def test_grpc_web_wrong_token_is_unauthenticated(daemon: RunningDaemon) -> None:
    response = grpc_web_call(daemon, PING, PingRequest().SerializeToString(), token="wrong")
    # A trailers-only answer (status in the headers), or trailers in the body: both are valid.
    status = response.headers.get("grpc-status")
    if status is None:
        ((_flags, trailers),) = unframe(response.body)
        status = grpc_web_trailers(trailers)["grpc-status"]
    assert status == str(grpc.StatusCode.UNAUTHENTICATED.value[0])
