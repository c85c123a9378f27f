from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class RunMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_MODE_UNSPECIFIED: _ClassVar[RunMode]
    RUN_MODE_RUN_EVERYTHING: _ClassVar[RunMode]
    RUN_MODE_ALLOWLIST: _ClassVar[RunMode]
    RUN_MODE_AUTO_REVIEW: _ClassVar[RunMode]
RUN_MODE_UNSPECIFIED: RunMode
RUN_MODE_RUN_EVERYTHING: RunMode
RUN_MODE_ALLOWLIST: RunMode
RUN_MODE_AUTO_REVIEW: RunMode

class ToolError(_message.Message):
    __slots__ = ("message", "code")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    message: str
    code: str
    def __init__(self, message: _Optional[str] = ..., code: _Optional[str] = ...) -> None: ...

class Rejected(_message.Message):
    __slots__ = ("reason", "needs_approval", "allow_instructions", "block_instructions", "source", "user_message", "agent_message", "needs_review", "sandbox_unavailable")
    REASON_FIELD_NUMBER: _ClassVar[int]
    NEEDS_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    ALLOW_INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    BLOCK_INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    USER_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    AGENT_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NEEDS_REVIEW_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    needs_approval: bool
    allow_instructions: _containers.RepeatedScalarFieldContainer[str]
    block_instructions: _containers.RepeatedScalarFieldContainer[str]
    source: str
    user_message: str
    agent_message: str
    needs_review: bool
    sandbox_unavailable: bool
    def __init__(self, reason: _Optional[str] = ..., needs_approval: _Optional[bool] = ..., allow_instructions: _Optional[_Iterable[str]] = ..., block_instructions: _Optional[_Iterable[str]] = ..., source: _Optional[str] = ..., user_message: _Optional[str] = ..., agent_message: _Optional[str] = ..., needs_review: _Optional[bool] = ..., sandbox_unavailable: _Optional[bool] = ...) -> None: ...

class HookFeedback(_message.Message):
    __slots__ = ("additional_context", "user_messages", "agent_messages", "input_rewritten")
    ADDITIONAL_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    USER_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    AGENT_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    INPUT_REWRITTEN_FIELD_NUMBER: _ClassVar[int]
    additional_context: _containers.RepeatedScalarFieldContainer[str]
    user_messages: _containers.RepeatedScalarFieldContainer[str]
    agent_messages: _containers.RepeatedScalarFieldContainer[str]
    input_rewritten: bool
    def __init__(self, additional_context: _Optional[_Iterable[str]] = ..., user_messages: _Optional[_Iterable[str]] = ..., agent_messages: _Optional[_Iterable[str]] = ..., input_rewritten: _Optional[bool] = ...) -> None: ...

class PermissionDenied(_message.Message):
    __slots__ = ("path", "reason")
    PATH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    path: str
    reason: str
    def __init__(self, path: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class FileNotFound(_message.Message):
    __slots__ = ("path", "reason")
    PATH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    path: str
    reason: str
    def __init__(self, path: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class Aborted(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...
