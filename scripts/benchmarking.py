"""What every scripts/bench_*.py shares: answer checks that fail the run, and the quick mode.

A timed call whose answer is wrong (an error, a failed command, output cut short) must not
count towards a goal: `expect` and `tool_success` raise WrongAnswer, which ends the benchmark
with exit status 1 and no JSON, so a broken daemon can never look fast.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from exec_daemon.client import CallOutcome


class WrongAnswer(AssertionError):
    """A measured call answered something other than what the benchmark asked for."""


def expect(condition: bool, what: str) -> None:
    """Fails the benchmark unless `condition` holds; `what` says what was expected."""
    if not condition:
        raise WrongAnswer(what)


def tool_success(outcome: CallOutcome) -> Any:
    """The `success` message of a tool call's result, or WrongAnswer saying what came instead."""
    expect(outcome.error is None, f"the call answered an error: {outcome.error}")
    expect(outcome.result is not None, "the call ended without a result")
    assert outcome.result is not None
    variant = outcome.result.WhichOneof("tool")
    expect(variant is not None, "the result names no tool")
    result = getattr(outcome.result, str(variant)).result
    expect(result.WhichOneof("result") == "success", f"the call did not succeed: {result}")
    return result.success


def shell_output(outcome: CallOutcome, stdout: str | None = "", exit_code: int = 0) -> Any:
    """The ShellSuccess of a shell call that exited with `exit_code` and printed `stdout`
    (None: output not checked here)."""
    success = tool_success(outcome)
    expect(success.exit_code == exit_code, f"exit code {success.exit_code}, not {exit_code}")
    if stdout is not None:
        expect(success.stdout == stdout, f"stdout {success.stdout[:200]!r}, not {stdout!r}")
    return success


def add_quick_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a few iterations on small inputs (seconds, for the test suite); answers still checked",
    )


def thread_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) so far of the threads of `pid` alive now, to the nanosecond
    (/proc/PID/task/*/schedstat). A thread that already ended is not counted: for a path
    whose work runs in short-lived threads, use process_cpu_seconds. CPU time, unlike wall
    time, hardly moves with load from other work on the machine."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
    return total / 1e9


def process_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) so far of `pid`, ended threads included, in clock ticks
    (/proc/PID/stat: 10 ms steps), for runs that use at least a few hundred ms of it."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
