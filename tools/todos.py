"""update_todos_tool_call (TodoWrite) and read_todos_tool_call: a todo list per conversation."""

from __future__ import annotations

import time

from agent.v1.todos_pb2 import (
    ReadTodosArgs,
    ReadTodosResult,
    ReadTodosSuccess,
    TodoItem,
    UpdateTodosArgs,
    UpdateTodosResult,
    UpdateTodosSuccess,
)
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, ToolSpec, no_subject
from exec_daemon.kernel.state import Daemon


class TodoLists:
    """The todo list of every conversation (agent_id), in memory for the daemon's life."""

    def __init__(self, daemon: Daemon) -> None:
        self._lists: dict[str, list[TodoItem]] = {}

    def get(self, agent_id: str) -> list[TodoItem]:
        return self._lists.setdefault(agent_id, [])

    def replace(self, agent_id: str, items: list[TodoItem]) -> None:
        self._lists[agent_id] = items


def _stamp(item: TodoItem, previous: TodoItem | None, now_ms: int) -> TodoItem:
    stamped = TodoItem()
    stamped.CopyFrom(item)
    stamped.created_at_ms = previous.created_at_ms if previous else now_ms
    stamped.updated_at_ms = now_ms
    return stamped


async def update_todos(args: UpdateTodosArgs, ctx: CallContext) -> UpdateTodosResult:
    ids = [item.id for item in args.todos]
    if any(not todo_id for todo_id in ids):
        return UpdateTodosResult(
            error={"code": "invalid_argument", "message": "every todo needs an id"}
        )
    if len(set(ids)) != len(ids):
        return UpdateTodosResult(
            error={"code": "invalid_argument", "message": "todo ids must be unique in one update"}
        )
    lists = ctx.daemon.service(TodoLists)
    now_ms = int(time.time() * 1000)
    current = lists.get(ctx.agent_id) if args.merge else []
    by_id = {item.id: item for item in current}
    merged = list(current)
    for item in args.todos:
        previous = by_id.get(item.id)
        if previous is None:
            merged.append(_stamp(item, None, now_ms))
            continue
        update = TodoItem()
        update.CopyFrom(previous)
        # Merge: fields the update leaves empty keep their old value.
        if item.content:
            update.content = item.content
        if item.status:
            update.status = item.status
        merged[merged.index(previous)] = _stamp(update, previous, now_ms)
    lists.replace(ctx.agent_id, merged)
    return UpdateTodosResult(
        success=UpdateTodosSuccess(todos=merged, total_count=len(merged), was_merge=args.merge)
    )


UPDATE_TODOS = ToolSpec(
    "update_todos_tool_call",
    update_todos,
    effects=Effect.NONE,  # the conversation's todo list lives in the daemon's memory
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("UpdateTodos", claude_name="TodoWrite"),
    subject=no_subject,
)


async def read_todos(args: ReadTodosArgs, ctx: CallContext) -> ReadTodosResult:
    items = ctx.daemon.service(TodoLists).get(ctx.agent_id)
    statuses = set(args.status_filter)
    ids = set(args.id_filter)
    selected = [
        item
        for item in items
        if (not statuses or item.status in statuses) and (not ids or item.id in ids)
    ]
    return ReadTodosResult(success=ReadTodosSuccess(todos=selected, total_count=len(items)))


READ_TODOS = ToolSpec(
    "read_todos_tool_call",
    read_todos,
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("ReadTodos"),
    subject=no_subject,
)
