"""create_plan_tool_call (CreatePlan): a markdown plan saved in the workspace, and its todos.

The plan goes to `<workspace>/.cursor/plans/<slug>.md` (written atomically; a plan of the same
name is replaced) with its overview, body and todos as a checklist; the plan's todos become the
conversation's todo list (the one update_todos / read_todos work on).
"""

from __future__ import annotations

import asyncio
import re
import time
import unicodedata
from pathlib import Path

from agent.v1.common_pb2 import ToolError
from agent.v1.todos_pb2 import (
    CreatePlanArgs,
    CreatePlanResult,
    CreatePlanSuccess,
    TodoItem,
    TodoStatus,
)
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, Subject, ToolSpec
from tools.todos import TodoLists
from tools.workspace import atomic_write, write_rules

PLANS_DIRECTORY = Path(".cursor") / "plans"
MAX_SLUG_CHARS = 60
CHECKBOX = {
    TodoStatus.TODO_STATUS_COMPLETED: "[x]",
    TodoStatus.TODO_STATUS_CANCELLED: "[-]",
    TodoStatus.TODO_STATUS_IN_PROGRESS: "[~]",
}


def slugify(name: str) -> str:
    """A file name from the plan's name: lower-case ASCII words joined by '-' ("plan" if none)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")
    return slug[:MAX_SLUG_CHARS].rstrip("-") or "plan"


def plan_todos(args: CreatePlanArgs, now_ms: int) -> list[TodoItem]:
    """The plan's todos with ids ("todo-N" where missing), a status (pending) and timestamps."""
    todos = []
    for index, item in enumerate(args.todos, start=1):
        todo = TodoItem()
        todo.CopyFrom(item)
        todo.id = todo.id or f"todo-{index}"
        todo.status = todo.status or TodoStatus.TODO_STATUS_PENDING
        todo.created_at_ms = todo.created_at_ms or now_ms
        todo.updated_at_ms = now_ms
        todos.append(todo)
    return todos


def plan_markdown(name: str, overview: str, plan: str, todos: list[TodoItem]) -> str:
    sections = [f"# {name}"]
    if overview.strip():
        sections.append(f"## Overview\n\n{overview.strip()}")
    if plan.strip():
        sections.append(f"## Plan\n\n{plan.strip()}")
    if todos:
        lines = [
            f"- {CHECKBOX.get(todo.status, '[ ]')} {_one_line(todo.content)} <!-- id: {todo.id} -->"
            for todo in todos
        ]
        sections.append("## Todos\n\n" + "\n".join(lines))
    return "\n\n".join(sections) + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def plan_path(name: str) -> Path:
    """Where the plan of this name goes, relative to the workspace."""
    return PLANS_DIRECTORY / f"{slugify(_one_line(name))}.md"


def _error(code: str, message: str) -> CreatePlanResult:
    return CreatePlanResult(error=ToolError(code=code, message=message))


async def create_plan(args: CreatePlanArgs, ctx: CallContext) -> CreatePlanResult:
    name = _one_line(args.name)
    if not name:
        return _error("invalid_argument", "the plan needs a name")
    if not (args.plan.strip() or args.overview.strip() or args.todos):
        return _error("invalid_argument", "the plan is empty (no overview, plan or todos)")
    ids = [item.id for item in args.todos if item.id]
    if len(set(ids)) != len(ids):
        return _error("invalid_argument", "todo ids must be unique in one plan")
    todos = plan_todos(args, int(time.time() * 1000))
    path = Path(ctx.daemon.workspace) / plan_path(name)
    content = plan_markdown(name, args.overview, args.plan, todos).encode("utf-8")
    try:
        _written, created = await asyncio.to_thread(
            atomic_write, path, content, rules=write_rules(ctx)
        )
    except CodedError as failure:
        return _error(failure.code, failure.message)
    ctx.daemon.service(TodoLists).replace(ctx.agent_id, todos)
    return CreatePlanResult(
        success=CreatePlanSuccess(
            plan_path=str(path), todo_count=len(todos), replaced=not created, todos=todos
        )
    )


CREATE_PLAN = ToolSpec(
    "create_plan_tool_call",
    create_plan,
    effects=Effect.PLAN,  # the one thing plan mode may write
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("CreatePlan"),
    subject=lambda args: Subject(paths_written=(str(plan_path(args.name)),)),
)
