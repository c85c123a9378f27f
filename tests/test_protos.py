"""The agent.v1 protos: generated code is fresh, and the ToolCall registry is the contract's."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.v1 import tool_call_pb2
from agent.v1.tool_call_pb2 import ToolCall

ROOT = Path(__file__).resolve().parents[1]

# wire-contract.md: field number -> ToolCall variant.
REGISTRY = {
    1: "shell_tool_call", 3: "delete_tool_call", 4: "glob_tool_call", 5: "grep_tool_call",
    8: "read_tool_call", 9: "update_todos_tool_call", 10: "read_todos_tool_call",
    12: "edit_tool_call", 13: "ls_tool_call", 14: "read_lints_tool_call", 15: "mcp_tool_call",
    16: "sem_search_tool_call", 17: "create_plan_tool_call", 18: "web_search_tool_call",
    19: "task_tool_call", 20: "list_mcp_resources_tool_call", 21: "read_mcp_resource_tool_call",
    22: "apply_agent_diff_tool_call", 23: "ask_question_tool_call", 24: "fetch_tool_call",
    25: "switch_mode_tool_call", 28: "generate_image_tool_call", 29: "record_screen_tool_call",
    30: "computer_use_tool_call", 31: "write_shell_stdin_tool_call", 32: "reflect_tool_call",
    33: "setup_vm_environment_tool_call", 34: "truncated_tool_call",
    35: "start_grind_execution_tool_call", 36: "start_grind_planning_tool_call",
    37: "web_fetch_tool_call", 38: "report_bugfix_results_tool_call",
    39: "ai_attribution_tool_call", 40: "pr_management_tool_call", 41: "mcp_auth_tool_call",
    42: "await_tool_call",
}  # fmt: skip


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    ts_out = tmp_path / "ts"
    subprocess.run(
        [str(ROOT / "scripts" / "gen-protos"), str(out), str(ts_out)], check=True, cwd=ROOT
    )
    committed = ROOT / "proto" / "agent" / "v1"
    generated = out / "agent" / "v1"
    names = sorted(p.name for p in generated.iterdir() if p.suffix in (".py", ".pyi", ".binpb"))
    assert names, "gen-protos produced nothing"
    _match, mismatch, missing = filecmp.cmpfiles(generated, committed, names, shallow=False)
    assert not mismatch and not missing, (
        f"generated code is stale, run ./scripts/gen-protos: {mismatch + missing}"
    )
    extra = {
        p.name
        for p in committed.iterdir()
        if p.name.endswith(("_pb2.py", "_pb2.pyi", "_connect.py"))
    } - set(names)
    assert not extra, f"generated files without a .proto: {sorted(extra)}"
    ts_committed = ROOT / "clients" / "typescript" / "src" / "gen" / "agent" / "v1"
    ts_names = sorted(p.name for p in (ts_out / "agent" / "v1").iterdir())
    assert len(ts_names) == len(list(ROOT.glob("proto/agent/v1/*.proto")))
    _match, mismatch, missing = filecmp.cmpfiles(
        ts_out / "agent" / "v1", ts_committed, ts_names, shallow=False
    )
    assert not mismatch and not missing, (
        f"the TypeScript client's generated code is stale, run ./scripts/gen-protos: "
        f"{mismatch + missing}"
    )
    assert sorted(p.name for p in ts_committed.iterdir()) == ts_names


def test_gen_protos_needs_no_sys_path_tricks() -> None:
    probe = "import agent.v1.exec_connect, agent.v1.control_connect; print('ok')"
    python = shutil.which("python", path=str(ROOT / ".venv" / "bin")) or "python"
    result = subprocess.run(
        [python, "-c", probe], cwd="/", capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "ok"


def test_tool_call_has_the_36_variants_at_the_contract_numbers() -> None:
    oneof = ToolCall.DESCRIPTOR.oneofs_by_name["tool"]
    assert {f.number: f.name for f in oneof.fields} == REGISTRY
    assert len(REGISTRY) == 36
    assert not {2, 6, 7, 11, 26, 27} & set(ToolCall.DESCRIPTOR.fields_by_number)


@pytest.mark.parametrize("variant", sorted(REGISTRY.values()))
def test_each_variant_is_args_then_a_result_oneof_with_the_shared_cases(variant: str) -> None:
    message = ToolCall.DESCRIPTOR.fields_by_name[variant].message_type
    assert message.fields_by_name["args"].number == 1
    assert message.fields_by_name["result"].number == 2
    result = message.fields_by_name["result"].message_type
    assert "result" in result.oneofs_by_name
    cases = {f.name for f in result.oneofs_by_name["result"].fields}
    # The dispatch layer answers any tool with these (dispatch.result_case).
    assert {"rejected", "aborted"} <= cases
    assert "error" in cases or variant == "shell_tool_call"


def test_shell_numbers_match_the_wire_contract() -> None:
    shell = (
        tool_call_pb2.DESCRIPTOR.message_types_by_name["ToolCall"]
        .fields_by_name["shell_tool_call"]
        .message_type
    )
    args = shell.fields_by_name["args"].message_type
    assert {
        name: args.fields_by_name[name].number
        for name in (
            "command", "working_directory", "timeout", "tool_call_id", "simple_commands",
            "has_input_redirect", "has_output_redirect", "parsing_result",
            "requested_sandbox_policy", "file_output_threshold_bytes", "is_background",
            "description",
        )
    } == {
        "command": 1, "working_directory": 2, "timeout": 3, "tool_call_id": 4,
        "simple_commands": 5, "has_input_redirect": 6, "has_output_redirect": 7,
        "parsing_result": 8, "requested_sandbox_policy": 9, "file_output_threshold_bytes": 10,
        "is_background": 11, "description": 15,
    }  # fmt: skip
    result = shell.fields_by_name["result"].message_type
    assert {f.name: f.number for f in result.oneofs_by_name["result"].fields}.items() >= {
        "success": 1, "failure": 2, "timeout": 3, "rejected": 4, "spawn_error": 5,
        "permission_denied": 7,
    }.items()  # fmt: skip
    assert {
        name: result.fields_by_name[name].number
        for name in ("sandbox_policy", "is_background", "terminals_folder", "pid")
    } == {"sandbox_policy": 101, "is_background": 102, "terminals_folder": 103, "pid": 104}


def test_grep_numbers_match_the_wire_contract() -> None:
    grep = ToolCall.DESCRIPTOR.fields_by_name["grep_tool_call"].message_type
    args = grep.fields_by_name["args"].message_type
    expected = [
        "pattern", "path", "glob", "output_mode", "context_before", "context_after", "context",
        "case_insensitive", "type", "head_limit", "multiline", "sort", "sort_ascending",
        "tool_call_id", "sandbox_policy", "offset",
    ]  # fmt: skip
    assert {name: args.fields_by_name[name].number for name in expected} == {
        name: number for number, name in enumerate(expected, start=1)
    }
