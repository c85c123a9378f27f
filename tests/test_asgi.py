"""The front door: bearer auth before the body, protocol-shaped errors, no response compression."""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
import logging
import socket
from collections.abc import AsyncIterator

import grpc
import pytest

from agent.v1.control_pb2 import PingRequest, PingResponse
from agent.v1.exec_pb2 import ExecServerMessage, ExecStreamElement
from tests.inprocess import InProcessDaemon, serve_in_process
from tests.scripted_tool import ScriptedTool

PING = "/agent.v1.ControlService/Ping"


@pytest.fixture
async def server() -> AsyncIterator[InProcessDaemon]:
    async with serve_in_process(ScriptedTool().handlers()) as running:
        yield running


def post_json(
    port: int, path: str, body: bytes, headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(
            "POST", path, body=body, headers={"content-type": "application/json", **headers}
        )
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", "Basic abc", "Bearer"])
async def test_connect_unary_without_the_right_token_is_unauthenticated(
    server: InProcessDaemon, authorization: str | None
) -> None:
    headers = {"authorization": authorization} if authorization else {}
    status, _headers, body = await asyncio.to_thread(post_json, server.port, PING, b"{}", headers)
    assert status == 401
    assert json.loads(body)["code"] == "unauthenticated"


async def test_right_token_is_served(server: InProcessDaemon) -> None:
    status, _headers, body = await asyncio.to_thread(
        post_json, server.port, PING, b"{}", {"authorization": f"Bearer {server.token}"}
    )
    assert status == 200 and json.loads(body)["version"]


def _http11_exchange(sock: socket.socket, request: bytes) -> bytes:
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    lengths = [
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    ]
    if lengths:
        while len(rest) < lengths[0]:
            rest += sock.recv(65536)
    else:  # chunked
        while not rest.endswith(b"0\r\n\r\n"):
            rest += sock.recv(65536)
    return head


async def test_http11_rejection_keeps_the_connection_usable(server: InProcessDaemon) -> None:
    """A rejected request with a body must not cost the client its connection (no EPIPE)."""
    body = b"{" + b" " * 200_000 + b"}"

    def exchange() -> tuple[bytes, bytes]:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            rejected = _http11_exchange(
                sock,
                b"POST "
                + PING.encode()
                + b" HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"authorization: Bearer nope\r\ncontent-length: "
                + str(len(body)).encode()
                + b"\r\n\r\n"
                + body,
            )
            accepted = _http11_exchange(
                sock,
                b"POST "
                + PING.encode()
                + b" HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"authorization: Bearer "
                + server.token.encode()
                + b"\r\ncontent-length: 2\r\n\r\n{}",
            )
            return rejected, accepted

    rejected, accepted = await asyncio.to_thread(exchange)
    assert rejected.startswith(b"HTTP/1.1 401")
    assert accepted.startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("content_type", ["application/grpc", "application/grpc+proto"])
@pytest.mark.parametrize("token_is_right", [True, False])
async def test_grpc_over_http11_gets_one_clear_answer_and_no_traceback(
    server: InProcessDaemon,
    content_type: str,
    token_is_right: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = server.token if token_is_right else "wrong"

    def exchange() -> tuple[int, dict[str, str], bytes, int]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            headers = {"content-type": content_type, "authorization": f"Bearer {token}"}
            conn.request("POST", PING, body=b"\0\0\0\0\0", headers={**headers, "te": "trailers"})
            response = conn.getresponse()
            answer = (response.status, dict(response.getheaders()), response.read())
            # The same connection still serves a Connect call.
            conn.request(
                "POST",
                PING,
                body=b"{}",
                headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
            )
            return (*answer, conn.getresponse().status)
        finally:
            conn.close()

    caplog.set_level("INFO")
    status, headers, body, next_status = await asyncio.to_thread(exchange)
    assert status == 505
    assert headers["grpc-status"] == "12"
    assert body.decode() == "gRPC needs HTTP/2 (h2c with prior knowledge on this port); " + (
        "over HTTP/1.1 use Connect or gRPC-Web\n"
    )
    assert next_status == (200 if token_is_right else 401)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert sum("gRPC needs HTTP/2" in r.getMessage() for r in caplog.records) == 1


async def test_grpc_rejection_comes_before_any_message_is_sent(server: InProcessDaemon) -> None:
    never_sent = asyncio.Event()

    async def no_messages() -> AsyncIterator[bytes]:
        await never_sent.wait()
        yield b""

    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        call = channel.stream_stream(
            "/agent.v1.ExecService/ExecStream",
            request_serializer=ExecStreamElement.SerializeToString,
            response_deserializer=ExecServerMessage.FromString,
        )(no_messages(), metadata=[("authorization", "Bearer wrong")])
        # No message is ever sent: a refusal that waited for one would never come.
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            async with asyncio.timeout(15):
                async for _ in call:
                    pass
    assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_grpc_unknown_method_is_unimplemented(server: InProcessDaemon) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        method = channel.unary_unary(
            "/agent.v1.ControlService/NoSuchThing",
            request_serializer=PingRequest.SerializeToString,
            response_deserializer=PingResponse.FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await method(PingRequest(), metadata=[("authorization", f"Bearer {server.token}")])
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_responses_are_not_compressed_but_compressed_requests_are_accepted(
    server: InProcessDaemon,
) -> None:
    auth = {"authorization": f"Bearer {server.token}"}
    status, headers, body = await asyncio.to_thread(
        post_json, server.port, PING, b"{}", {**auth, "accept-encoding": "gzip"}
    )
    assert status == 200
    assert headers.get("content-encoding", "identity") == "identity"
    assert json.loads(body)["version"]
    status, headers, body = await asyncio.to_thread(
        post_json, server.port, PING, gzip.compress(b"{}"), {**auth, "content-encoding": "gzip"}
    )
    assert status == 200 and json.loads(body)["version"]


async def test_grpc_gzip_request_is_accepted(server: InProcessDaemon) -> None:
    async with grpc.aio.insecure_channel(
        f"127.0.0.1:{server.port}", compression=grpc.Compression.Gzip
    ) as channel:
        ping = channel.unary_unary(
            PING,
            request_serializer=PingRequest.SerializeToString,
            response_deserializer=PingResponse.FromString,
        )
        response = await ping(PingRequest(), metadata=[("authorization", f"Bearer {server.token}")])
    assert response.version
