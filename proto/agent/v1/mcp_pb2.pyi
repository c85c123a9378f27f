from agent.v1 import common_pb2 as _common_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class McpArgs(_message.Message):
    __slots__ = ("name", "args", "tool_call_id", "provider_identifier", "tool_name", "timeout_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    args: _struct_pb2.Struct
    tool_call_id: str
    provider_identifier: str
    tool_name: str
    timeout_ms: int
    def __init__(self, name: _Optional[str] = ..., args: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tool_call_id: _Optional[str] = ..., provider_identifier: _Optional[str] = ..., tool_name: _Optional[str] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class McpContent(_message.Message):
    __slots__ = ("text", "image", "resource", "audio", "resource_link")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    AUDIO_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_LINK_FIELD_NUMBER: _ClassVar[int]
    text: str
    image: McpImage
    resource: McpEmbeddedResource
    audio: McpAudio
    resource_link: McpResourceLink
    def __init__(self, text: _Optional[str] = ..., image: _Optional[_Union[McpImage, _Mapping]] = ..., resource: _Optional[_Union[McpEmbeddedResource, _Mapping]] = ..., audio: _Optional[_Union[McpAudio, _Mapping]] = ..., resource_link: _Optional[_Union[McpResourceLink, _Mapping]] = ...) -> None: ...

class McpAudio(_message.Message):
    __slots__ = ("data", "mime_type")
    DATA_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    mime_type: str
    def __init__(self, data: _Optional[bytes] = ..., mime_type: _Optional[str] = ...) -> None: ...

class McpResourceLink(_message.Message):
    __slots__ = ("uri", "name", "description", "mime_type")
    URI_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    uri: str
    name: str
    description: str
    mime_type: str
    def __init__(self, uri: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., mime_type: _Optional[str] = ...) -> None: ...

class McpImage(_message.Message):
    __slots__ = ("data", "mime_type")
    DATA_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    mime_type: str
    def __init__(self, data: _Optional[bytes] = ..., mime_type: _Optional[str] = ...) -> None: ...

class McpEmbeddedResource(_message.Message):
    __slots__ = ("uri", "mime_type", "text", "blob")
    URI_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    BLOB_FIELD_NUMBER: _ClassVar[int]
    uri: str
    mime_type: str
    text: str
    blob: bytes
    def __init__(self, uri: _Optional[str] = ..., mime_type: _Optional[str] = ..., text: _Optional[str] = ..., blob: _Optional[bytes] = ...) -> None: ...

class McpSuccess(_message.Message):
    __slots__ = ("content", "is_error", "structured_content")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_CONTENT_FIELD_NUMBER: _ClassVar[int]
    content: _containers.RepeatedCompositeFieldContainer[McpContent]
    is_error: bool
    structured_content: _struct_pb2.Struct
    def __init__(self, content: _Optional[_Iterable[_Union[McpContent, _Mapping]]] = ..., is_error: _Optional[bool] = ..., structured_content: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class McpToolNotFound(_message.Message):
    __slots__ = ("name", "reason", "available_tools")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_TOOLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    available_tools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ..., available_tools: _Optional[_Iterable[str]] = ...) -> None: ...

class McpResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "permission_denied", "tool_not_found", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_DENIED_FIELD_NUMBER: _ClassVar[int]
    TOOL_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: McpSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    permission_denied: _common_pb2.PermissionDenied
    tool_not_found: McpToolNotFound
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[McpSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., permission_denied: _Optional[_Union[_common_pb2.PermissionDenied, _Mapping]] = ..., tool_not_found: _Optional[_Union[McpToolNotFound, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class McpToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: McpArgs
    result: McpResult
    def __init__(self, args: _Optional[_Union[McpArgs, _Mapping]] = ..., result: _Optional[_Union[McpResult, _Mapping]] = ...) -> None: ...

class ListMcpResourcesArgs(_message.Message):
    __slots__ = ("server", "tool_call_id")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    server: str
    tool_call_id: str
    def __init__(self, server: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class McpResource(_message.Message):
    __slots__ = ("server", "uri", "name", "description", "mime_type")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    server: str
    uri: str
    name: str
    description: str
    mime_type: str
    def __init__(self, server: _Optional[str] = ..., uri: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., mime_type: _Optional[str] = ...) -> None: ...

class ListMcpResourcesSuccess(_message.Message):
    __slots__ = ("resources", "failures")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[McpResource]
    failures: _containers.RepeatedCompositeFieldContainer[McpServerFailure]
    def __init__(self, resources: _Optional[_Iterable[_Union[McpResource, _Mapping]]] = ..., failures: _Optional[_Iterable[_Union[McpServerFailure, _Mapping]]] = ...) -> None: ...

class McpServerFailure(_message.Message):
    __slots__ = ("server", "message")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    server: str
    message: str
    def __init__(self, server: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ListMcpResourcesResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: ListMcpResourcesSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[ListMcpResourcesSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class ListMcpResourcesToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: ListMcpResourcesArgs
    result: ListMcpResourcesResult
    def __init__(self, args: _Optional[_Union[ListMcpResourcesArgs, _Mapping]] = ..., result: _Optional[_Union[ListMcpResourcesResult, _Mapping]] = ...) -> None: ...

class ReadMcpResourceArgs(_message.Message):
    __slots__ = ("server", "uri", "download_path", "tool_call_id")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    DOWNLOAD_PATH_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    server: str
    uri: str
    download_path: str
    tool_call_id: str
    def __init__(self, server: _Optional[str] = ..., uri: _Optional[str] = ..., download_path: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class ReadMcpResourceSuccess(_message.Message):
    __slots__ = ("uri", "mime_type", "text", "blob", "download_path", "size_bytes")
    URI_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    BLOB_FIELD_NUMBER: _ClassVar[int]
    DOWNLOAD_PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    uri: str
    mime_type: str
    text: str
    blob: bytes
    download_path: str
    size_bytes: int
    def __init__(self, uri: _Optional[str] = ..., mime_type: _Optional[str] = ..., text: _Optional[str] = ..., blob: _Optional[bytes] = ..., download_path: _Optional[str] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class ReadMcpResourceResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "not_found", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: ReadMcpResourceSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    not_found: _common_pb2.FileNotFound
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[ReadMcpResourceSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., not_found: _Optional[_Union[_common_pb2.FileNotFound, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class ReadMcpResourceToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: ReadMcpResourceArgs
    result: ReadMcpResourceResult
    def __init__(self, args: _Optional[_Union[ReadMcpResourceArgs, _Mapping]] = ..., result: _Optional[_Union[ReadMcpResourceResult, _Mapping]] = ...) -> None: ...

class McpAuthArgs(_message.Message):
    __slots__ = ("server", "tool_call_id", "authorization_code", "state", "redirect_uri")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_CODE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_URI_FIELD_NUMBER: _ClassVar[int]
    server: str
    tool_call_id: str
    authorization_code: str
    state: str
    redirect_uri: str
    def __init__(self, server: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., authorization_code: _Optional[str] = ..., state: _Optional[str] = ..., redirect_uri: _Optional[str] = ...) -> None: ...

class McpAuthSuccess(_message.Message):
    __slots__ = ("server", "status", "authorization_url")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_URL_FIELD_NUMBER: _ClassVar[int]
    server: str
    status: str
    authorization_url: str
    def __init__(self, server: _Optional[str] = ..., status: _Optional[str] = ..., authorization_url: _Optional[str] = ...) -> None: ...

class McpAuthResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: McpAuthSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[McpAuthSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class McpAuthToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: McpAuthArgs
    result: McpAuthResult
    def __init__(self, args: _Optional[_Union[McpAuthArgs, _Mapping]] = ..., result: _Optional[_Union[McpAuthResult, _Mapping]] = ...) -> None: ...

class McpOAuthStoredData(_message.Message):
    __slots__ = ("refresh_token", "client_id", "client_secret", "redirect_uris", "access_token")
    REFRESH_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SECRET_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_URIS_FIELD_NUMBER: _ClassVar[int]
    ACCESS_TOKEN_FIELD_NUMBER: _ClassVar[int]
    refresh_token: str
    client_id: str
    client_secret: str
    redirect_uris: _containers.RepeatedScalarFieldContainer[str]
    access_token: str
    def __init__(self, refresh_token: _Optional[str] = ..., client_id: _Optional[str] = ..., client_secret: _Optional[str] = ..., redirect_uris: _Optional[_Iterable[str]] = ..., access_token: _Optional[str] = ...) -> None: ...
