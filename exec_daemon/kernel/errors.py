"""The error a tool call answers when it cannot be run at all."""

from __future__ import annotations

from agent.v1.exec_pb2 import ExecError


class ToolCallError(Exception):
    """The call cannot be run at all; it is answered with ExecError{code, message}."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_exec_error(self) -> ExecError:
        return ExecError(code=self.code, message=self.message)


class RpcFailure(Exception):
    """A file RPC that cannot answer; `code` is the name of a Connect code, lower case."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
