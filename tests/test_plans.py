"""create_plan_tool_call (tools/plans.py) on the real daemon: the plan file and the todos."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.v1.todos_pb2 import (
    CreatePlanArgs,
    ReadTodosArgs,
    TodoItem,
    TodoStatus,
    UpdateTodosArgs,
)
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tools.plans import slugify

PENDING = TodoStatus.TODO_STATUS_PENDING
COMPLETED = TodoStatus.TODO_STATUS_COMPLETED


async def run(client: ExecDaemonClient, variant: str, args: Any, agent_id: str = "a1") -> Any:
    call = ToolCall()
    getattr(call, variant).args.CopyFrom(args)
    outcome = await client.run(call, agent_id=agent_id)
    assert outcome.error is None, outcome.error
    assert outcome.result is not None
    return getattr(outcome.result, variant).result


def read_text(path: str) -> str:
    return Path(path).read_text()


def plan_args(**overrides: Any) -> CreatePlanArgs:
    values: dict[str, Any] = {
        "name": "Add OAuth login",
        "overview": "Let users sign in with GitHub.",
        "plan": "1. Register the app\n2. Add the callback route",
        "todos": [
            TodoItem(id="register", content="Register the OAuth app"),
            TodoItem(content="Add the\ncallback route", status=COMPLETED),
        ],
    }
    values.update(overrides)
    return CreatePlanArgs(**values)


async def test_the_plan_is_written_as_markdown_with_a_todo_checklist(
    client: ExecDaemonClient, workspace: Path
) -> None:
    result = await run(client, "create_plan_tool_call", plan_args())
    assert result.WhichOneof("result") == "success", result
    path = workspace / ".cursor" / "plans" / "add-oauth-login.md"
    assert result.success.plan_path == str(path)
    assert result.success.todo_count == 2
    assert not result.success.replaced
    text = path.read_text()
    assert text.startswith("# Add OAuth login\n")
    assert "## Overview\n\nLet users sign in with GitHub." in text
    assert "1. Register the app\n2. Add the callback route" in text
    assert "- [ ] Register the OAuth app <!-- id: register -->" in text
    assert "- [x] Add the callback route <!-- id: todo-2 -->" in text
    assert not list(path.parent.glob(".*.tmp")), "no temp file is left behind"


async def test_the_plan_todos_become_the_conversation_todos(client: ExecDaemonClient) -> None:
    await run(
        client,
        "update_todos_tool_call",
        UpdateTodosArgs(todos=[TodoItem(id="old", content="stale", status=PENDING)]),
        agent_id="planner",
    )
    await run(client, "create_plan_tool_call", plan_args(), agent_id="planner")
    todos = await run(client, "read_todos_tool_call", ReadTodosArgs(), agent_id="planner")
    summary = [(item.id, item.content, item.status) for item in todos.success.todos]
    assert summary == [
        ("register", "Register the OAuth app", PENDING),
        ("todo-2", "Add the\ncallback route", COMPLETED),
    ]
    other = await run(client, "read_todos_tool_call", ReadTodosArgs(), agent_id="someone-else")
    assert list(other.success.todos) == []


async def test_a_plan_of_the_same_name_is_replaced(
    client: ExecDaemonClient, workspace: Path
) -> None:
    await run(client, "create_plan_tool_call", plan_args())
    again = await run(
        client, "create_plan_tool_call", plan_args(overview="Second version", todos=[])
    )
    assert again.success.replaced
    assert again.success.todo_count == 0
    text = read_text(again.success.plan_path)
    assert "Second version" in text and "## Todos" not in text


async def test_invalid_plans_are_refused(client: ExecDaemonClient, workspace: Path) -> None:
    no_name = await run(client, "create_plan_tool_call", plan_args(name="  "))
    assert no_name.error.code == "invalid_argument"
    empty = await run(
        client, "create_plan_tool_call", CreatePlanArgs(name="Nothing", overview="", plan="")
    )
    assert empty.error.code == "invalid_argument"
    duplicate = await run(
        client,
        "create_plan_tool_call",
        plan_args(todos=[TodoItem(id="x", content="a"), TodoItem(id="x", content="b")]),
    )
    assert duplicate.error.code == "invalid_argument"
    assert not (workspace / ".cursor").exists()


async def test_a_plan_that_cannot_be_written_is_a_typed_error(
    client: ExecDaemonClient, workspace: Path
) -> None:
    (workspace / ".cursor").write_text("a file where the plans directory would go")
    result = await run(client, "create_plan_tool_call", plan_args())
    assert result.WhichOneof("result") == "error"
    assert result.error.code in ("not_a_directory", "io_error")


def test_slugs_are_safe_file_names() -> None:
    assert slugify("Add OAuth login!") == "add-oauth-login"
    assert slugify("Crème brûlée / ../../etc") == "creme-brulee-etc"
    assert slugify("日本語") == "plan"
    assert len(slugify("word " * 50)) <= 60
