"""Every scripts/bench_*.py runs in its quick mode and prints the JSON its goals are judged on.

The benchmarks check each timed call's answer and exit non-zero on a wrong one, so this also
runs the daemon's hot paths (shell, guards, search, reads, PTY, sandbox, screen, tracing)
end to end. Speeds are not judged here: the machine is shared; `--quick` only keeps the
numbers' shape honest (a median and a ratio, both positive numbers).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.v1.shell_pb2 import ShellFailure, ShellResult, ShellSuccess, ShellToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import CallOutcome
from exec_daemon.kernel.config import DEFAULT_IDE_FOLDER
from exec_daemon.rpc.ide import installed_versions
from scripts.benchmarking import WrongAnswer, shell_output
from tests.polling import generous

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
# A cap on a run that hangs, not a goal: bench_tracing's quick mode took 150 s on a loaded
# 2-core machine.
QUICK_SECONDS = generous(360)

# bench -> (a median, a ratio), each a path of keys into its JSON.
FIGURES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "bench_rpc": (
        ("connect-python", "daemon", "exec_stream_ms", "p50"),
        ("grpcio", "ratio_daemon_over_bare", "exec_stream_p50"),
    ),
    "bench_shell": (("exec_daemon", "true", "p50_ms"), ("ratios", "true_p50_vs_bare_bash")),
    "bench_files": (("search", "grep", "tool_p50_ms"), ("search", "glob", "ratio")),
    "bench_pty": (("exec_daemon", "echo_p50_ms"), ("throughput_ratio",)),
    "bench_sandbox": (("sandboxed", "median_ms"), ("sandboxed_over_unsandboxed_median_ratio",)),
    "bench_guards": (
        ("guard_overhead", "allowlisted_shell_call", "end_to_end_call_us"),
        ("guard_overhead", "allowlisted_shell_call", "added_percent_of_call"),
    ),
    "bench_tracing": (
        ("end_to_end", "read_todos", "ghost_mode", "median_us"),
        ("end_to_end", "read_todos", "live", "over_ghost_ratio"),
    ),
    "bench_record": (
        ("read_todos", "record_off", "median_us"),
        ("verdict", "record_on_cpu_over_off"),
    ),
    "bench_computer_use": (
        ("end_to_end_daemon", "screenshot", "median_ms"),
        ("in_process", "click", "xdotool_over_xtest"),
    ),
    "bench_sem_search": (("search_unchanged_p50_ms",), ("after_one_edit_over_unchanged_ratio",)),
    "bench_startup": (("daemon_start_to_ping", "median_ms"), ("daemon_over_bare_median_ratio",)),
    "bench_remote_access": (("warm_call", "p50_ms"), ("cold_over_warm_ratio",)),
    "bench_agent_context": (
        ("get_agent_context", "unchanged_p50_ms"),
        ("get_agent_context", "first_over_unchanged_ratio"),
    ),
    "bench_faults": (
        ("stalled_h2_client", "ping_p50_idle_ms"),
        ("stalled_h2_client", "ping_p50_during_over_idle_ratio"),
    ),
    "bench_lints": (("typescript", "warm_p50_ms"), ("typescript", "cli_over_warm_ratio")),
    "bench_scale": (
        ("summary", "ls_small_p50_ms"),
        ("summary", "glob_ratio_same_work"),
        ("summary", "background_index_p99_ratio"),
    ),
}


def figure(report: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = report
    for key in path:
        assert isinstance(value, dict) and key in value, f"no {'.'.join(path)} in {report}"
        value = value[key]
    return value


def shell_answer(result: ShellResult) -> CallOutcome:
    return CallOutcome(result=ToolCall(shell_tool_call=ShellToolCall(result=result)))


def test_a_wrong_answer_fails_the_benchmark_instead_of_counting() -> None:
    right = shell_answer(ShellResult(success=ShellSuccess(stdout="x\n")))
    assert shell_output(right, stdout="x\n").stdout == "x\n"
    wrong = [
        shell_answer(ShellResult(failure=ShellFailure(exit_code=127))),
        shell_answer(ShellResult(success=ShellSuccess(exit_code=1, stdout="x\n"))),
        shell_answer(ShellResult(success=ShellSuccess(stdout="x"))),  # cut short
        CallOutcome(),  # no answer at all
    ]
    for outcome in wrong:
        with pytest.raises(WrongAnswer):
            shell_output(outcome, stdout="x\n")


def test_every_benchmark_is_run_here() -> None:
    assert sorted(path.stem for path in SCRIPTS.glob("bench_*.py")) == sorted(FIGURES)


@pytest.mark.timeout(QUICK_SECONDS + 30)
@pytest.mark.parametrize("bench", sorted(FIGURES))
def test_benchmark_quick_mode_prints_a_median_and_a_ratio(bench: str) -> None:
    if bench == "bench_remote_access" and not installed_versions(DEFAULT_IDE_FOLDER):
        pytest.skip(f"code-server is not installed in {DEFAULT_IDE_FOLDER} (a long native build)")
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / f"{bench}.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=QUICK_SECONDS,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    for path in FIGURES[bench]:
        value = figure(report, path)
        assert isinstance(value, int | float) and value > 0, f"{'.'.join(path)} = {value!r}"
