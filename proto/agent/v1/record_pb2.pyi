from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetSessionRecordRequest(_message.Message):
    __slots__ = ("agent_id", "since")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    since: int
    def __init__(self, agent_id: _Optional[str] = ..., since: _Optional[int] = ...) -> None: ...

class SessionRecordEntry(_message.Message):
    __slots__ = ("seq", "time_unix_ns", "agent_id", "parent_agent_id", "kind", "json")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    seq: int
    time_unix_ns: int
    agent_id: str
    parent_agent_id: str
    kind: str
    json: str
    def __init__(self, seq: _Optional[int] = ..., time_unix_ns: _Optional[int] = ..., agent_id: _Optional[str] = ..., parent_agent_id: _Optional[str] = ..., kind: _Optional[str] = ..., json: _Optional[str] = ...) -> None: ...
