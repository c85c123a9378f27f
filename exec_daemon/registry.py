"""The one map from ToolCall variant to handler. Variants absent here answer `unimplemented`."""

from __future__ import annotations

from exec_daemon.dispatch import Handler
from tools import (
    computer_use,
    diffs,
    files,
    mcp,
    record_screen,
    search,
    shell,
    tasks,
    todos,
    vm_setup,
    web,
)

HANDLERS: dict[str, Handler] = {
    "update_todos_tool_call": todos.update_todos,
    "read_todos_tool_call": todos.read_todos,
    "setup_vm_environment_tool_call": vm_setup.setup_vm_environment,
    "read_tool_call": files.read,
    "edit_tool_call": files.edit,
    "delete_tool_call": files.delete,
    "ls_tool_call": search.ls,
    "glob_tool_call": search.glob,
    "grep_tool_call": search.grep,
    "apply_agent_diff_tool_call": diffs.apply_agent_diff,
    "task_tool_call": tasks.task,
    "mcp_tool_call": mcp.mcp_call,
    "list_mcp_resources_tool_call": mcp.list_mcp_resources,
    "read_mcp_resource_tool_call": mcp.read_mcp_resource,
    "mcp_auth_tool_call": mcp.mcp_auth,
    "computer_use_tool_call": computer_use.computer_use,
    "record_screen_tool_call": record_screen.record_screen,
    "fetch_tool_call": web.fetch,
    "web_fetch_tool_call": web.web_fetch,
    "web_search_tool_call": web.web_search,
    "shell_tool_call": shell.shell_tool_call,
    "write_shell_stdin_tool_call": shell.write_shell_stdin,
    "await_tool_call": shell.await_shell,
}
