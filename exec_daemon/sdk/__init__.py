"""The Python SDK: drive a daemon from a script or an agent platform, blocking or async.

    from exec_daemon.sdk import connect

    sandbox = connect("http://127.0.0.1:8080")   # the token: argument, EXEC_DAEMON_AUTH_TOKEN,
                                                 # or ./scripts/serve's .exec-daemon-token
    print(sandbox.shell.run("echo hi").stdout)
    sandbox.files.write("notes.txt", "one\n")
    sandbox.files.edit("notes.txt", "one", "two")
    print(sandbox.git.diff())

`connect_async` gives the same verbs, awaited (exec_daemon/sdk/aio.py). Failures are typed
(exec_daemon/sdk/errors.py): NeedsApproval, Rejected, PermissionDenied, NotFound, Timeout,
Aborted, Unavailable, ConnectionLost, Unauthenticated, InvalidArgument, ToolFailed.
"""

from exec_daemon.client import find_token
from exec_daemon.sdk.aio import (
    AsyncCommandHandle,
    AsyncSandbox,
    AsyncTerminal,
    CommandOutput,
    connect_async,
)
from exec_daemon.sdk.errors import (
    Aborted,
    ConnectionLost,
    ExecDaemonError,
    InvalidArgument,
    NeedsApproval,
    NotFound,
    PermissionDenied,
    Rejected,
    Timeout,
    ToolFailed,
    Unauthenticated,
    Unavailable,
)
from exec_daemon.sdk.results import CommandResult
from exec_daemon.sdk.sync import CommandHandle, Sandbox, Terminal, connect

__all__ = [
    "Aborted",
    "AsyncCommandHandle",
    "AsyncSandbox",
    "AsyncTerminal",
    "CommandHandle",
    "CommandOutput",
    "CommandResult",
    "ConnectionLost",
    "ExecDaemonError",
    "InvalidArgument",
    "NeedsApproval",
    "NotFound",
    "PermissionDenied",
    "Rejected",
    "Sandbox",
    "Terminal",
    "Timeout",
    "ToolFailed",
    "Unauthenticated",
    "Unavailable",
    "connect",
    "connect_async",
    "find_token",
]
