"""Helpers for the interop tests: sample tool calls and raw HTTP/1.1 + gRPC framing by hand."""

from __future__ import annotations

import contextlib
import http.client
import socket
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import h2.config
import h2.connection
import h2.events
import pytest

from agent.v1.todos_pb2 import (
    ReadTodosArgs,
    ReadTodosToolCall,
    TodoItem,
    TodoStatus,
    UpdateTodosArgs,
    UpdateTodosToolCall,
)
from agent.v1.tool_call_pb2 import ToolCall
from tests.daemon_process import RunningDaemon, running_daemon

# gRPC-Web and Connect streaming mark their last frame (trailers / end-of-stream) with this bit.
END_FRAME_FLAG = 0x80
CONNECT_END_STREAM_FLAG = 0x02


def read_todos() -> ToolCall:
    return ToolCall(read_todos_tool_call=ReadTodosToolCall(args=ReadTodosArgs()))


def update_todos(*ids: str) -> ToolCall:
    todos = [
        TodoItem(id=i, content=f"todo {i}", status=TodoStatus.TODO_STATUS_PENDING) for i in ids
    ]
    return ToolCall(
        update_todos_tool_call=UpdateTodosToolCall(args=UpdateTodosArgs(todos=todos, merge=False))
    )


def frame(payload: bytes, flags: int = 0) -> bytes:
    """One length-prefixed message, as gRPC, gRPC-Web and Connect streaming frame them."""
    return struct.pack(">BI", flags, len(payload)) + payload


def unframe(body: bytes) -> list[tuple[int, bytes]]:
    """Splits a body into (flags, payload) frames; a truncated frame is an error."""
    frames = []
    pos = 0
    while pos < len(body):
        flags, length = struct.unpack_from(">BI", body, pos)
        payload = body[pos + 5 : pos + 5 + length]
        if len(payload) != length:
            raise ValueError(f"truncated frame: {len(payload)} of {length} bytes")
        frames.append((flags, payload))
        pos += 5 + length
    return frames


def grpc_web_trailers(payload: bytes) -> dict[str, str]:
    """The trailers a gRPC-Web response carries in its body, as a dict."""
    trailers = {}
    for line in payload.decode("latin-1").split("\r\n"):
        if line:
            name, _, value = line.partition(":")
            trailers[name.strip().lower()] = value.strip()
    return trailers


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def http1_post(
    daemon: RunningDaemon,
    path: str,
    body: bytes,
    content_type: str,
    *,
    token: str | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> RawResponse:
    """A plain HTTP/1.1 POST, as curl would send it (token defaults to the daemon's own)."""
    all_headers = {"content-type": content_type, **(headers or {})}
    token = daemon.token if token is None else token
    if token:
        all_headers["authorization"] = f"Bearer {token}"
    connection = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=timeout)
    try:
        connection.request("POST", path, body=body, headers=all_headers)
        response = connection.getresponse()
        return RawResponse(
            response.status,
            {name.lower(): value for name, value in response.getheaders()},
            response.read(),
        )
    finally:
        connection.close()


async def assert_still_serving(daemon: RunningDaemon) -> None:
    """The daemon still answers a fresh client after whatever the test did to it."""
    assert daemon.process.poll() is None, daemon.log()
    async with daemon.client() as client:
        assert (await client.ping()).version


@contextlib.contextmanager
def daemon_for_module(factory: pytest.TempPathFactory, *extra_args: str) -> Iterator[RunningDaemon]:
    """One daemon shared by a module's tests (starting one costs ~0.8 s on this machine)."""
    root = factory.mktemp("daemon")
    workspace = root / "workspace"
    workspace.mkdir()
    with running_daemon(workspace, root / "state", *extra_args) as running:
        yield running


@contextlib.contextmanager
def model_daemon_for_module(
    factory: pytest.TempPathFactory, endpoint: str, *extra_args: str
) -> Iterator[RunningDaemon]:
    """daemon_for_module whose subagents ask the model "vision-model" at `endpoint` (the base
    URL of tests/model_servers.py's served_model)."""
    model = ["--model-endpoint", endpoint, "--model", "vision-model"]
    with daemon_for_module(factory, *model, *extra_args) as running:
        yield running


@dataclass
class H2Response:
    headers: dict[str, str]
    body: bytes
    trailers: dict[str, str]
    reset_code: int | None = None


def h2_request(
    daemon: RunningDaemon,
    path: str,
    headers: dict[str, str],
    body: bytes | None,
    *,
    timeout: float = 10.0,
) -> H2Response:
    """One HTTP/2 (h2c, prior knowledge) POST written by hand: sends `body` then END_STREAM, even
    when it is not what its framing promised, and collects what comes back. With `body=None` the
    request stays open, its body never sent: only the server can end the exchange."""
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=timeout) as sock:
        connection.initiate_connection()
        stream_id = connection.get_next_available_stream_id()
        request_headers = [
            (":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", f"127.0.0.1:{daemon.port}"), *headers.items(),
        ]  # fmt: skip
        connection.send_headers(stream_id, request_headers)
        if body is not None:
            connection.send_data(stream_id, body, end_stream=True)
        sock.sendall(connection.data_to_send())
        response = H2Response({}, b"", {})
        ended = False
        while not ended:
            data = sock.recv(65536)
            if not data:
                break
            for event in connection.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived):
                    response.headers = _h2_headers(event.headers)
                elif isinstance(event, h2.events.DataReceived):
                    response.body += event.data
                    connection.acknowledge_received_data(event.flow_controlled_length, stream_id)
                elif isinstance(event, h2.events.TrailersReceived):
                    response.trailers = _h2_headers(event.headers)
                elif isinstance(event, h2.events.StreamReset):
                    response.reset_code = event.error_code
                    ended = True
                elif isinstance(event, h2.events.StreamEnded | h2.events.ConnectionTerminated):
                    ended = True
            sock.sendall(connection.data_to_send())
        return response


def _h2_headers(headers: Iterable[tuple[bytes | str, bytes | str]]) -> dict[str, str]:
    def text(value: bytes | str) -> str:
        return value.decode("latin-1") if isinstance(value, bytes) else value

    return {text(name).lower(): text(value) for name, value in headers}
