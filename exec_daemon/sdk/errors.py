"""The SDK's exceptions: one class per way a call can fail, whatever carried the failure (an RPC
error code, an ExecError, or a tool result's case such as `rejected` or `timeout`).

    ExecDaemonError                  every failure; `code` is the daemon's word for it
    ├── Unauthenticated              no token, or the wrong one
    ├── Unavailable                  the daemon cannot be reached, or is shutting down
    │   └── ConnectionLost           the connection dropped while the call was running
    ├── Rejected                     the call was not run (a hook, a read-only agent, ...)
    │   └── NeedsApproval            a person may approve it (allowlist / auto_review modes)
    ├── PermissionDenied             the path or action is not allowed
    ├── NotFound                     no such file, shell, MCP server, ...
    ├── InvalidArgument              the call's arguments are wrong
    ├── Timeout                      the command outran its timeout (partial output kept)
    ├── Aborted                      the call was aborted (abort, disconnect, shutdown)
    └── ToolFailed                   the tool ran and failed (`case`: no_match, spawn_error, ...)
"""

from __future__ import annotations

from typing import Any


class ExecDaemonError(Exception):
    """A call to the daemon failed. `code`: the daemon's machine-readable word for why
    ("not_found", "needs_approval", ...); `details`: the message that said so, when there is one
    (a `Rejected`, a `ShellTimeout`, an `ExecError`, ...)."""

    code = "unknown"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details


class Unauthenticated(ExecDaemonError):
    code = "unauthenticated"


class Unavailable(ExecDaemonError):
    code = "unavailable"


class ConnectionLost(Unavailable):
    """The connection to the daemon dropped (it was stopped, killed, or the network failed)
    before the call answered. The call may or may not have run; the next call reconnects."""

    code = "connection_lost"


class Rejected(ExecDaemonError):
    """The call was not run. `details` is the daemon's `Rejected` (reason, source, hook
    messages, allow/block instructions)."""

    code = "rejected"


class NeedsApproval(Rejected):
    """Not run without a person's approval (`needs_approval`) or the reviewer's
    (`needs_review`, auto_review mode): resend it with `run_mode=RUN_EVERYTHING` once approved."""

    code = "needs_approval"


class PermissionDenied(ExecDaemonError):
    code = "permission_denied"


class NotFound(ExecDaemonError):
    code = "not_found"


class InvalidArgument(ExecDaemonError):
    code = "invalid_argument"


class Timeout(ExecDaemonError):
    """The command ran longer than its timeout and was ended. `stdout` / `stderr`: what it
    printed until then."""

    code = "timeout"

    def __init__(
        self, message: str, *, stdout: str = "", stderr: str = "", details: Any = None
    ) -> None:
        super().__init__(message, details=details)
        self.stdout = stdout
        self.stderr = stderr


class Aborted(ExecDaemonError):
    code = "aborted"


class ToolFailed(ExecDaemonError):
    """The tool ran and could not do what was asked; `code` is the result's case or its
    ToolError code (e.g. "no_match", "multiple_matches", "spawn_error", "internal")."""

    code = "tool_failed"


_BY_CODE: dict[str, type[ExecDaemonError]] = {
    "unauthenticated": Unauthenticated,
    "unavailable": Unavailable,
    "permission_denied": PermissionDenied,
    "not_found": NotFound,
    "file_not_found": NotFound,
    "shell_not_found": NotFound,
    "invalid_argument": InvalidArgument,
    "invalid_pattern": InvalidArgument,
    "deadline_exceeded": Timeout,
    "timeout": Timeout,
    "aborted": Aborted,
    "cancelled": Aborted,
    "canceled": Aborted,
}


def error_for(code: str, message: str, details: Any = None) -> ExecDaemonError:
    """The exception for a failure the daemon named `code` (an RPC code, an ExecError's code,
    a ToolError's code or a result case)."""
    kind = _BY_CODE.get(code, ToolFailed)
    if kind is Timeout:
        return Timeout(message, details=details)
    return kind(message, code=code, details=details)
