"""The daemon's one coded error: a failure with a code from `ErrorCode` and a message for the user.

A tool answers it as its result's `error{code, message}` (or the case its result has for it); a
call that cannot be run at all is answered with `ExecError{code, message}` (the dispatcher); a
ControlService RPC answers the Connect code of the same name. Messages never hold exception
text or tracebacks: they say what the user can do about it.
"""

from __future__ import annotations

from enum import StrEnum

from agent.v1.exec_pb2 import ExecError


class ErrorCode(StrEnum):
    """Every code the daemon's errors carry (the strings are on the wire: never rename one)."""

    # Connect / gRPC status codes (lower case): RPCs answer them as such.
    INVALID_ARGUMENT = "invalid_argument"
    NOT_FOUND = "not_found"
    ALREADY_EXISTS = "already_exists"
    PERMISSION_DENIED = "permission_denied"
    FAILED_PRECONDITION = "failed_precondition"
    OUT_OF_RANGE = "out_of_range"
    RESOURCE_EXHAUSTED = "resource_exhausted"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    UNAVAILABLE = "unavailable"
    UNIMPLEMENTED = "unimplemented"
    INTERNAL = "internal"
    ABORTED = "aborted"
    # Files.
    IO_ERROR = "io_error"
    IS_DIRECTORY = "is_directory"
    NOT_A_DIRECTORY = "not_a_directory"
    NO_SPACE = "no_space"
    READ_ONLY = "read_only"
    TOO_LARGE = "too_large"
    TIMEOUT = "timeout"
    # Terminals.
    EXITED = "exited"
    SPAWN_FAILED = "spawn_failed"
    # Web.
    INVALID_URL = "invalid_url"
    DNS_FAILURE = "dns_failure"
    PRIVATE_ADDRESS = "private_address"
    CONNECT_FAILED = "connect_failed"
    CONNECTION_REFUSED = "connection_refused"
    REQUEST_FAILED = "request_failed"
    TOO_MANY_REDIRECTS = "too_many_redirects"
    # MCP and its OAuth.
    UNKNOWN_SERVER = "unknown_server"
    AMBIGUOUS_TOOL = "ambiguous_tool"
    BACKEND_TOOL = "backend_tool"
    INVALID_CONFIG = "invalid_config"
    SERVER_START_FAILED = "server_start_failed"
    SERVER_CRASHED = "server_crashed"
    SERVER_ERROR = "server_error"
    SERVER_UNREACHABLE = "server_unreachable"
    UNAUTHORIZED = "unauthorized"
    AUTHORIZATION_REQUIRED = "authorization_required"
    NOT_OAUTH = "not_oauth"
    NO_OAUTH_METADATA = "no_oauth_metadata"
    NO_PENDING_AUTHORIZATION = "no_pending_authorization"
    STATE_MISMATCH = "state_mismatch"
    REGISTRATION_FAILED = "registration_failed"
    REGISTRATION_UNSUPPORTED = "registration_unsupported"
    TOKEN_REQUEST_FAILED = "token_request_failed"
    # The screen.
    DISPLAY_UNAVAILABLE = "display_unavailable"
    NOT_RECORDING = "not_recording"
    RECORDING_FAILED = "recording_failed"
    ACTION_FAILED = "action_failed"
    INVALID_COORDINATE = "invalid_coordinate"
    UNKNOWN_KEY = "unknown_key"
    PERSON_IN_CONTROL = "person_in_control"


class CodedError(Exception):
    """A failure the user is told about as `code` + `message`."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_exec_error(self) -> ExecError:
        return ExecError(code=self.code, message=self.message)
