"""Turns a refusal (agent.v1.Rejected) into the `rejected` case of any tool's result (or, for a
protected path, into its `permission_denied` case, as the file tools answer it themselves)."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from agent.v1.common_pb2 import PermissionDenied, Rejected
from exec_daemon.kernel.context import result_class
from exec_daemon.kernel.errors import CodedError, ErrorCode

# Fields a tool's own rejected message (e.g. ShellRejected) may echo from the call's args.
_ECHOED_ARGS = ("command", "working_directory", "path")


def rejected_result(tool: str, args: Message, rejected: Rejected) -> Message:
    """The result of `tool` with its `rejected` case set from `rejected`.

    Most tools use agent.v1.Rejected itself; shell has ShellRejected, which carries the details
    in `details` and echoes the command.
    """
    result = result_class(tool)()
    if "rejected" not in result.DESCRIPTOR.fields_by_name:
        raise CodedError(ErrorCode.PERMISSION_DENIED, rejected.reason)
    case: Any = result.rejected  # type: ignore[attr-defined]
    case.SetInParent()
    if case.DESCRIPTOR.full_name == Rejected.DESCRIPTOR.full_name:
        case.CopyFrom(rejected)
        return result
    fields = case.DESCRIPTOR.fields_by_name
    if "details" in fields:
        case.details.CopyFrom(rejected)
    if "reason" in fields:
        case.reason = rejected.reason
    if "is_readonly" in fields:
        case.is_readonly = rejected.source == "readonly_agent"
    arg_fields = args.DESCRIPTOR.fields_by_name
    for name in _ECHOED_ARGS:
        if name in fields and name in arg_fields:
            setattr(case, name, getattr(args, name))
    return result


def refused_result(tool: str, args: Message, rejected: Rejected, denied_path: str = "") -> Message:
    """The answer to a refused call: `permission_denied` when a protected path refused it and
    the tool has that case, else `rejected`."""
    if denied_path:
        result = result_class(tool)()
        denied = getattr(result, "permission_denied", None)
        if isinstance(denied, PermissionDenied):
            denied.CopyFrom(PermissionDenied(path=denied_path, reason=rejected.reason))
            return result
    return rejected_result(tool, args, rejected)
