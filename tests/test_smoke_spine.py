from __future__ import annotations

from agent.v1.todos_pb2 import (
    ReadTodosToolCall,
    TodoItem,
    TodoStatus,
    UpdateTodosArgs,
    UpdateTodosToolCall,
)
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient


async def test_ping_and_todos_roundtrip(client: ExecDaemonClient) -> None:
    pong = await client.ping()
    assert pong.version
    update = ToolCall(
        update_todos_tool_call=UpdateTodosToolCall(
            args=UpdateTodosArgs(
                todos=[TodoItem(id="a", content="x", status=TodoStatus.TODO_STATUS_PENDING)],
                merge=False,
            )
        )
    )
    async with client.exec_stream() as stream:
        call = await stream.start(update, agent_id="conv")
        outcome = await call.wait()
        assert outcome.result is not None
        read = await stream.start(
            ToolCall(read_todos_tool_call=ReadTodosToolCall()), agent_id="conv"
        )
        outcome = await read.wait()
    assert outcome.result is not None
    todos = outcome.result.read_todos_tool_call.result.success.todos
    assert [t.id for t in todos] == ["a"]
