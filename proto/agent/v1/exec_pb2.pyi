from agent.v1 import common_pb2 as _common_pb2
from agent.v1 import tool_call_pb2 as _tool_call_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExecStreamElement(_message.Message):
    __slots__ = ("exec_client_message", "exec_client_control_message")
    EXEC_CLIENT_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    EXEC_CLIENT_CONTROL_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    exec_client_message: ExecClientMessage
    exec_client_control_message: ExecClientControlMessage
    def __init__(self, exec_client_message: _Optional[_Union[ExecClientMessage, _Mapping]] = ..., exec_client_control_message: _Optional[_Union[ExecClientControlMessage, _Mapping]] = ...) -> None: ...

class ExecClientMessage(_message.Message):
    __slots__ = ("id", "tool_call", "agent_id", "run_mode")
    ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_MODE_FIELD_NUMBER: _ClassVar[int]
    id: int
    tool_call: _tool_call_pb2.ToolCall
    agent_id: str
    run_mode: _common_pb2.RunMode
    def __init__(self, id: _Optional[int] = ..., tool_call: _Optional[_Union[_tool_call_pb2.ToolCall, _Mapping]] = ..., agent_id: _Optional[str] = ..., run_mode: _Optional[_Union[_common_pb2.RunMode, str]] = ...) -> None: ...

class ExecClientControlMessage(_message.Message):
    __slots__ = ("abort", "heartbeat", "stream_close")
    ABORT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    STREAM_CLOSE_FIELD_NUMBER: _ClassVar[int]
    abort: AbortToolCall
    heartbeat: Heartbeat
    stream_close: StreamClose
    def __init__(self, abort: _Optional[_Union[AbortToolCall, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., stream_close: _Optional[_Union[StreamClose, _Mapping]] = ...) -> None: ...

class AbortToolCall(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("sent_at_ms",)
    SENT_AT_MS_FIELD_NUMBER: _ClassVar[int]
    sent_at_ms: int
    def __init__(self, sent_at_ms: _Optional[int] = ...) -> None: ...

class StreamClose(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExecServerMessage(_message.Message):
    __slots__ = ("id", "tool_call_delta", "tool_call_result", "error", "heartbeat")
    ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    id: int
    tool_call_delta: _tool_call_pb2.ToolCallDelta
    tool_call_result: _tool_call_pb2.ToolCall
    error: ExecError
    heartbeat: Heartbeat
    def __init__(self, id: _Optional[int] = ..., tool_call_delta: _Optional[_Union[_tool_call_pb2.ToolCallDelta, _Mapping]] = ..., tool_call_result: _Optional[_Union[_tool_call_pb2.ToolCall, _Mapping]] = ..., error: _Optional[_Union[ExecError, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ...) -> None: ...

class ExecError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...
