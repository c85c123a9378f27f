"""Traps from design.md that live in the server assembly, and shutdown."""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import grpc

from agent.v1.control_pb2 import PingRequest, PingResponse
from agent.v1.exec_pb2 import (
    ExecClientControlMessage,
    ExecClientMessage,
    ExecServerMessage,
    ExecStreamElement,
    Heartbeat,
    StreamClose,
)
from tests.daemon_process import running_daemon
from tests.inprocess import InProcessDaemon, serve_in_process
from tests.polling import eventually
from tests.scripted_tool import ScriptedTool, script

PING = "/agent.v1.ControlService/Ping"
EXEC_STREAM = "/agent.v1.ExecService/ExecStream"


def _methods(channel: grpc.aio.Channel) -> tuple[object, object]:
    ping = channel.unary_unary(
        PING,
        request_serializer=PingRequest.SerializeToString,
        response_deserializer=PingResponse.FromString,
    )
    stream = channel.stream_stream(
        EXEC_STREAM,
        request_serializer=ExecStreamElement.SerializeToString,
        response_deserializer=ExecServerMessage.FromString,
    )
    return ping, stream


def _start(call_id: int, steps: str) -> ExecStreamElement:
    return ExecStreamElement(
        exec_client_message=ExecClientMessage(id=call_id, tool_call=script(steps))
    )


def _auth(server: InProcessDaemon) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {server.token}")]


async def _one_call(stream_method: object, server: InProcessDaemon, steps: str) -> list[str]:
    async def requests() -> AsyncIterator[ExecStreamElement]:
        yield _start(1, steps)

    call = stream_method(requests(), metadata=_auth(server))  # type: ignore[operator]
    return [message.WhichOneof("message") async for message in call]


async def test_more_than_1000_calls_on_one_http2_connection_keep_a_long_call_alive() -> None:
    async with serve_in_process(ScriptedTool().handlers()) as server:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            ping, stream = _methods(channel)
            long_call = asyncio.create_task(_one_call(stream, server, "sleep:1.5 delta:end"))
            for _ in range(1100):
                await ping(PingRequest(), metadata=_auth(server))  # type: ignore[operator]
            assert await long_call == ["tool_call_delta", "tool_call_result"]
            await ping(PingRequest(), metadata=_auth(server))  # type: ignore[operator]


async def test_a_stream_the_server_ends_while_the_client_still_sends_spares_the_connection() -> (
    None
):
    """hypercorn 0.18 would drop the whole connection (every multiplexed call) here."""
    async with serve_in_process(ScriptedTool().handlers()) as server:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            ping, stream = _methods(channel)
            neighbour = asyncio.create_task(_one_call(stream, server, "sleep:1.5 delta:end"))
            server_done = asyncio.Event()

            async def keeps_sending() -> AsyncIterator[ExecStreamElement]:
                yield ExecStreamElement(
                    exec_client_control_message=ExecClientControlMessage(stream_close=StreamClose())
                )
                await server_done.wait()
                for _ in range(50):  # DATA frames for a stream whose response already ended
                    yield ExecStreamElement(
                        exec_client_control_message=ExecClientControlMessage(heartbeat=Heartbeat())
                    )
                    await asyncio.sleep(0.01)

            closing = stream(keeps_sending(), metadata=_auth(server))  # type: ignore[operator]
            assert [m async for m in closing] == []
            server_done.set()
            await asyncio.sleep(0.8)
            assert await neighbour == ["tool_call_delta", "tool_call_result"]
            assert (await ping(PingRequest(), metadata=_auth(server))).version  # type: ignore[operator]


async def test_sigterm_ends_streams_and_exits_zero_quickly(workspace: Path, tmp_path: Path) -> None:
    with running_daemon(workspace, tmp_path / "state") as daemon:
        async with daemon.client() as client:
            stream = client.exec_stream()
            await stream.__aenter__()
            await stream.heartbeat()
            await eventually(lambda: stream.heartbeats, what="the heartbeat's answer")
            # stop() fails if the daemon is not gone within SHUTDOWN_SECONDS.
            code = await asyncio.to_thread(daemon.stop, signal.SIGTERM)
            await asyncio.wait_for(stream.ended.wait(), 5)
    assert code == 0
    assert "shutting down" in daemon.log()


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS_FRAME = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


async def test_sigterm_with_clients_that_never_close_logs_no_traceback(
    workspace: Path, tmp_path: Path
) -> None:
    with running_daemon(workspace, tmp_path / "state") as daemon:
        # An HTTP/2 connection that stays silent after its preface, and an HTTP/1.1 request whose
        # body never comes: hypercorn cancels both once its graceful time is over.
        half_sent = socket.create_connection(("127.0.0.1", daemon.port), timeout=5)
        half_sent.sendall(b"POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\nabc")
        idle_h2 = socket.create_connection(("127.0.0.1", daemon.port), timeout=5)
        idle_h2.sendall(H2_PREFACE + EMPTY_SETTINGS_FRAME)
        with idle_h2, half_sent:
            # The server's SETTINGS frame: the connection is being served.
            assert await asyncio.to_thread(idle_h2.recv, 9)
            code = await asyncio.to_thread(daemon.stop, signal.SIGTERM)
    assert code == 0
    log = daemon.log()
    assert "shutting down" in log
    assert "Traceback" not in log and " ERROR " not in log


async def test_sigint_exits_zero(workspace: Path, tmp_path: Path) -> None:
    with running_daemon(workspace, tmp_path / "state") as daemon:
        async with daemon.client() as client:
            assert (await client.ping()).version
        assert await asyncio.to_thread(daemon.stop, signal.SIGINT) == 0
