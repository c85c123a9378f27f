"""Every ShellResult the daemon sends is built here (middleware reads the same fields)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agent.v1.shell_pb2 import (
    OutputLocation,
    ShellAborted,
    ShellArgs,
    ShellFailure,
    ShellRejected,
    ShellResult,
    ShellSpawnError,
    ShellSuccess,
    ShellTimeout,
)
from tools.shell.output import CapturedOutput
from tools.shell.session import ExitStatus

Ending = Literal["exited", "timeout", "aborted"]


@dataclass(frozen=True)
class FinishedCall:
    """A foreground call that ran: how it ended and what it printed."""

    ending: Ending
    command: str
    cwd: str
    output: CapturedOutput
    execution_ms: int
    shell_id: int
    pid: int
    status: ExitStatus | None = None
    timeout_ms: int = 0
    reason: str = ""


def _base(args: ShellArgs, terminals_folder: str) -> ShellResult:
    result = ShellResult(terminals_folder=terminals_folder)
    if args.HasField("requested_sandbox_policy"):
        result.sandbox_policy.CopyFrom(args.requested_sandbox_policy)
    return result


def spawn_error(args: ShellArgs, terminals_folder: str, reason: str, cwd: str = "") -> ShellResult:
    result = _base(args, terminals_folder)
    result.spawn_error.CopyFrom(
        ShellSpawnError(
            command=args.command, working_directory=cwd or args.working_directory, reason=reason
        )
    )
    return result


def rejected(args: ShellArgs, terminals_folder: str, reason: str) -> ShellResult:
    result = _base(args, terminals_folder)
    result.rejected.CopyFrom(
        ShellRejected(command=args.command, working_directory=args.working_directory, reason=reason)
    )
    result.rejected.details.reason = reason
    result.rejected.details.source = "invalid_argument"
    return result


def background_started(
    args: ShellArgs, terminals_folder: str, *, shell_id: int, pid: int, output_file: str
) -> ShellResult:
    result = _base(args, terminals_folder)
    result.is_background = True
    result.shell_id = shell_id
    result.pid = pid
    result.output_file = output_file
    return result


def finished(args: ShellArgs, terminals_folder: str, call: FinishedCall) -> ShellResult:
    result = _base(args, terminals_folder)
    result.shell_id = call.shell_id
    result.pid = call.pid
    output = call.output
    location = (
        OutputLocation(file_path=output.spill_path, size_bytes=output.total_bytes)
        if output.spill_path
        else None
    )
    # What every ending reports about the output, the process and the time it took.
    ended = {
        "command": call.command,
        "stdout": output.stdout,
        "stderr": output.stderr,
        "interleaved_output": output.interleaved,
        "output_location": location,
        "shell_id": call.shell_id,
        "pid": call.pid,
        "truncation_note": output.truncation_note,
        "decoded_with_replacement": output.decoded_with_replacement,
        "execution_time": call.execution_ms,
    }
    if call.ending == "timeout":
        result.timeout.CopyFrom(
            ShellTimeout(working_directory=call.cwd, timeout_ms=call.timeout_ms, **ended)  # type: ignore[arg-type]
        )
        return result
    if call.ending == "aborted":
        result.aborted.CopyFrom(
            ShellAborted(working_directory=call.cwd, reason=call.reason, **ended)  # type: ignore[arg-type]
        )
        return result
    status = call.status
    assert status is not None
    fields = {
        **ended,
        "working_directory": status.cwd or call.cwd,
        "exit_code": status.exit_code,
        "signal": status.signal,
        "shell_exited": status.shell_ended,
    }
    if status.exit_code == 0 and not status.signal:
        result.success.CopyFrom(ShellSuccess(**fields))  # type: ignore[arg-type]
    else:
        result.failure.CopyFrom(ShellFailure(**fields))  # type: ignore[arg-type]
    return result
