"""Dispatcher: the middleware chain around every handler, and the answers it builds."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf.message import Message

from agent.v1.agent_pb2 import ReflectResult
from agent.v1.todos_pb2 import ReadTodosToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.context import CallContext, Invocation, Next, only_for, result_case
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.state import Daemon
from exec_daemon.rpc.dispatch import Dispatcher
from tests.inprocess import stand_in_specs
from tests.scripted_tool import ScriptedTool, script
from tools import todos


def make_daemon(tmp_path: Path) -> Daemon:
    return Daemon(DaemonConfig(auth_token="t", workspace=tmp_path))


async def test_middleware_wraps_calls_outermost_first_and_only_for_its_tools(
    tmp_path: Path,
) -> None:
    seen: list[str] = []

    def recorder(name: str):  # type: ignore[no-untyped-def]
        async def middleware(inv: Invocation, call_next: Next) -> Message:
            seen.append(f"{name}:{inv.tool}")
            return await call_next(inv)

        return middleware

    reflect_only = only_for(lambda spec: spec.variant == "reflect_tool_call")(
        recorder("reflect-only")
    )
    specs = [*stand_in_specs(ScriptedTool().handlers()), todos.READ_TODOS]
    daemon = make_daemon(tmp_path)
    dispatcher = Dispatcher(daemon, specs, [recorder("outer"), reflect_only])
    await dispatcher.run(script(""), CallContext(daemon=daemon))
    await dispatcher.run(
        ToolCall(read_todos_tool_call=ReadTodosToolCall()), CallContext(daemon=daemon)
    )
    assert seen == [
        "outer:reflect_tool_call",
        "reflect-only:reflect_tool_call",
        "outer:read_todos_tool_call",
    ]


async def test_answer_carries_the_args_and_the_result(tmp_path: Path) -> None:
    daemon = make_daemon(tmp_path)
    dispatcher = Dispatcher(daemon, stand_in_specs(ScriptedTool().handlers()))
    answer = await dispatcher.run(script("delta:x"), CallContext(daemon=daemon))
    assert answer.reflect_tool_call.args.next_steps == "delta:x"
    assert answer.reflect_tool_call.result.HasField("success")


async def test_a_crash_is_internal_without_its_text(tmp_path: Path) -> None:
    daemon = make_daemon(tmp_path)
    dispatcher = Dispatcher(daemon, stand_in_specs(ScriptedTool().handlers()))
    with pytest.raises(CodedError) as raised:
        await dispatcher.run(script("crash"), CallContext(daemon=daemon))
    assert raised.value.code == "internal"
    assert "secret-internal-detail" not in raised.value.message


async def test_a_variant_without_spec_is_unimplemented_naming_it(tmp_path: Path) -> None:
    daemon = make_daemon(tmp_path)
    with pytest.raises(CodedError) as raised:
        await Dispatcher(daemon, ()).run(script(""), CallContext(daemon=daemon))
    assert raised.value.code == "unimplemented"
    assert "reflect_tool_call" in raised.value.message


def test_result_case_sets_a_shared_case_with_its_reason() -> None:
    result = result_case(ReflectResult(), "rejected", "no")
    assert result.WhichOneof("result") == "rejected" and result.rejected.reason == "no"
    result = result_case(ReflectResult(), "error", "broken")
    assert result.error.message == "broken"
