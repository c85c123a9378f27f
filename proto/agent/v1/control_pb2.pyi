from agent.v1 import common_pb2 as _common_pb2
from agent.v1 import context_pb2 as _context_pb2
from agent.v1 import exec_pb2 as _exec_pb2
from agent.v1 import mcp_pb2 as _mcp_pb2
from agent.v1 import pool_pb2 as _pool_pb2
from agent.v1 import questions_pb2 as _questions_pb2
from agent.v1 import record_pb2 as _record_pb2
from agent.v1 import takeover_pb2 as _takeover_pb2
from agent.v1 import tool_call_pb2 as _tool_call_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PingRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PingResponse(_message.Message):
    __slots__ = ("version", "uptime_ms", "pid", "workspace")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPTIME_MS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    version: str
    uptime_ms: int
    pid: int
    workspace: str
    def __init__(self, version: _Optional[str] = ..., uptime_ms: _Optional[int] = ..., pid: _Optional[int] = ..., workspace: _Optional[str] = ...) -> None: ...

class ExecRequest(_message.Message):
    __slots__ = ("tool_call", "agent_id", "run_mode")
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_MODE_FIELD_NUMBER: _ClassVar[int]
    tool_call: _tool_call_pb2.ToolCall
    agent_id: str
    run_mode: _common_pb2.RunMode
    def __init__(self, tool_call: _Optional[_Union[_tool_call_pb2.ToolCall, _Mapping]] = ..., agent_id: _Optional[str] = ..., run_mode: _Optional[_Union[_common_pb2.RunMode, str]] = ...) -> None: ...

class ListDirectoryRequest(_message.Message):
    __slots__ = ("path",)
    PATH_FIELD_NUMBER: _ClassVar[int]
    path: str
    def __init__(self, path: _Optional[str] = ...) -> None: ...

class DirectoryEntry(_message.Message):
    __slots__ = ("name", "is_directory", "is_symlink", "size", "modified_ms", "mode")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IS_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    IS_SYMLINK_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_MS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    name: str
    is_directory: bool
    is_symlink: bool
    size: int
    modified_ms: int
    mode: int
    def __init__(self, name: _Optional[str] = ..., is_directory: _Optional[bool] = ..., is_symlink: _Optional[bool] = ..., size: _Optional[int] = ..., modified_ms: _Optional[int] = ..., mode: _Optional[int] = ...) -> None: ...

class ListDirectoryResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[DirectoryEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[DirectoryEntry, _Mapping]]] = ...) -> None: ...

class ReadTextFileRequest(_message.Message):
    __slots__ = ("path", "offset", "length")
    PATH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    path: str
    offset: int
    length: int
    def __init__(self, path: _Optional[str] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class ReadTextFileResponse(_message.Message):
    __slots__ = ("content", "total_size", "eof", "next_offset")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    content: str
    total_size: int
    eof: bool
    next_offset: int
    def __init__(self, content: _Optional[str] = ..., total_size: _Optional[int] = ..., eof: _Optional[bool] = ..., next_offset: _Optional[int] = ...) -> None: ...

class WriteTextFileRequest(_message.Message):
    __slots__ = ("path", "content")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    path: str
    content: str
    def __init__(self, path: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class WriteTextFileResponse(_message.Message):
    __slots__ = ("bytes_written",)
    BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    bytes_written: int
    def __init__(self, bytes_written: _Optional[int] = ...) -> None: ...

class ReadBinaryFileRequest(_message.Message):
    __slots__ = ("path", "offset", "length")
    PATH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    path: str
    offset: int
    length: int
    def __init__(self, path: _Optional[str] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class ReadBinaryFileResponse(_message.Message):
    __slots__ = ("data", "total_size", "eof")
    DATA_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    total_size: int
    eof: bool
    def __init__(self, data: _Optional[bytes] = ..., total_size: _Optional[int] = ..., eof: _Optional[bool] = ...) -> None: ...

class WriteBinaryFileRequest(_message.Message):
    __slots__ = ("path", "data", "append")
    PATH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    APPEND_FIELD_NUMBER: _ClassVar[int]
    path: str
    data: bytes
    append: bool
    def __init__(self, path: _Optional[str] = ..., data: _Optional[bytes] = ..., append: _Optional[bool] = ...) -> None: ...

class WriteBinaryFileResponse(_message.Message):
    __slots__ = ("bytes_written", "total_size")
    BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    bytes_written: int
    total_size: int
    def __init__(self, bytes_written: _Optional[int] = ..., total_size: _Optional[int] = ...) -> None: ...

class GetDiffRequest(_message.Message):
    __slots__ = ("ref", "paths")
    REF_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    ref: str
    paths: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ref: _Optional[str] = ..., paths: _Optional[_Iterable[str]] = ...) -> None: ...

class GetDiffResponse(_message.Message):
    __slots__ = ("diff", "omitted")
    DIFF_FIELD_NUMBER: _ClassVar[int]
    OMITTED_FIELD_NUMBER: _ClassVar[int]
    diff: str
    omitted: _containers.RepeatedCompositeFieldContainer[GetDiffOmittedFile]
    def __init__(self, diff: _Optional[str] = ..., omitted: _Optional[_Iterable[_Union[GetDiffOmittedFile, _Mapping]]] = ...) -> None: ...

class GetDiffOmittedFile(_message.Message):
    __slots__ = ("path", "size", "reason")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    path: str
    size: int
    reason: str
    def __init__(self, path: _Optional[str] = ..., size: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class GetWorkspaceChangesHashRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetWorkspaceChangesHashResponse(_message.Message):
    __slots__ = ("hash",)
    HASH_FIELD_NUMBER: _ClassVar[int]
    hash: str
    def __init__(self, hash: _Optional[str] = ...) -> None: ...

class RefreshGithubAccessTokenRequest(_message.Message):
    __slots__ = ("access_token",)
    ACCESS_TOKEN_FIELD_NUMBER: _ClassVar[int]
    access_token: str
    def __init__(self, access_token: _Optional[str] = ...) -> None: ...

class RefreshGithubAccessTokenResponse(_message.Message):
    __slots__ = ("updated",)
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    updated: bool
    def __init__(self, updated: _Optional[bool] = ...) -> None: ...

class WarmRemoteAccessServerRequest(_message.Message):
    __slots__ = ("commit",)
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    commit: str
    def __init__(self, commit: _Optional[str] = ...) -> None: ...

class WarmRemoteAccessServerResponse(_message.Message):
    __slots__ = ("ready", "message")
    READY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ready: bool
    message: str
    def __init__(self, ready: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class DownloadCursorServerRequest(_message.Message):
    __slots__ = ("commit", "url")
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    commit: str
    url: str
    def __init__(self, commit: _Optional[str] = ..., url: _Optional[str] = ...) -> None: ...

class DownloadCursorServerResponse(_message.Message):
    __slots__ = ("path", "size_bytes", "sha256")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    path: str
    size_bytes: int
    sha256: str
    def __init__(self, path: _Optional[str] = ..., size_bytes: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class Artifact(_message.Message):
    __slots__ = ("path", "size_bytes", "mime_type", "modified_ms", "uploaded")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_MS_FIELD_NUMBER: _ClassVar[int]
    UPLOADED_FIELD_NUMBER: _ClassVar[int]
    path: str
    size_bytes: int
    mime_type: str
    modified_ms: int
    uploaded: bool
    def __init__(self, path: _Optional[str] = ..., size_bytes: _Optional[int] = ..., mime_type: _Optional[str] = ..., modified_ms: _Optional[int] = ..., uploaded: _Optional[bool] = ...) -> None: ...

class ListArtifactsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListArtifactsResponse(_message.Message):
    __slots__ = ("artifacts",)
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    artifacts: _containers.RepeatedCompositeFieldContainer[Artifact]
    def __init__(self, artifacts: _Optional[_Iterable[_Union[Artifact, _Mapping]]] = ...) -> None: ...

class UploadArtifactsRequest(_message.Message):
    __slots__ = ("paths", "upload_url")
    PATHS_FIELD_NUMBER: _ClassVar[int]
    UPLOAD_URL_FIELD_NUMBER: _ClassVar[int]
    paths: _containers.RepeatedScalarFieldContainer[str]
    upload_url: str
    def __init__(self, paths: _Optional[_Iterable[str]] = ..., upload_url: _Optional[str] = ...) -> None: ...

class ArtifactFailure(_message.Message):
    __slots__ = ("path", "reason")
    PATH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    path: str
    reason: str
    def __init__(self, path: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class UploadArtifactsResponse(_message.Message):
    __slots__ = ("uploaded", "failed", "failures")
    UPLOADED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    uploaded: _containers.RepeatedCompositeFieldContainer[Artifact]
    failed: _containers.RepeatedScalarFieldContainer[str]
    failures: _containers.RepeatedCompositeFieldContainer[ArtifactFailure]
    def __init__(self, uploaded: _Optional[_Iterable[_Union[Artifact, _Mapping]]] = ..., failed: _Optional[_Iterable[str]] = ..., failures: _Optional[_Iterable[_Union[ArtifactFailure, _Mapping]]] = ...) -> None: ...

class GetMcpRefreshTokensRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetMcpRefreshTokensResponse(_message.Message):
    __slots__ = ("tokens",)
    class TokensEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _mcp_pb2.McpOAuthStoredData
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_mcp_pb2.McpOAuthStoredData, _Mapping]] = ...) -> None: ...
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.MessageMap[str, _mcp_pb2.McpOAuthStoredData]
    def __init__(self, tokens: _Optional[_Mapping[str, _mcp_pb2.McpOAuthStoredData]] = ...) -> None: ...

class UpdateEnvironmentVariablesRequest(_message.Message):
    __slots__ = ("env", "replace", "unset")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENV_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    UNSET_FIELD_NUMBER: _ClassVar[int]
    env: _containers.ScalarMap[str, str]
    replace: bool
    unset: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, env: _Optional[_Mapping[str, str]] = ..., replace: _Optional[bool] = ..., unset: _Optional[_Iterable[str]] = ...) -> None: ...

class UpdateEnvironmentVariablesResponse(_message.Message):
    __slots__ = ("variable_count",)
    VARIABLE_COUNT_FIELD_NUMBER: _ClassVar[int]
    variable_count: int
    def __init__(self, variable_count: _Optional[int] = ...) -> None: ...
