"""update_todos_tool_call / read_todos_tool_call: one list per conversation, merge semantics."""

from __future__ import annotations

from typing import Any

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
from exec_daemon.client import ExecDaemonClient
from tests.shared_daemon import *  # noqa: F403 (the daemon, space and client fixtures)

PENDING = TodoStatus.TODO_STATUS_PENDING
IN_PROGRESS = TodoStatus.TODO_STATUS_IN_PROGRESS
COMPLETED = TodoStatus.TODO_STATUS_COMPLETED
CANCELLED = TodoStatus.TODO_STATUS_CANCELLED


@pytest.fixture
def conversation(request: pytest.FixtureRequest) -> str:
    return request.node.name  # the daemon is shared: one conversation per test


def todo(todo_id: str, content: str = "", status: int = 0) -> TodoItem:
    return TodoItem(id=todo_id, content=content, status=status)  # type: ignore[arg-type]


async def update(
    client: ExecDaemonClient, agent_id: str, items: list[TodoItem], merge: bool
) -> Any:
    call = ToolCall(
        update_todos_tool_call=UpdateTodosToolCall(args=UpdateTodosArgs(todos=items, merge=merge))
    )
    outcome = await client.run(call, agent_id=agent_id)
    assert outcome.result is not None
    return outcome.result.update_todos_tool_call.result


async def read(client: ExecDaemonClient, agent_id: str, **filters: Any) -> Any:
    call = ToolCall(read_todos_tool_call=ReadTodosToolCall(args=ReadTodosArgs(**filters)))
    outcome = await client.run(call, agent_id=agent_id)
    assert outcome.result is not None
    return outcome.result.read_todos_tool_call.result.success


def summary(items: Any) -> list[tuple[str, str, int]]:
    return [(item.id, item.content, item.status) for item in items]


async def test_replace_then_merge_updates_by_id_and_appends_new_ones(
    client: ExecDaemonClient, conversation: str
) -> None:
    first = [todo("a", "write code", PENDING), todo("b", "test it", PENDING)]
    await update(client, conversation, first, merge=False)
    merged = await update(
        client,
        conversation,
        [todo("b", status=IN_PROGRESS), todo("c", "ship it", PENDING)],
        merge=True,
    )
    assert merged.success.was_merge and merged.success.total_count == 3
    expected = [
        ("a", "write code", PENDING),
        ("b", "test it", IN_PROGRESS),  # content left empty: kept
        ("c", "ship it", PENDING),
    ]
    assert summary(merged.success.todos) == expected
    assert summary((await read(client, conversation)).todos) == expected


async def test_merge_false_replaces_the_whole_list(
    client: ExecDaemonClient, conversation: str
) -> None:
    await update(client, conversation, [todo("a", "x", PENDING), todo("b", "y")], merge=False)
    await update(client, conversation, [todo("z", "only", COMPLETED)], merge=False)
    assert summary((await read(client, conversation)).todos) == [("z", "only", COMPLETED)]


async def test_merge_keeps_created_time_and_bumps_updated_time(
    client: ExecDaemonClient, conversation: str
) -> None:
    created = await update(client, conversation, [todo("a", "x", PENDING)], merge=False)
    original = created.success.todos[0]
    changed = await update(client, conversation, [todo("a", status=COMPLETED)], merge=True)
    item = changed.success.todos[0]
    assert item.created_at_ms == original.created_at_ms
    assert item.updated_at_ms >= original.updated_at_ms


async def test_lists_are_per_conversation(client: ExecDaemonClient, conversation: str) -> None:
    await update(client, f"{conversation}-1", [todo("a", "mine")], merge=False)
    await update(client, f"{conversation}-2", [todo("b", "yours")], merge=True)
    assert summary((await read(client, f"{conversation}-1")).todos) == [("a", "mine", 0)]
    assert summary((await read(client, f"{conversation}-2")).todos) == [("b", "yours", 0)]
    assert not (await read(client, f"{conversation}-3")).todos


async def test_read_filters_by_status_and_id(client: ExecDaemonClient, conversation: str) -> None:
    items = [todo("a", "1", PENDING), todo("b", "2", COMPLETED), todo("c", "3", CANCELLED)]
    await update(client, conversation, items, merge=False)
    done = await read(client, conversation, status_filter=[COMPLETED, CANCELLED])
    assert [item.id for item in done.todos] == ["b", "c"] and done.total_count == 3
    by_id = await read(client, conversation, id_filter=["a"])
    assert [item.id for item in by_id.todos] == ["a"]


async def test_invalid_updates_are_typed_errors_and_change_nothing(
    client: ExecDaemonClient, conversation: str
) -> None:
    await update(client, conversation, [todo("a", "keep")], merge=False)
    missing_id = await update(client, conversation, [todo("", "no id")], merge=True)
    assert missing_id.WhichOneof("result") == "error"
    duplicate = await update(client, conversation, [todo("x", "1"), todo("x", "2")], merge=True)
    assert duplicate.error.code == "invalid_argument"
    assert summary((await read(client, conversation)).todos) == [("a", "keep", 0)]
