"""Helpers for the interop tests: sample tool calls and raw HTTP/1.1 + gRPC framing by hand."""

from __future__ import annotations

import contextlib
import http.client
import struct
from collections.abc import Iterator
from dataclasses import dataclass

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
