"""The registry: one complete ToolSpec per ToolCall variant (exec_daemon/kernel/spec.py)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from google.protobuf.message import Message

from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.kernel.spec import (
    EVERYTHING,
    GUARDED_FIELDS,
    Effect,
    HookEvents,
    Hooks,
    RunModeRule,
    Subject,
    ToolSpec,
    hook_name_of,
)
from exec_daemon.registry import SPECS

VARIANTS = sorted(field.name for field in ToolCall.DESCRIPTOR.oneofs_by_name["tool"].fields)
BY_VARIANT = {spec.variant: spec for spec in SPECS}

# One args message per variant, with every field a subject can come from filled in.
SAMPLE_ARGS: dict[str, dict[str, Any]] = {
    "shell_tool_call": {"command": "ls -la"},
    "read_tool_call": {"path": "a.txt"},
    "edit_tool_call": {"path": "b.txt", "contents": "x"},
    "delete_tool_call": {"path": "c.txt"},
    "ls_tool_call": {"path": "src"},
    "glob_tool_call": {"target_directory": "src", "glob_pattern": "*.py"},
    "grep_tool_call": {"path": "src", "pattern": "x"},
    "apply_agent_diff_tool_call": {
        "base_directory": "sub",
        "diff": "--- a/d.txt\n+++ b/d.txt\n@@ -1 +1 @@\n-a\n+b\n",
    },
    "mcp_tool_call": {"provider_identifier": "github", "tool_name": "create_issue"},
    "list_mcp_resources_tool_call": {"server": "docs"},
    "read_mcp_resource_tool_call": {"server": "docs", "uri": "x://y", "download_path": "e.bin"},
    "mcp_auth_tool_call": {"server": "docs"},
    "fetch_tool_call": {"url": "https://example.com/", "method": "POST"},
    "web_fetch_tool_call": {"url": "https://example.com/"},
    "read_lints_tool_call": {"paths": ["f.py"]},
    "sem_search_tool_call": {"query": "q", "target_directories": ["src"]},
    "create_plan_tool_call": {"name": "My Plan"},
    "setup_vm_environment_tool_call": {"install_command": "make deps"},
}

# What each sample's subject must say (variants not listed have no subject).
EXPECTED_SUBJECTS: dict[str, Subject] = {
    "shell_tool_call": Subject(command="ls -la"),
    "read_tool_call": Subject(paths_read=("a.txt",)),
    "edit_tool_call": Subject(paths_written=("b.txt",)),
    "delete_tool_call": Subject(paths_written=("c.txt",)),
    "ls_tool_call": Subject(paths_read=("src",)),
    "glob_tool_call": Subject(paths_read=("src",)),
    "grep_tool_call": Subject(paths_read=("src",)),
    "apply_agent_diff_tool_call": Subject(paths_written=("sub/d.txt",)),
    "mcp_tool_call": Subject(mcp_server="github", mcp_tool="create_issue"),
    "list_mcp_resources_tool_call": Subject(mcp_server="docs"),
    "read_mcp_resource_tool_call": Subject(mcp_server="docs", paths_written=("e.bin",)),
    "mcp_auth_tool_call": Subject(mcp_server="docs"),
    "fetch_tool_call": Subject(url="https://example.com/"),
    "web_fetch_tool_call": Subject(url="https://example.com/"),
    "read_lints_tool_call": Subject(paths_read=("f.py",)),
    "sem_search_tool_call": Subject(paths_read=("src",)),
    "create_plan_tool_call": Subject(paths_written=(".cursor/plans/my-plan.md",)),
    "setup_vm_environment_tool_call": Subject(command="make deps"),
}


def sample_args(variant: str) -> Message:
    args_type = ToolCall.DESCRIPTOR.fields_by_name[variant].message_type.fields_by_name["args"]
    args: Message = args_type.message_type._concrete_class(**SAMPLE_ARGS.get(variant, {}))
    return args


def test_the_registry_has_one_spec_per_variant() -> None:
    variants = [spec.variant for spec in SPECS]
    assert len(variants) == len(set(variants)), "a variant is declared twice"
    assert sorted(variants) == VARIANTS


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_spec_is_complete(variant: str) -> None:
    spec = BY_VARIANT[variant]
    assert spec.undeclared() == [], f"{variant} leaves {spec.undeclared()} undeclared"
    assert inspect.iscoroutinefunction(spec.handler), variant
    assert len(inspect.signature(spec.handler).parameters) == 2, variant
    assert isinstance(spec.effects, Effect)
    assert isinstance(spec.run_mode, RunModeRule)
    assert isinstance(spec.hooks, Hooks) and spec.hooks.name
    subject = spec.call_subject(sample_args(variant))
    assert subject == EXPECTED_SUBJECTS.get(variant, Subject()), subject


def test_a_spec_that_declares_nothing_is_treated_as_the_most_dangerous() -> None:
    async def handler(args: Any, ctx: Any) -> Message:
        raise AssertionError("never called")

    spec = ToolSpec("new_thing_tool_call", handler)
    assert spec.undeclared() == list(GUARDED_FIELDS)
    subject = spec.call_subject(sample_args("read_todos_tool_call"))
    assert spec.call_effects(subject) == EVERYTHING
    assert spec.run_mode_rule() is RunModeRule.NEEDS_APPROVAL
    assert spec.hook_view() == Hooks("NewThing", events=HookEvents.GENERIC)


def test_a_subject_can_only_narrow_what_the_spec_declares() -> None:
    fetch = BY_VARIANT["fetch_tool_call"]
    get, post = (sample_args("fetch_tool_call") for _ in range(2))
    get.method = "get"  # type: ignore[attr-defined]
    assert fetch.call_effects(fetch.call_subject(get)) == Effect.NONE
    assert fetch.call_effects(fetch.call_subject(post)) == Effect.MACHINE
    resource = BY_VARIANT["read_mcp_resource_tool_call"]
    reading = sample_args("read_mcp_resource_tool_call")
    reading.download_path = ""  # type: ignore[attr-defined]
    assert resource.call_effects(resource.call_subject(reading)) == Effect.NONE


def test_hook_names_follow_the_reference_list() -> None:
    # HooksToolName of the reference daemon (seed 004, section 14.4).
    reference = {
        "shell_tool_call": "Shell",
        "write_shell_stdin_tool_call": "WriteShellStdin",
        "computer_use_tool_call": "ComputerUse",
        "delete_tool_call": "Delete",
        "read_lints_tool_call": "ReadLints",
        "fetch_tool_call": "Fetch",
        "grep_tool_call": "Grep",
        "ls_tool_call": "LS",
        "list_mcp_resources_tool_call": "ListMcpResources",
        "read_mcp_resource_tool_call": "FetchMcpResource",
        "read_tool_call": "Read",
        "record_screen_tool_call": "RecordScreen",
        "edit_tool_call": "Write",
    }
    for variant, name in reference.items():
        assert BY_VARIANT[variant].hook_view().name == name, variant
    assert hook_name_of("read_todos_tool_call") == "ReadTodos"
