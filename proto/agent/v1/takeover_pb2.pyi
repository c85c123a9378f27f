from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetDesktopControlRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetDesktopControlResponse(_message.Message):
    __slots__ = ("person_in_control", "since_unix_ms", "viewers", "controllers", "novnc_port")
    PERSON_IN_CONTROL_FIELD_NUMBER: _ClassVar[int]
    SINCE_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    VIEWERS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLERS_FIELD_NUMBER: _ClassVar[int]
    NOVNC_PORT_FIELD_NUMBER: _ClassVar[int]
    person_in_control: bool
    since_unix_ms: int
    viewers: int
    controllers: int
    novnc_port: int
    def __init__(self, person_in_control: _Optional[bool] = ..., since_unix_ms: _Optional[int] = ..., viewers: _Optional[int] = ..., controllers: _Optional[int] = ..., novnc_port: _Optional[int] = ...) -> None: ...
