"""Bad input from clients: each gets its proper code, and the daemon keeps serving everyone else.

Wrong or missing tokens, garbage bytes on the socket, a truncated length-prefixed frame, and a
message over `--max-message-bytes`, across Connect (HTTP/1.1 and h2c), gRPC and gRPC-Web.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import time
from collections.abc import Iterator

import h2.config
import h2.connection
import h2.errors
import h2.events
import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from agent.v1.control_pb2 import PingRequest, UpdateEnvironmentVariablesRequest
from agent.v1.todos_pb2 import TodoItem
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon
from tests.interop import (
    CONNECT_END_STREAM_FLAG,
    END_FRAME_FLAG,
    H2Response,
    assert_still_serving,
    daemon_for_module,
    frame,
    grpc_web_trailers,
    h2_request,
    http1_post,
    read_todos,
    unframe,
    update_todos,
)

MAX_MESSAGE_BYTES = 1024
GRPC_INVALID_ARGUMENT = "3"
GRPC_RESOURCE_EXHAUSTED = "8"
GRPC_UNAUTHENTICATED = "16"
PING = "/agent.v1.ControlService/Ping"
EXEC = "/agent.v1.ControlService/Exec"
EXEC_STREAM = "/agent.v1.ExecService/ExecStream"
# A frame whose length prefix promises 100 bytes, followed by only 10, then end of stream.
TRUNCATED_FRAME = struct.pack(">BI", 0, 100) + b"\x0a" * 10


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with daemon_for_module(tmp_path_factory) as running:
        yield running


@pytest.fixture(scope="module")
def small_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    """A daemon that accepts messages of at most MAX_MESSAGE_BYTES."""
    with daemon_for_module(
        tmp_path_factory, "--max-message-bytes", str(MAX_MESSAGE_BYTES)
    ) as running:
        yield running


def grpc_headers(token: str | None) -> dict[str, str]:
    headers = {"content-type": "application/grpc", "te": "trailers"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return headers


def grpc_status(response: H2Response) -> str:
    """The status of a gRPC response, from its trailers or (trailers-only) its headers."""
    return response.trailers.get("grpc-status") or response.headers["grpc-status"]


def connect_end_error(body: bytes) -> dict[str, str]:
    """The error of a Connect streaming response, from its end-of-stream frame."""
    flags, payload = unframe(body)[-1]
    assert flags & CONNECT_END_STREAM_FLAG
    error: dict[str, str] = json.loads(payload)["error"]
    return error


# --- wrong or missing token -------------------------------------------------------------------


@pytest.mark.parametrize("http2", [True, False], ids=["h2c", "http1.1"])
@pytest.mark.parametrize("authorization", ["wrong", "missing", "no-scheme", "basic", "prefix"])
async def test_bad_token_is_unauthenticated(
    daemon: RunningDaemon, http2: bool, authorization: str
) -> None:
    headers = {
        "wrong": {"authorization": "Bearer wrong"},
        "missing": {},
        "no-scheme": {"authorization": daemon.token},
        "basic": {"authorization": f"Basic {daemon.token}"},
        "prefix": {"authorization": f"Bearer {daemon.token[:-1]}"},
    }[authorization]
    # A client made without a token adds none: the headers below are all the call carries.
    async with ExecDaemonClient(daemon.url, "", http2=http2) as client:
        with pytest.raises(ConnectError) as raised:
            await client.control.ping(PingRequest(), headers=headers)
        assert raised.value.code == Code.UNAUTHENTICATED
        client.headers = headers
        with pytest.raises(ConnectError) as raised:
            await client.run(read_todos())
        assert raised.value.code == Code.UNAUTHENTICATED
    await assert_still_serving(daemon)


async def test_bearer_scheme_is_case_insensitive(daemon: RunningDaemon) -> None:
    async with daemon.client() as client:
        pong = await client.control.ping(
            PingRequest(), headers={"authorization": f"bearer {daemon.token}"}
        )
    assert pong.version


async def test_bidi_stream_with_wrong_token_is_unauthenticated(daemon: RunningDaemon) -> None:
    async with (
        ExecDaemonClient(daemon.url, "wrong") as client,
        client.exec_stream() as stream,
    ):
        await stream.start(read_todos())
        await asyncio.wait_for(stream.ended.wait(), 10)
    assert isinstance(stream.error, ConnectError)
    assert stream.error.code == Code.UNAUTHENTICATED
    await assert_still_serving(daemon)


def test_connect_json_without_token_is_401_unauthenticated(daemon: RunningDaemon) -> None:
    response = http1_post(daemon, PING, b"{}", "application/json", token="")
    assert response.status == 401
    assert json.loads(response.body)["code"] == "unauthenticated"


@pytest.mark.parametrize("path", [PING, EXEC_STREAM])
def test_grpc_refusal_comes_before_the_body_is_read(daemon: RunningDaemon, path: str) -> None:
    """The request stays open with no body at all: the refusal must not wait for one."""
    # No body ever comes: a refusal that waited for one would never be answered.
    response = h2_request(daemon, path, grpc_headers("wrong"), None, timeout=15)
    assert grpc_status(response) == GRPC_UNAUTHENTICATED


def test_grpc_web_wrong_token_over_http1_is_unauthenticated(daemon: RunningDaemon) -> None:
    response = http1_post(
        daemon, PING, frame(PingRequest().SerializeToString()), "application/grpc-web+proto",
        token="wrong",
    )  # fmt: skip
    assert response.status == 200
    assert response.headers["grpc-status"] == GRPC_UNAUTHENTICATED


# --- garbage on the socket --------------------------------------------------------------------


def send_raw(daemon: RunningDaemon, data: bytes, timeout: float = 5.0) -> bytes:
    """Writes raw bytes on a fresh connection and reads until the daemon closes it."""
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
        else:
            raise AssertionError(f"the daemon kept the connection open after {data[:40]!r}")
        return received


GARBAGE = {
    "random-bytes": os.urandom(256) + b"\r\n\r\n",
    "tls-client-hello": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64),
    "bad-content-length": (
        b"POST /agent.v1.ControlService/Ping HTTP/1.1\r\nhost: x\r\ncontent-length: zz\r\n\r\n"
    ),
}


# The HTTP/2 client preface, then a SETTINGS frame of 5 bytes (not a multiple of 6: a frame size
# error that must end the connection).
H2_GARBAGE = (
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x05\x04\x00\x00\x00\x00\x00" + b"\x01" * 5
)


@pytest.mark.parametrize("garbage", list(GARBAGE), ids=list(GARBAGE))
def test_garbage_bytes_get_http_400_and_a_closed_connection(
    daemon: RunningDaemon, garbage: str
) -> None:
    answer = send_raw(daemon, GARBAGE[garbage])
    assert answer.startswith(b"HTTP/1.1 400 ")


def test_garbage_after_the_http2_preface_gets_goaway_frame_size_error(
    daemon: RunningDaemon,
) -> None:
    answer = send_raw(daemon, H2_GARBAGE)
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    client.initiate_connection()
    (goaway,) = [
        event
        for event in client.receive_data(answer)
        if isinstance(event, h2.events.ConnectionTerminated)
    ]
    assert goaway.error_code == h2.errors.ErrorCodes.FRAME_SIZE_ERROR


async def test_garbage_leaves_other_connections_and_their_streams_alone(
    daemon: RunningDaemon,
) -> None:
    async with daemon.client() as client, client.exec_stream() as stream:
        first = await (await stream.start(update_todos("kept"), agent_id="garbage")).wait()
        for data in GARBAGE.values():
            await asyncio.to_thread(send_raw, daemon, data)
        await asyncio.to_thread(send_raw, daemon, H2_GARBAGE)
        after = await asyncio.wait_for(
            (await stream.start(read_todos(), agent_id="garbage")).wait(), 10
        )
    assert first.result is not None
    assert after.result is not None
    assert [t.id for t in after.result.read_todos_tool_call.result.success.todos] == ["kept"]
    await assert_still_serving(daemon)


@pytest.mark.parametrize(
    ("path", "content_type"),
    [(PING, "application/proto"), (PING, "application/json")],
)
def test_connect_body_that_does_not_decode_is_invalid_argument(
    daemon: RunningDaemon, path: str, content_type: str
) -> None:
    response = http1_post(daemon, path, b"\xff\xff\xff{garbage", content_type)
    assert response.status == 400
    assert json.loads(response.body)["code"] == "invalid_argument"


def test_grpc_message_that_does_not_decode_is_invalid_argument(daemon: RunningDaemon) -> None:
    response = h2_request(daemon, PING, grpc_headers(daemon.token), frame(b"\xff\xff\xff\xff"))
    assert grpc_status(response) == GRPC_INVALID_ARGUMENT


def exec_stream_json(call_id: object) -> bytes:
    element = {"execClientMessage": {"id": call_id, "toolCall": {"readTodosToolCall": {}}}}
    return frame(json.dumps(element).encode())


@pytest.mark.parametrize("call_id", [-1, 2**32, 1.5, True, "abc", "-3"])
def test_an_exec_stream_call_id_that_is_no_uint32_is_invalid_argument(
    daemon: RunningDaemon, call_id: object
) -> None:
    response = http1_post(
        daemon, EXEC_STREAM, exec_stream_json(call_id), "application/connect+json"
    )
    assert response.status == 200
    assert connect_end_error(response.body)["code"] == "invalid_argument", response.body


@pytest.mark.parametrize("call_id", [7, "7", 2**32 - 1])
def test_an_exec_stream_call_id_in_range_is_answered(
    daemon: RunningDaemon, call_id: object
) -> None:
    response = http1_post(
        daemon, EXEC_STREAM, exec_stream_json(call_id), "application/connect+json"
    )
    messages = [json.loads(payload) for flags, payload in unframe(response.body) if not flags]
    assert any(m.get("id") == int(call_id) and "toolCallResult" in m for m in messages), messages


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/xml", "application/connect+xml", ""]
)
@pytest.mark.parametrize("path", [PING, EXEC_STREAM])
def test_an_unsupported_content_type_is_415_with_a_connect_error(
    daemon: RunningDaemon, path: str, content_type: str
) -> None:
    response = http1_post(daemon, path, b"{}", content_type)
    assert response.status == 415
    assert response.headers["content-type"] == "application/json"
    error = json.loads(response.body)
    assert error["code"] == "invalid_argument"
    assert "application/connect+json" in error["message"], error
    assert repr(content_type) in error["message"] if content_type else "without" in error["message"]
    # Positive control: the same request in a content type spoken here is answered.
    assert http1_post(daemon, PING, b"{}", "application/json").status == 200


def test_an_unsupported_content_type_over_h2_is_415_with_a_connect_error(
    daemon: RunningDaemon,
) -> None:
    headers = {"content-type": "text/plain", "authorization": f"Bearer {daemon.token}"}
    response = h2_request(daemon, PING, headers, b"{}")
    assert response.headers[":status"] == "415"
    assert json.loads(response.body)["code"] == "invalid_argument"


# --- a truncated frame ------------------------------------------------------------------------


@pytest.mark.parametrize("path", [PING, EXEC, EXEC_STREAM])
async def test_truncated_grpc_frame_is_invalid_argument(daemon: RunningDaemon, path: str) -> None:
    response = h2_request(daemon, path, grpc_headers(daemon.token), TRUNCATED_FRAME)
    assert response.headers[":status"] == "200"
    assert grpc_status(response) == GRPC_INVALID_ARGUMENT
    assert "promised 100 bytes" in response.trailers["grpc-message"].replace("%20", " ")
    await assert_still_serving(daemon)


def test_truncated_connect_stream_frame_is_invalid_argument(daemon: RunningDaemon) -> None:
    over_h2 = h2_request(
        daemon,
        EXEC_STREAM,
        {"content-type": "application/connect+proto", "authorization": f"Bearer {daemon.token}"},
        TRUNCATED_FRAME,
    )
    assert connect_end_error(over_h2.body)["code"] == "invalid_argument"
    over_http1 = http1_post(daemon, EXEC, TRUNCATED_FRAME, "application/connect+proto")
    assert over_http1.status == 200
    assert connect_end_error(over_http1.body)["code"] == "invalid_argument"


def test_truncated_grpc_web_frame_is_invalid_argument(daemon: RunningDaemon) -> None:
    response = http1_post(daemon, PING, TRUNCATED_FRAME, "application/grpc-web+proto")
    ((flags, trailers),) = unframe(response.body)
    assert flags & END_FRAME_FLAG
    assert grpc_web_trailers(trailers)["grpc-status"] == GRPC_INVALID_ARGUMENT


# --- an oversized message ---------------------------------------------------------------------


def big_env_request(size: int) -> UpdateEnvironmentVariablesRequest:
    return UpdateEnvironmentVariablesRequest(env={"BIG": "x" * size})


@pytest.mark.parametrize("http2", [True, False], ids=["h2c", "http1.1"])
async def test_oversized_unary_message_is_resource_exhausted(
    small_daemon: RunningDaemon, http2: bool
) -> None:
    async with small_daemon.client(http2=http2) as client:
        fits = await client.control.update_environment_variables(
            big_env_request(MAX_MESSAGE_BYTES // 2), headers=client.headers
        )
        assert fits.variable_count > 0
        with pytest.raises(ConnectError) as raised:
            await client.control.update_environment_variables(
                big_env_request(4 * MAX_MESSAGE_BYTES), headers=client.headers
            )
    assert raised.value.code == Code.RESOURCE_EXHAUSTED
    await assert_still_serving(small_daemon)


async def test_oversized_exec_stream_element_is_resource_exhausted(
    small_daemon: RunningDaemon,
) -> None:
    huge = update_todos("big")
    huge.update_todos_tool_call.args.todos.append(TodoItem(id="pad", content="x" * 4096))
    async with small_daemon.client() as client, client.exec_stream() as stream:
        fine = await asyncio.wait_for((await stream.start(read_todos())).wait(), 10)
        await stream.start(huge)
        await asyncio.wait_for(stream.ended.wait(), 10)
    assert fine.result is not None
    assert isinstance(stream.error, ConnectError)
    assert stream.error.code == Code.RESOURCE_EXHAUSTED
    await assert_still_serving(small_daemon)


@pytest.mark.parametrize("path", [PING, EXEC, EXEC_STREAM])
def test_oversized_grpc_message_is_resource_exhausted(
    small_daemon: RunningDaemon, path: str
) -> None:
    body = frame(b"x" * 4 * MAX_MESSAGE_BYTES)  # refused on its length prefix alone
    response = h2_request(small_daemon, path, grpc_headers(small_daemon.token), body)
    assert grpc_status(response) == GRPC_RESOURCE_EXHAUSTED


def test_oversized_connect_json_over_http1_is_429_resource_exhausted(
    small_daemon: RunningDaemon,
) -> None:
    response = http1_post(
        small_daemon,
        "/agent.v1.ControlService/UpdateEnvironmentVariables",
        json.dumps({"env": {"BIG": "x" * 4096}}).encode(),
        "application/json",
    )
    assert response.status == 429
    assert json.loads(response.body)["code"] == "resource_exhausted"


def test_oversized_grpc_web_message_is_resource_exhausted(small_daemon: RunningDaemon) -> None:
    response = http1_post(
        small_daemon, EXEC, frame(b"x" * 4 * MAX_MESSAGE_BYTES), "application/grpc-web+proto"
    )
    ((flags, trailers),) = unframe(response.body)  # no message, only the status
    assert flags & END_FRAME_FLAG
    assert grpc_web_trailers(trailers)["grpc-status"] == GRPC_RESOURCE_EXHAUSTED
