from agent.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TodoStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TODO_STATUS_UNSPECIFIED: _ClassVar[TodoStatus]
    TODO_STATUS_PENDING: _ClassVar[TodoStatus]
    TODO_STATUS_IN_PROGRESS: _ClassVar[TodoStatus]
    TODO_STATUS_COMPLETED: _ClassVar[TodoStatus]
    TODO_STATUS_CANCELLED: _ClassVar[TodoStatus]
TODO_STATUS_UNSPECIFIED: TodoStatus
TODO_STATUS_PENDING: TodoStatus
TODO_STATUS_IN_PROGRESS: TodoStatus
TODO_STATUS_COMPLETED: TodoStatus
TODO_STATUS_CANCELLED: TodoStatus

class TodoItem(_message.Message):
    __slots__ = ("id", "content", "status", "created_at_ms", "updated_at_ms")
    ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    id: str
    content: str
    status: TodoStatus
    created_at_ms: int
    updated_at_ms: int
    def __init__(self, id: _Optional[str] = ..., content: _Optional[str] = ..., status: _Optional[_Union[TodoStatus, str]] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ...) -> None: ...

class UpdateTodosArgs(_message.Message):
    __slots__ = ("todos", "merge", "tool_call_id")
    TODOS_FIELD_NUMBER: _ClassVar[int]
    MERGE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    todos: _containers.RepeatedCompositeFieldContainer[TodoItem]
    merge: bool
    tool_call_id: str
    def __init__(self, todos: _Optional[_Iterable[_Union[TodoItem, _Mapping]]] = ..., merge: _Optional[bool] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class UpdateTodosSuccess(_message.Message):
    __slots__ = ("todos", "total_count", "was_merge")
    TODOS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    WAS_MERGE_FIELD_NUMBER: _ClassVar[int]
    todos: _containers.RepeatedCompositeFieldContainer[TodoItem]
    total_count: int
    was_merge: bool
    def __init__(self, todos: _Optional[_Iterable[_Union[TodoItem, _Mapping]]] = ..., total_count: _Optional[int] = ..., was_merge: _Optional[bool] = ...) -> None: ...

class UpdateTodosResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: UpdateTodosSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[UpdateTodosSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class UpdateTodosToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: UpdateTodosArgs
    result: UpdateTodosResult
    def __init__(self, args: _Optional[_Union[UpdateTodosArgs, _Mapping]] = ..., result: _Optional[_Union[UpdateTodosResult, _Mapping]] = ...) -> None: ...

class ReadTodosArgs(_message.Message):
    __slots__ = ("status_filter", "id_filter", "tool_call_id")
    STATUS_FILTER_FIELD_NUMBER: _ClassVar[int]
    ID_FILTER_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    status_filter: _containers.RepeatedScalarFieldContainer[TodoStatus]
    id_filter: _containers.RepeatedScalarFieldContainer[str]
    tool_call_id: str
    def __init__(self, status_filter: _Optional[_Iterable[_Union[TodoStatus, str]]] = ..., id_filter: _Optional[_Iterable[str]] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class ReadTodosSuccess(_message.Message):
    __slots__ = ("todos", "total_count")
    TODOS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    todos: _containers.RepeatedCompositeFieldContainer[TodoItem]
    total_count: int
    def __init__(self, todos: _Optional[_Iterable[_Union[TodoItem, _Mapping]]] = ..., total_count: _Optional[int] = ...) -> None: ...

class ReadTodosResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: ReadTodosSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[ReadTodosSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class ReadTodosToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: ReadTodosArgs
    result: ReadTodosResult
    def __init__(self, args: _Optional[_Union[ReadTodosArgs, _Mapping]] = ..., result: _Optional[_Union[ReadTodosResult, _Mapping]] = ...) -> None: ...

class CreatePlanArgs(_message.Message):
    __slots__ = ("name", "overview", "plan", "todos", "tool_call_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OVERVIEW_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    TODOS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    overview: str
    plan: str
    todos: _containers.RepeatedCompositeFieldContainer[TodoItem]
    tool_call_id: str
    def __init__(self, name: _Optional[str] = ..., overview: _Optional[str] = ..., plan: _Optional[str] = ..., todos: _Optional[_Iterable[_Union[TodoItem, _Mapping]]] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class CreatePlanSuccess(_message.Message):
    __slots__ = ("plan_path", "todo_count", "replaced", "todos")
    PLAN_PATH_FIELD_NUMBER: _ClassVar[int]
    TODO_COUNT_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    TODOS_FIELD_NUMBER: _ClassVar[int]
    plan_path: str
    todo_count: int
    replaced: bool
    todos: _containers.RepeatedCompositeFieldContainer[TodoItem]
    def __init__(self, plan_path: _Optional[str] = ..., todo_count: _Optional[int] = ..., replaced: _Optional[bool] = ..., todos: _Optional[_Iterable[_Union[TodoItem, _Mapping]]] = ...) -> None: ...

class CreatePlanResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: CreatePlanSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[CreatePlanSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class CreatePlanToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: CreatePlanArgs
    result: CreatePlanResult
    def __init__(self, args: _Optional[_Union[CreatePlanArgs, _Mapping]] = ..., result: _Optional[_Union[CreatePlanResult, _Mapping]] = ...) -> None: ...
