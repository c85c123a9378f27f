from agent.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WebSearchArgs(_message.Message):
    __slots__ = ("search_term", "explanation", "tool_call_id")
    SEARCH_TERM_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    search_term: str
    explanation: str
    tool_call_id: str
    def __init__(self, search_term: _Optional[str] = ..., explanation: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class WebSearchReference(_message.Message):
    __slots__ = ("title", "url", "chunk")
    TITLE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    title: str
    url: str
    chunk: str
    def __init__(self, title: _Optional[str] = ..., url: _Optional[str] = ..., chunk: _Optional[str] = ...) -> None: ...

class WebSearchSuccess(_message.Message):
    __slots__ = ("references",)
    REFERENCES_FIELD_NUMBER: _ClassVar[int]
    references: _containers.RepeatedCompositeFieldContainer[WebSearchReference]
    def __init__(self, references: _Optional[_Iterable[_Union[WebSearchReference, _Mapping]]] = ...) -> None: ...

class WebSearchResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: WebSearchSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[WebSearchSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class WebSearchToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: WebSearchArgs
    result: WebSearchResult
    def __init__(self, args: _Optional[_Union[WebSearchArgs, _Mapping]] = ..., result: _Optional[_Union[WebSearchResult, _Mapping]] = ...) -> None: ...

class FetchArgs(_message.Message):
    __slots__ = ("url", "method", "headers", "body", "timeout_ms", "tool_call_id", "max_bytes")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    URL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    url: str
    method: str
    headers: _containers.ScalarMap[str, str]
    body: bytes
    timeout_ms: int
    tool_call_id: str
    max_bytes: int
    def __init__(self, url: _Optional[str] = ..., method: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., body: _Optional[bytes] = ..., timeout_ms: _Optional[int] = ..., tool_call_id: _Optional[str] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class FetchSuccess(_message.Message):
    __slots__ = ("url", "final_url", "status_code", "headers", "content_type", "text", "body", "truncated", "elapsed_ms")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    URL_FIELD_NUMBER: _ClassVar[int]
    FINAL_URL_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    url: str
    final_url: str
    status_code: int
    headers: _containers.ScalarMap[str, str]
    content_type: str
    text: str
    body: bytes
    truncated: bool
    elapsed_ms: int
    def __init__(self, url: _Optional[str] = ..., final_url: _Optional[str] = ..., status_code: _Optional[int] = ..., headers: _Optional[_Mapping[str, str]] = ..., content_type: _Optional[str] = ..., text: _Optional[str] = ..., body: _Optional[bytes] = ..., truncated: _Optional[bool] = ..., elapsed_ms: _Optional[int] = ...) -> None: ...

class FetchResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: FetchSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[FetchSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class FetchToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: FetchArgs
    result: FetchResult
    def __init__(self, args: _Optional[_Union[FetchArgs, _Mapping]] = ..., result: _Optional[_Union[FetchResult, _Mapping]] = ...) -> None: ...

class WebFetchArgs(_message.Message):
    __slots__ = ("url", "tool_call_id", "timeout_ms")
    URL_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    url: str
    tool_call_id: str
    timeout_ms: int
    def __init__(self, url: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class WebFetchSuccess(_message.Message):
    __slots__ = ("url", "final_url", "title", "markdown", "content_type", "truncated", "status_code")
    URL_FIELD_NUMBER: _ClassVar[int]
    FINAL_URL_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    MARKDOWN_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    url: str
    final_url: str
    title: str
    markdown: str
    content_type: str
    truncated: bool
    status_code: int
    def __init__(self, url: _Optional[str] = ..., final_url: _Optional[str] = ..., title: _Optional[str] = ..., markdown: _Optional[str] = ..., content_type: _Optional[str] = ..., truncated: _Optional[bool] = ..., status_code: _Optional[int] = ...) -> None: ...

class WebFetchResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: WebFetchSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[WebFetchSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class WebFetchToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: WebFetchArgs
    result: WebFetchResult
    def __init__(self, args: _Optional[_Union[WebFetchArgs, _Mapping]] = ..., result: _Optional[_Union[WebFetchResult, _Mapping]] = ...) -> None: ...
