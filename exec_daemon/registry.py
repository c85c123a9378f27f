"""The tools of this daemon: one ToolSpec per ToolCall variant, each declared beside its handler.

Variants absent here answer `unimplemented`. How to add a tool: docs/architecture.md.
"""

from __future__ import annotations

from exec_daemon.kernel.spec import ToolSpec
from tools import (
    agent_state,
    computer_use,
    diffs,
    files,
    github,
    grind,
    images,
    lints,
    mcp,
    plans,
    questions,
    record_screen,
    reports,
    search,
    sem_search,
    shell,
    tasks,
    todos,
    vm_setup,
    web,
)

SPECS: tuple[ToolSpec, ...] = (
    todos.UPDATE_TODOS,
    todos.READ_TODOS,
    vm_setup.SETUP_VM_ENVIRONMENT,
    files.READ,
    files.EDIT,
    files.DELETE,
    search.LS,
    search.GLOB,
    search.GREP,
    diffs.APPLY_AGENT_DIFF,
    tasks.TASK,
    mcp.MCP,
    mcp.LIST_MCP_RESOURCES,
    mcp.READ_MCP_RESOURCE,
    mcp.MCP_AUTH,
    computer_use.COMPUTER_USE,
    record_screen.RECORD_SCREEN,
    web.FETCH,
    web.WEB_FETCH,
    web.WEB_SEARCH,
    lints.READ_LINTS,
    sem_search.SEM_SEARCH,
    plans.CREATE_PLAN,
    agent_state.REFLECT,
    agent_state.SWITCH_MODE,
    agent_state.TRUNCATED,
    questions.ASK_QUESTION,
    grind.START_GRIND_PLANNING,
    grind.START_GRIND_EXECUTION,
    images.GENERATE_IMAGE,
    reports.REPORT_BUGFIX_RESULTS,
    reports.AI_ATTRIBUTION,
    github.PR_MANAGEMENT,
    shell.SHELL,
    shell.WRITE_SHELL_STDIN,
    shell.AWAIT,
)
