from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class InitSandboxRequest(_message.Message):
    __slots__ = ("auth_token", "env", "user", "workspace", "metadata", "secret_names")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    AUTH_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SECRET_NAMES_FIELD_NUMBER: _ClassVar[int]
    auth_token: str
    env: _containers.ScalarMap[str, str]
    user: str
    workspace: str
    metadata: _containers.ScalarMap[str, str]
    secret_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, auth_token: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., user: _Optional[str] = ..., workspace: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., secret_names: _Optional[_Iterable[str]] = ...) -> None: ...

class InitSandboxResponse(_message.Message):
    __slots__ = ("workspace", "user", "start_ms")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    START_MS_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    user: str
    start_ms: int
    def __init__(self, workspace: _Optional[str] = ..., user: _Optional[str] = ..., start_ms: _Optional[int] = ...) -> None: ...

class GetSandboxInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetSandboxInfoResponse(_message.Message):
    __slots__ = ("version", "uptime_ms", "claimed", "state", "metadata", "cpu_count", "memory_used_bytes", "memory_total_bytes", "disk_used_bytes", "disk_total_bytes", "process_count", "workspace", "user")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPTIME_MS_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CPU_COUNT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    DISK_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    DISK_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROCESS_COUNT_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    version: str
    uptime_ms: int
    claimed: bool
    state: str
    metadata: _containers.ScalarMap[str, str]
    cpu_count: int
    memory_used_bytes: int
    memory_total_bytes: int
    disk_used_bytes: int
    disk_total_bytes: int
    process_count: int
    workspace: str
    user: str
    def __init__(self, version: _Optional[str] = ..., uptime_ms: _Optional[int] = ..., claimed: _Optional[bool] = ..., state: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., cpu_count: _Optional[int] = ..., memory_used_bytes: _Optional[int] = ..., memory_total_bytes: _Optional[int] = ..., disk_used_bytes: _Optional[int] = ..., disk_total_bytes: _Optional[int] = ..., process_count: _Optional[int] = ..., workspace: _Optional[str] = ..., user: _Optional[str] = ...) -> None: ...
