"""Turning the daemon's answers into plain values or typed exceptions (exec_daemon/sdk/errors.py).

Every tool's result is a oneof named `result`: `success` (shell: `success` or `failure`, by exit
code) is the answer; every other case becomes an exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from connectrpc.errors import ConnectError
from google.protobuf import text_format
from google.protobuf.message import Message

from agent.v1.exec_pb2 import ExecError
from agent.v1.shell_pb2 import ShellResult
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import CallOutcome, StreamEndedError
from exec_daemon.sdk.errors import (
    ConnectionLost,
    ExecDaemonError,
    InvalidArgument,
    NeedsApproval,
    Rejected,
    Timeout,
    error_for,
)

# The ToolCall variant of each args message: call(ReadToolArgs(...)) needs no ToolCall around it.
VARIANT_OF_ARGS: dict[str, str] = {
    field.message_type.fields_by_name["args"].message_type.full_name: field.name
    for field in ToolCall.DESCRIPTOR.oneofs_by_name["tool"].fields
}


@dataclass(frozen=True)
class CommandResult:
    """How a shell command ended (exit code 0 or not: both are results, not exceptions).

    `spill`: when the output was longer than the daemon keeps in memory, the path (on the
    daemon's machine) of the file holding all of it (`files.download` fetches it); `stdout` and
    `stderr` then hold its start and end, and `truncation_note` says what was cut."""

    exit_code: int
    stdout: str
    stderr: str
    spill: str | None = None
    signal: str = ""
    shell_id: int = 0
    pid: int = 0
    execution_ms: int = 0
    truncation_note: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def command_result(result: ShellResult) -> CommandResult:
    """The CommandResult of a shell call that ran to its end, else the exception for its case."""
    case = result.WhichOneof("result")
    if case not in ("success", "failure"):
        raise case_error(result)
    ended = getattr(result, case)
    return CommandResult(
        exit_code=ended.exit_code,
        stdout=ended.stdout,
        stderr=ended.stderr,
        spill=ended.output_location.file_path or None,
        signal=ended.signal,
        shell_id=ended.shell_id,
        pid=ended.pid,
        execution_ms=ended.execution_time,
        truncation_note=ended.truncation_note,
    )


def success_of(result: Message) -> Any:
    """The `success` case of a tool's result (or the result itself when no case is set: a
    background shell's start), else the exception for its case."""
    case = result.WhichOneof("result")
    if case is None:
        return result
    if case == "success":
        return result.success  # type: ignore[attr-defined]
    raise case_error(result)


def _text(value: Message) -> str:
    for name in ("reason", "message"):
        text = getattr(value, name, "")
        if isinstance(text, str) and text:
            return text
    return text_format.MessageToString(value, as_one_line=True)


def case_error(result: Message) -> ExecDaemonError:
    """The exception for a result case other than success (and shell's failure)."""
    case = result.WhichOneof("result")
    if case is None:
        return ExecDaemonError("the daemon answered with no result case", code="internal")
    value = getattr(result, case)
    if case == "rejected":
        details = value.details if value.DESCRIPTOR.name == "ShellRejected" else value
        if details.source == "invalid_argument":  # the call's own arguments (a bad timeout)
            return InvalidArgument(_text(value), details=details)
        kind = NeedsApproval if details.needs_approval or details.needs_review else Rejected
        return kind(_text(value), details=details)
    if case == "timeout":
        return Timeout(
            f"timed out after {getattr(value, 'timeout_ms', 0)} ms",
            stdout=getattr(value, "stdout", ""),
            stderr=getattr(value, "stderr", ""),
            details=value,
        )
    if case == "error":
        return error_for(value.code or "internal", value.message, value)
    return error_for(case, _text(value), value)


def outcome_result(outcome: CallOutcome) -> Message:
    """The variant's result message of an answered call, or the exception for its ExecError."""
    if outcome.error is not None:
        raise exec_error(outcome.error)
    assert outcome.result is not None
    variant = outcome.result.WhichOneof("tool")
    if variant is None:
        raise ExecDaemonError("the daemon answered with no tool", code="internal")
    result: Message = getattr(outcome.result, variant).result
    return result


def exec_error(error: ExecError) -> ExecDaemonError:
    return error_for(error.code or "internal", error.message, error)


def rpc_error(exc: ConnectError) -> ExecDaemonError:
    """The exception for an RPC's error (a refused connection is `unavailable`)."""
    return error_for(exc.code.value, exc.message, exc)


def stream_error(exc: StreamEndedError) -> ConnectionLost:
    return ConnectionLost(str(exc))
