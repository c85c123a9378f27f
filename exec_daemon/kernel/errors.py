"""One error type with a code from a closed set, for failures a caller answers with a typed error."""

from __future__ import annotations

import enum


class ErrorCode(enum.StrEnum):
    """The codes clients see in `ToolError.code` (the values are the wire strings)."""

    UNAVAILABLE = "unavailable"
    TIMEOUT = "timeout"
    FAILED = "failed"
    PERMISSION_DENIED = "permission_denied"


class CodedError(Exception):
    """A failure with a code from `ErrorCode` and a message meant for the client."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
