"""What every scripts/bench_*.py shares: answer checks that fail the run, and the quick mode.

A timed call whose answer is wrong (an error, a failed command, output cut short) must not
count towards a goal: `expect` and `tool_success` raise WrongAnswer, which ends the benchmark
with exit status 1 and no JSON, so a broken daemon can never look fast.
"""

from __future__ import annotations

import argparse
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
