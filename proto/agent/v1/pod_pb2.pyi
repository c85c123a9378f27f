from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ServiceState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SERVICE_STATE_UNSPECIFIED: _ClassVar[ServiceState]
    SERVICE_STATE_WAITING: _ClassVar[ServiceState]
    SERVICE_STATE_STARTING: _ClassVar[ServiceState]
    SERVICE_STATE_RUNNING: _ClassVar[ServiceState]
    SERVICE_STATE_BACKOFF: _ClassVar[ServiceState]
    SERVICE_STATE_DISABLED: _ClassVar[ServiceState]
    SERVICE_STATE_STOPPING: _ClassVar[ServiceState]
SERVICE_STATE_UNSPECIFIED: ServiceState
SERVICE_STATE_WAITING: ServiceState
SERVICE_STATE_STARTING: ServiceState
SERVICE_STATE_RUNNING: ServiceState
SERVICE_STATE_BACKOFF: ServiceState
SERVICE_STATE_DISABLED: ServiceState
SERVICE_STATE_STOPPING: ServiceState

class Service(_message.Message):
    __slots__ = ("name", "phase", "state", "pid", "restarts", "last_exit", "running_for_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    LAST_EXIT_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FOR_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    phase: int
    state: ServiceState
    pid: int
    restarts: int
    last_exit: str
    running_for_ms: int
    def __init__(self, name: _Optional[str] = ..., phase: _Optional[int] = ..., state: _Optional[_Union[ServiceState, str]] = ..., pid: _Optional[int] = ..., restarts: _Optional[int] = ..., last_exit: _Optional[str] = ..., running_for_ms: _Optional[int] = ...) -> None: ...

class PodHealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PodHealthResponse(_message.Message):
    __slots__ = ("healthy", "frozen", "uptime_ms", "clock_set_unix_ms", "resumes", "services")
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    FROZEN_FIELD_NUMBER: _ClassVar[int]
    UPTIME_MS_FIELD_NUMBER: _ClassVar[int]
    CLOCK_SET_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    RESUMES_FIELD_NUMBER: _ClassVar[int]
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    healthy: bool
    frozen: bool
    uptime_ms: int
    clock_set_unix_ms: int
    resumes: int
    services: _containers.RepeatedCompositeFieldContainer[Service]
    def __init__(self, healthy: _Optional[bool] = ..., frozen: _Optional[bool] = ..., uptime_ms: _Optional[int] = ..., clock_set_unix_ms: _Optional[int] = ..., resumes: _Optional[int] = ..., services: _Optional[_Iterable[_Union[Service, _Mapping]]] = ...) -> None: ...

class ListServicesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListServicesResponse(_message.Message):
    __slots__ = ("services",)
    SERVICES_FIELD_NUMBER: _ClassVar[int]
    services: _containers.RepeatedCompositeFieldContainer[Service]
    def __init__(self, services: _Optional[_Iterable[_Union[Service, _Mapping]]] = ...) -> None: ...

class RestartServiceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RestartServiceResponse(_message.Message):
    __slots__ = ("service",)
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    service: Service
    def __init__(self, service: _Optional[_Union[Service, _Mapping]] = ...) -> None: ...

class PrepareSnapshotRequest(_message.Message):
    __slots__ = ("thaw_after_ms",)
    THAW_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    thaw_after_ms: int
    def __init__(self, thaw_after_ms: _Optional[int] = ...) -> None: ...

class PrepareSnapshotResponse(_message.Message):
    __slots__ = ("frozen", "took_ms")
    FROZEN_FIELD_NUMBER: _ClassVar[int]
    TOOK_MS_FIELD_NUMBER: _ClassVar[int]
    frozen: _containers.RepeatedScalarFieldContainer[str]
    took_ms: int
    def __init__(self, frozen: _Optional[_Iterable[str]] = ..., took_ms: _Optional[int] = ...) -> None: ...

class ResumedRequest(_message.Message):
    __slots__ = ("unix_time_ns", "entropy")
    UNIX_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    ENTROPY_FIELD_NUMBER: _ClassVar[int]
    unix_time_ns: int
    entropy: bytes
    def __init__(self, unix_time_ns: _Optional[int] = ..., entropy: _Optional[bytes] = ...) -> None: ...

class ResumedResponse(_message.Message):
    __slots__ = ("clock_offset_ms", "thawed", "reseeded", "told")
    CLOCK_OFFSET_MS_FIELD_NUMBER: _ClassVar[int]
    THAWED_FIELD_NUMBER: _ClassVar[int]
    RESEEDED_FIELD_NUMBER: _ClassVar[int]
    TOLD_FIELD_NUMBER: _ClassVar[int]
    clock_offset_ms: int
    thawed: _containers.RepeatedScalarFieldContainer[str]
    reseeded: bool
    told: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, clock_offset_ms: _Optional[int] = ..., thawed: _Optional[_Iterable[str]] = ..., reseeded: _Optional[bool] = ..., told: _Optional[_Iterable[str]] = ...) -> None: ...
