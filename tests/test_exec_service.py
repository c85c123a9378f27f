"""ExecStream semantics: multiplexing, abort, bad calls, crashes, disconnects, heartbeats."""

from __future__ import annotations

import asyncio
import logging
import time

import grpc
import pytest

from agent.v1.exec_pb2 import (
    ExecClientControlMessage,
    ExecClientMessage,
    ExecServerMessage,
    ExecStreamElement,
    Heartbeat,
)
from agent.v1.todos_pb2 import ReadTodosToolCall
from agent.v1.tool_call_pb2 import ToolCall
from tests.inprocess import serve_in_process
from tests.polling import eventually
from tests.scripted_tool import ScriptedTool, script

EXEC_STREAM = "/agent.v1.ExecService/ExecStream"


def stdout_deltas(messages: list[ExecServerMessage]) -> list[str]:
    return [
        m.tool_call_delta.shell_tool_call_delta.stdout
        for m in messages
        if m.WhichOneof("message") == "tool_call_delta"
    ]


async def test_calls_run_concurrently_with_deltas_then_one_result_each() -> None:
    tool = ScriptedTool()
    async with serve_in_process(tool.handlers()) as server, server.client() as client:
        async with client.exec_stream() as stream:
            calls = [
                await stream.start(script(f"delta:{n}a sleep:0.4 delta:{n}b")) for n in range(5)
            ]
            first = await calls[0].wait()
            started_before_the_first_ended = sorted(tool.started)
            outcomes = [first, *await asyncio.gather(*(call.wait() for call in calls[1:]))]
    assert started_before_the_first_ended == [1, 2, 3, 4, 5], "the calls must run side by side"
    for n, (call, outcome) in enumerate(zip(calls, outcomes, strict=True)):
        messages = [m for m in [*outcome_messages(outcome)]]
        assert stdout_deltas(messages) == [f"{n}a", f"{n}b"]
        assert outcome.result is not None and outcome.error is None
        assert outcome.result.reflect_tool_call.result.HasField("success")
        assert outcome.result.reflect_tool_call.args.next_steps.startswith(f"delta:{n}a")
        assert call.id == n + 1


def outcome_messages(outcome: object) -> list[ExecServerMessage]:
    from exec_daemon.client import CallOutcome

    assert isinstance(outcome, CallOutcome)
    return [ExecServerMessage(tool_call_delta=d) for d in outcome.deltas]


async def test_abort_ends_only_that_call_with_an_aborted_result() -> None:
    tool = ScriptedTool()
    async with serve_in_process(tool.handlers()) as server, server.client() as client:
        async with client.exec_stream() as stream:
            long_call = await stream.start(script("sleep:30"))
            other = await stream.start(script("sleep:0.3"))
            await eventually(lambda: long_call.id in tool.started, what="the long call to start")
            await stream.abort(long_call.id)
            aborted = await asyncio.wait_for(long_call.wait(), 5)
            assert (await other.wait()).result is not None
            after = await stream.start(script("delta:still-alive"))
            assert (await after.wait()).result is not None
    assert aborted.result is not None
    result = aborted.result.reflect_tool_call.result
    assert result.WhichOneof("result") == "aborted"
    assert "abort" in result.aborted.reason
    assert tool.cancelled == [long_call.id]


async def test_duplicate_running_id_gets_an_error_and_the_first_call_goes_on() -> None:
    tool = ScriptedTool()
    async with serve_in_process(tool.handlers()) as server, server.client() as client:
        async with client.exec_stream() as stream:
            first = await stream.start(script("sleep:0.3 delta:first"), call_id=7)
            duplicate_sent = time.monotonic()
            await stream.start(script("delta:second"), call_id=7)
            await eventually(lambda: first.outcome.result is not None)
    outcome = first.outcome
    assert outcome.error is not None and outcome.error.code == "already_exists"
    assert "7" in outcome.error.message
    assert [d.shell_tool_call_delta.stdout for d in outcome.deltas] == ["first"]
    assert time.monotonic() - duplicate_sent >= 0.25
    assert tool.started == [7]


async def test_unset_unknown_and_unimplemented_tools_get_errors_and_the_stream_lives_on() -> None:
    tool = ScriptedTool()
    async with serve_in_process(tool.handlers()) as server, server.client() as client:
        async with client.exec_stream() as stream:
            unset = await (await stream.start(ToolCall())).wait()
            unknown_tool = ToolCall()
            unknown_tool.MergeFromString(bytes([0xA2, 0x06, 0x00]))  # field 100, empty message
            unknown = await (await stream.start(unknown_tool)).wait()
            unimplemented = await (
                await stream.start(ToolCall(read_todos_tool_call=ReadTodosToolCall()))
            ).wait()
            fine = await (await stream.start(script("delta:ok"))).wait()
    assert unset.error is not None and unset.error.code == "invalid_argument"
    assert "no tool" in unset.error.message
    assert unknown.error is not None and unknown.error.code == "invalid_argument"
    assert "100" in unknown.error.message
    assert unimplemented.error is not None and unimplemented.error.code == "unimplemented"
    assert "read_todos_tool_call" in unimplemented.error.message
    assert fine.result is not None


async def test_handler_crash_is_internal_and_its_text_stays_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tool = ScriptedTool()
    caplog.set_level(logging.ERROR)
    async with serve_in_process(tool.handlers()) as server, server.client() as client:
        crashed = await client.run(script("crash"))
        typed = await client.run(script("fail:unavailable"))
    assert crashed.error is not None and crashed.error.code == "internal"
    assert "secret-internal-detail" not in crashed.error.message
    assert "secret-internal-detail" in caplog.text and "Traceback" in caplog.text
    assert typed.error is not None and typed.error.code == "unavailable"


async def test_malformed_call_gets_an_error_for_its_id_and_the_stream_lives_on() -> None:
    tool = ScriptedTool()
    async with serve_in_process(tool.handlers()) as server:
        good = ExecStreamElement(
            exec_client_message=ExecClientMessage(id=2, tool_call=script("delta:ok"))
        ).SerializeToString()
        # id 1, then a tool_call field whose bytes are not a ToolCall (a truncated varint).
        malformed = bytes([0x0A, 0x06, 0x08, 0x01, 0x12, 0x02, 0x08, 0xFF])
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            call = channel.stream_stream(
                EXEC_STREAM,
                request_serializer=lambda raw: raw,
                response_deserializer=ExecServerMessage.FromString,
            )(iter([malformed, good]), metadata=[("authorization", f"Bearer {server.token}")])
            answers = [message async for message in call]
    by_id = {m.id: m for m in answers if m.WhichOneof("message") in ("error", "tool_call_result")}
    assert by_id[1].error.code == "invalid_argument"
    assert by_id[2].WhichOneof("message") == "tool_call_result"


async def test_client_disconnect_cancels_its_calls() -> None:
    tool = ScriptedTool()
    async with serve_in_process(tool.handlers()) as server:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            requests: asyncio.Queue[ExecStreamElement] = asyncio.Queue()
            await requests.put(
                ExecStreamElement(
                    exec_client_message=ExecClientMessage(id=1, tool_call=script("sleep:60"))
                )
            )

            async def feed():  # type: ignore[no-untyped-def]
                while True:
                    yield await requests.get()

            call = channel.stream_stream(
                EXEC_STREAM,
                request_serializer=ExecStreamElement.SerializeToString,
                response_deserializer=ExecServerMessage.FromString,
            )(feed(), metadata=[("authorization", f"Bearer {server.token}")])
            await eventually(lambda: tool.started == [1])
            call.cancel()
        await eventually(lambda: tool.cancelled == [1])


async def test_idle_stream_gets_heartbeats_and_client_heartbeats_are_answered() -> None:
    tool = ScriptedTool()
    async with (
        serve_in_process(tool.handlers(), heartbeat_seconds=0.2) as server,
        server.client() as client,
    ):
        async with client.exec_stream() as stream:
            # Sent by the server on its own: the client has not sent anything yet.
            await eventually(lambda: len(stream.heartbeats) >= 2, what="two idle heartbeats")
            idle_beats = len(stream.heartbeats)
            await stream.heartbeat()
            await eventually(lambda: len(stream.heartbeats) > idle_beats)


async def test_a_peer_that_stops_heartbeating_is_taken_as_dead() -> None:
    tool = ScriptedTool()
    async with (
        serve_in_process(tool.handlers(), heartbeat_seconds=0.2) as server,
        server.client() as client,
    ):
        stream = client.exec_stream()
        await stream.__aenter__()
        await stream.heartbeat()
        call = await stream.start(script("sleep:60"))
        await asyncio.wait_for(stream.ended.wait(), 5)
        assert tool.cancelled == [call.id]
        assert stream.error is not None and "heartbeat" in str(stream.error)


async def test_stream_close_ends_the_stream_after_running_calls_answer() -> None:
    tool = ScriptedTool()
    async with serve_in_process(tool.handlers()) as server, server.client() as client:
        stream = client.exec_stream()
        await stream.__aenter__()
        call = await stream.start(script("sleep:0.3 delta:done"))
        await stream.close()
        assert call.outcome.result is not None
        assert stream.ended.is_set() and stream.error is None


async def test_control_exec_runs_one_call_like_a_stream_id() -> None:
    tool = ScriptedTool()
    async with serve_in_process(tool.handlers()) as server, server.client() as client:
        outcome = await client.run(script("delta:a delta:b"))
        unset = await client.run(ToolCall())
    assert [d.shell_tool_call_delta.stdout for d in outcome.deltas] == ["a", "b"]
    assert outcome.result is not None
    assert unset.error is not None and unset.error.code == "invalid_argument"


async def test_heartbeat_message_shape() -> None:
    element = ExecStreamElement(
        exec_client_control_message=ExecClientControlMessage(heartbeat=Heartbeat(sent_at_ms=1))
    )
    assert ExecStreamElement.FromString(element.SerializeToString()) == element
