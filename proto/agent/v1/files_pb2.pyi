from agent.v1 import common_pb2 as _common_pb2
from agent.v1 import shell_pb2 as _shell_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReadToolArgs(_message.Message):
    __slots__ = ("path", "offset", "limit", "tool_call_id")
    PATH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    path: str
    offset: int
    limit: int
    tool_call_id: str
    def __init__(self, path: _Optional[str] = ..., offset: _Optional[int] = ..., limit: _Optional[int] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class ReadRange(_message.Message):
    __slots__ = ("start_line", "end_line", "contents")
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    CONTENTS_FIELD_NUMBER: _ClassVar[int]
    start_line: int
    end_line: int
    contents: str
    def __init__(self, start_line: _Optional[int] = ..., end_line: _Optional[int] = ..., contents: _Optional[str] = ...) -> None: ...

class ReadImage(_message.Message):
    __slots__ = ("data", "mime_type", "width", "height")
    DATA_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    mime_type: str
    width: int
    height: int
    def __init__(self, data: _Optional[bytes] = ..., mime_type: _Optional[str] = ..., width: _Optional[int] = ..., height: _Optional[int] = ...) -> None: ...

class ReadPdfPage(_message.Message):
    __slots__ = ("page_number", "text")
    PAGE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    page_number: int
    text: str
    def __init__(self, page_number: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class ReadToolSuccess(_message.Message):
    __slots__ = ("path", "ranges", "total_lines", "file_size", "truncated", "image", "pdf_pages", "total_pages", "truncation_note", "total_lines_unknown")
    PATH_FIELD_NUMBER: _ClassVar[int]
    RANGES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LINES_FIELD_NUMBER: _ClassVar[int]
    FILE_SIZE_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    PDF_PAGES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PAGES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_NOTE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LINES_UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    path: str
    ranges: _containers.RepeatedCompositeFieldContainer[ReadRange]
    total_lines: int
    file_size: int
    truncated: bool
    image: ReadImage
    pdf_pages: _containers.RepeatedCompositeFieldContainer[ReadPdfPage]
    total_pages: int
    truncation_note: str
    total_lines_unknown: bool
    def __init__(self, path: _Optional[str] = ..., ranges: _Optional[_Iterable[_Union[ReadRange, _Mapping]]] = ..., total_lines: _Optional[int] = ..., file_size: _Optional[int] = ..., truncated: _Optional[bool] = ..., image: _Optional[_Union[ReadImage, _Mapping]] = ..., pdf_pages: _Optional[_Iterable[_Union[ReadPdfPage, _Mapping]]] = ..., total_pages: _Optional[int] = ..., truncation_note: _Optional[str] = ..., total_lines_unknown: _Optional[bool] = ...) -> None: ...

class NotTextFile(_message.Message):
    __slots__ = ("path", "reason", "detected_type")
    PATH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DETECTED_TYPE_FIELD_NUMBER: _ClassVar[int]
    path: str
    reason: str
    detected_type: str
    def __init__(self, path: _Optional[str] = ..., reason: _Optional[str] = ..., detected_type: _Optional[str] = ...) -> None: ...

class IsDirectory(_message.Message):
    __slots__ = ("path", "reason")
    PATH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    path: str
    reason: str
    def __init__(self, path: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ReadToolResult(_message.Message):
    __slots__ = ("success", "error", "file_not_found", "permission_denied", "not_text_file", "is_directory", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FILE_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_DENIED_FIELD_NUMBER: _ClassVar[int]
    NOT_TEXT_FILE_FIELD_NUMBER: _ClassVar[int]
    IS_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: ReadToolSuccess
    error: _common_pb2.ToolError
    file_not_found: _common_pb2.FileNotFound
    permission_denied: _common_pb2.PermissionDenied
    not_text_file: NotTextFile
    is_directory: IsDirectory
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[ReadToolSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., file_not_found: _Optional[_Union[_common_pb2.FileNotFound, _Mapping]] = ..., permission_denied: _Optional[_Union[_common_pb2.PermissionDenied, _Mapping]] = ..., not_text_file: _Optional[_Union[NotTextFile, _Mapping]] = ..., is_directory: _Optional[_Union[IsDirectory, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class ReadToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: ReadToolArgs
    result: ReadToolResult
    def __init__(self, args: _Optional[_Union[ReadToolArgs, _Mapping]] = ..., result: _Optional[_Union[ReadToolResult, _Mapping]] = ...) -> None: ...

class NotebookCellEdit(_message.Message):
    __slots__ = ("cell_idx", "is_new_cell", "cell_language")
    CELL_IDX_FIELD_NUMBER: _ClassVar[int]
    IS_NEW_CELL_FIELD_NUMBER: _ClassVar[int]
    CELL_LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    cell_idx: int
    is_new_cell: bool
    cell_language: str
    def __init__(self, cell_idx: _Optional[int] = ..., is_new_cell: _Optional[bool] = ..., cell_language: _Optional[str] = ...) -> None: ...

class EditArgs(_message.Message):
    __slots__ = ("path", "contents", "old_string", "new_string", "replace_all", "tool_call_id", "notebook_cell")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENTS_FIELD_NUMBER: _ClassVar[int]
    OLD_STRING_FIELD_NUMBER: _ClassVar[int]
    NEW_STRING_FIELD_NUMBER: _ClassVar[int]
    REPLACE_ALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NOTEBOOK_CELL_FIELD_NUMBER: _ClassVar[int]
    path: str
    contents: str
    old_string: str
    new_string: str
    replace_all: bool
    tool_call_id: str
    notebook_cell: NotebookCellEdit
    def __init__(self, path: _Optional[str] = ..., contents: _Optional[str] = ..., old_string: _Optional[str] = ..., new_string: _Optional[str] = ..., replace_all: _Optional[bool] = ..., tool_call_id: _Optional[str] = ..., notebook_cell: _Optional[_Union[NotebookCellEdit, _Mapping]] = ...) -> None: ...

class EditSuccess(_message.Message):
    __slots__ = ("path", "lines_added", "lines_removed", "diff", "created", "bytes_written", "replacements")
    PATH_FIELD_NUMBER: _ClassVar[int]
    LINES_ADDED_FIELD_NUMBER: _ClassVar[int]
    LINES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    path: str
    lines_added: int
    lines_removed: int
    diff: str
    created: bool
    bytes_written: int
    replacements: int
    def __init__(self, path: _Optional[str] = ..., lines_added: _Optional[int] = ..., lines_removed: _Optional[int] = ..., diff: _Optional[str] = ..., created: _Optional[bool] = ..., bytes_written: _Optional[int] = ..., replacements: _Optional[int] = ...) -> None: ...

class EditNoMatch(_message.Message):
    __slots__ = ("path", "reason")
    PATH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    path: str
    reason: str
    def __init__(self, path: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class EditMultipleMatches(_message.Message):
    __slots__ = ("path", "match_count", "reason")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MATCH_COUNT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    path: str
    match_count: int
    reason: str
    def __init__(self, path: _Optional[str] = ..., match_count: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class EditResult(_message.Message):
    __slots__ = ("success", "error", "file_not_found", "permission_denied", "no_match", "multiple_matches", "not_text_file", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FILE_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_DENIED_FIELD_NUMBER: _ClassVar[int]
    NO_MATCH_FIELD_NUMBER: _ClassVar[int]
    MULTIPLE_MATCHES_FIELD_NUMBER: _ClassVar[int]
    NOT_TEXT_FILE_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: EditSuccess
    error: _common_pb2.ToolError
    file_not_found: _common_pb2.FileNotFound
    permission_denied: _common_pb2.PermissionDenied
    no_match: EditNoMatch
    multiple_matches: EditMultipleMatches
    not_text_file: NotTextFile
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[EditSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., file_not_found: _Optional[_Union[_common_pb2.FileNotFound, _Mapping]] = ..., permission_denied: _Optional[_Union[_common_pb2.PermissionDenied, _Mapping]] = ..., no_match: _Optional[_Union[EditNoMatch, _Mapping]] = ..., multiple_matches: _Optional[_Union[EditMultipleMatches, _Mapping]] = ..., not_text_file: _Optional[_Union[NotTextFile, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class EditToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: EditArgs
    result: EditResult
    def __init__(self, args: _Optional[_Union[EditArgs, _Mapping]] = ..., result: _Optional[_Union[EditResult, _Mapping]] = ...) -> None: ...

class EditToolCallDelta(_message.Message):
    __slots__ = ("path", "content", "offset")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    path: str
    content: str
    offset: int
    def __init__(self, path: _Optional[str] = ..., content: _Optional[str] = ..., offset: _Optional[int] = ...) -> None: ...

class DeleteArgs(_message.Message):
    __slots__ = ("path", "tool_call_id")
    PATH_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    path: str
    tool_call_id: str
    def __init__(self, path: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class DeleteSuccess(_message.Message):
    __slots__ = ("path", "deleted_file_size")
    PATH_FIELD_NUMBER: _ClassVar[int]
    DELETED_FILE_SIZE_FIELD_NUMBER: _ClassVar[int]
    path: str
    deleted_file_size: int
    def __init__(self, path: _Optional[str] = ..., deleted_file_size: _Optional[int] = ...) -> None: ...

class DeleteResult(_message.Message):
    __slots__ = ("success", "error", "file_not_found", "permission_denied", "is_directory", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FILE_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_DENIED_FIELD_NUMBER: _ClassVar[int]
    IS_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: DeleteSuccess
    error: _common_pb2.ToolError
    file_not_found: _common_pb2.FileNotFound
    permission_denied: _common_pb2.PermissionDenied
    is_directory: IsDirectory
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[DeleteSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., file_not_found: _Optional[_Union[_common_pb2.FileNotFound, _Mapping]] = ..., permission_denied: _Optional[_Union[_common_pb2.PermissionDenied, _Mapping]] = ..., is_directory: _Optional[_Union[IsDirectory, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class DeleteToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: DeleteArgs
    result: DeleteResult
    def __init__(self, args: _Optional[_Union[DeleteArgs, _Mapping]] = ..., result: _Optional[_Union[DeleteResult, _Mapping]] = ...) -> None: ...

class LsArgs(_message.Message):
    __slots__ = ("path", "ignore", "tool_call_id")
    PATH_FIELD_NUMBER: _ClassVar[int]
    IGNORE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    path: str
    ignore: _containers.RepeatedScalarFieldContainer[str]
    tool_call_id: str
    def __init__(self, path: _Optional[str] = ..., ignore: _Optional[_Iterable[str]] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class LsFile(_message.Message):
    __slots__ = ("name", "size", "modified_ms", "is_symlink")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_MS_FIELD_NUMBER: _ClassVar[int]
    IS_SYMLINK_FIELD_NUMBER: _ClassVar[int]
    name: str
    size: int
    modified_ms: int
    is_symlink: bool
    def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ..., modified_ms: _Optional[int] = ..., is_symlink: _Optional[bool] = ...) -> None: ...

class LsDirectoryTreeNode(_message.Message):
    __slots__ = ("abs_path", "children_dirs", "children_files", "omitted_entries")
    ABS_PATH_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_DIRS_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FILES_FIELD_NUMBER: _ClassVar[int]
    OMITTED_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    abs_path: str
    children_dirs: _containers.RepeatedCompositeFieldContainer[LsDirectoryTreeNode]
    children_files: _containers.RepeatedCompositeFieldContainer[LsFile]
    omitted_entries: int
    def __init__(self, abs_path: _Optional[str] = ..., children_dirs: _Optional[_Iterable[_Union[LsDirectoryTreeNode, _Mapping]]] = ..., children_files: _Optional[_Iterable[_Union[LsFile, _Mapping]]] = ..., omitted_entries: _Optional[int] = ...) -> None: ...

class LsSuccess(_message.Message):
    __slots__ = ("root", "total_files", "total_dirs", "truncated")
    ROOT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FILES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_DIRS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    root: LsDirectoryTreeNode
    total_files: int
    total_dirs: int
    truncated: bool
    def __init__(self, root: _Optional[_Union[LsDirectoryTreeNode, _Mapping]] = ..., total_files: _Optional[int] = ..., total_dirs: _Optional[int] = ..., truncated: _Optional[bool] = ...) -> None: ...

class LsResult(_message.Message):
    __slots__ = ("success", "error", "file_not_found", "permission_denied", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FILE_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_DENIED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: LsSuccess
    error: _common_pb2.ToolError
    file_not_found: _common_pb2.FileNotFound
    permission_denied: _common_pb2.PermissionDenied
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[LsSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., file_not_found: _Optional[_Union[_common_pb2.FileNotFound, _Mapping]] = ..., permission_denied: _Optional[_Union[_common_pb2.PermissionDenied, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class LsToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: LsArgs
    result: LsResult
    def __init__(self, args: _Optional[_Union[LsArgs, _Mapping]] = ..., result: _Optional[_Union[LsResult, _Mapping]] = ...) -> None: ...

class GlobToolArgs(_message.Message):
    __slots__ = ("glob_pattern", "target_directory", "tool_call_id")
    GLOB_PATTERN_FIELD_NUMBER: _ClassVar[int]
    TARGET_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    glob_pattern: str
    target_directory: str
    tool_call_id: str
    def __init__(self, glob_pattern: _Optional[str] = ..., target_directory: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class GlobToolSuccess(_message.Message):
    __slots__ = ("pattern", "path", "files", "total_files", "truncated")
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FILES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    path: str
    files: _containers.RepeatedScalarFieldContainer[str]
    total_files: int
    truncated: bool
    def __init__(self, pattern: _Optional[str] = ..., path: _Optional[str] = ..., files: _Optional[_Iterable[str]] = ..., total_files: _Optional[int] = ..., truncated: _Optional[bool] = ...) -> None: ...

class GlobToolResult(_message.Message):
    __slots__ = ("success", "error", "file_not_found", "permission_denied", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FILE_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_DENIED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: GlobToolSuccess
    error: _common_pb2.ToolError
    file_not_found: _common_pb2.FileNotFound
    permission_denied: _common_pb2.PermissionDenied
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[GlobToolSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., file_not_found: _Optional[_Union[_common_pb2.FileNotFound, _Mapping]] = ..., permission_denied: _Optional[_Union[_common_pb2.PermissionDenied, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class GlobToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: GlobToolArgs
    result: GlobToolResult
    def __init__(self, args: _Optional[_Union[GlobToolArgs, _Mapping]] = ..., result: _Optional[_Union[GlobToolResult, _Mapping]] = ...) -> None: ...

class GrepArgs(_message.Message):
    __slots__ = ("pattern", "path", "glob", "output_mode", "context_before", "context_after", "context", "case_insensitive", "type", "head_limit", "multiline", "sort", "sort_ascending", "tool_call_id", "sandbox_policy", "offset")
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    GLOB_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_MODE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_AFTER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CASE_INSENSITIVE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    HEAD_LIMIT_FIELD_NUMBER: _ClassVar[int]
    MULTILINE_FIELD_NUMBER: _ClassVar[int]
    SORT_FIELD_NUMBER: _ClassVar[int]
    SORT_ASCENDING_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_POLICY_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    path: str
    glob: str
    output_mode: str
    context_before: int
    context_after: int
    context: int
    case_insensitive: bool
    type: str
    head_limit: int
    multiline: bool
    sort: str
    sort_ascending: bool
    tool_call_id: str
    sandbox_policy: _shell_pb2.SandboxPolicy
    offset: int
    def __init__(self, pattern: _Optional[str] = ..., path: _Optional[str] = ..., glob: _Optional[str] = ..., output_mode: _Optional[str] = ..., context_before: _Optional[int] = ..., context_after: _Optional[int] = ..., context: _Optional[int] = ..., case_insensitive: _Optional[bool] = ..., type: _Optional[str] = ..., head_limit: _Optional[int] = ..., multiline: _Optional[bool] = ..., sort: _Optional[str] = ..., sort_ascending: _Optional[bool] = ..., tool_call_id: _Optional[str] = ..., sandbox_policy: _Optional[_Union[_shell_pb2.SandboxPolicy, _Mapping]] = ..., offset: _Optional[int] = ...) -> None: ...

class GrepLine(_message.Message):
    __slots__ = ("line_number", "content", "is_context")
    LINE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IS_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    line_number: int
    content: str
    is_context: bool
    def __init__(self, line_number: _Optional[int] = ..., content: _Optional[str] = ..., is_context: _Optional[bool] = ...) -> None: ...

class GrepFileMatches(_message.Message):
    __slots__ = ("file", "lines")
    FILE_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    file: str
    lines: _containers.RepeatedCompositeFieldContainer[GrepLine]
    def __init__(self, file: _Optional[str] = ..., lines: _Optional[_Iterable[_Union[GrepLine, _Mapping]]] = ...) -> None: ...

class GrepFileCount(_message.Message):
    __slots__ = ("file", "count")
    FILE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    file: str
    count: int
    def __init__(self, file: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class GrepSuccess(_message.Message):
    __slots__ = ("pattern", "path", "output_mode", "matches", "files", "counts", "total_matches", "total_files", "truncated")
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_MODE_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MATCHES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FILES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    path: str
    output_mode: str
    matches: _containers.RepeatedCompositeFieldContainer[GrepFileMatches]
    files: _containers.RepeatedScalarFieldContainer[str]
    counts: _containers.RepeatedCompositeFieldContainer[GrepFileCount]
    total_matches: int
    total_files: int
    truncated: bool
    def __init__(self, pattern: _Optional[str] = ..., path: _Optional[str] = ..., output_mode: _Optional[str] = ..., matches: _Optional[_Iterable[_Union[GrepFileMatches, _Mapping]]] = ..., files: _Optional[_Iterable[str]] = ..., counts: _Optional[_Iterable[_Union[GrepFileCount, _Mapping]]] = ..., total_matches: _Optional[int] = ..., total_files: _Optional[int] = ..., truncated: _Optional[bool] = ...) -> None: ...

class GrepInvalidPattern(_message.Message):
    __slots__ = ("pattern", "reason")
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    pattern: str
    reason: str
    def __init__(self, pattern: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class GrepResult(_message.Message):
    __slots__ = ("success", "error", "file_not_found", "invalid_pattern", "rejected", "aborted", "permission_denied")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FILE_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    INVALID_PATTERN_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_DENIED_FIELD_NUMBER: _ClassVar[int]
    success: GrepSuccess
    error: _common_pb2.ToolError
    file_not_found: _common_pb2.FileNotFound
    invalid_pattern: GrepInvalidPattern
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    permission_denied: _common_pb2.PermissionDenied
    def __init__(self, success: _Optional[_Union[GrepSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., file_not_found: _Optional[_Union[_common_pb2.FileNotFound, _Mapping]] = ..., invalid_pattern: _Optional[_Union[GrepInvalidPattern, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ..., permission_denied: _Optional[_Union[_common_pb2.PermissionDenied, _Mapping]] = ...) -> None: ...

class GrepToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: GrepArgs
    result: GrepResult
    def __init__(self, args: _Optional[_Union[GrepArgs, _Mapping]] = ..., result: _Optional[_Union[GrepResult, _Mapping]] = ...) -> None: ...

class ApplyAgentDiffArgs(_message.Message):
    __slots__ = ("diff", "base_directory", "tool_call_id")
    DIFF_FIELD_NUMBER: _ClassVar[int]
    BASE_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    diff: str
    base_directory: str
    tool_call_id: str
    def __init__(self, diff: _Optional[str] = ..., base_directory: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class AppliedFile(_message.Message):
    __slots__ = ("path", "lines_added", "lines_removed", "created", "deleted")
    PATH_FIELD_NUMBER: _ClassVar[int]
    LINES_ADDED_FIELD_NUMBER: _ClassVar[int]
    LINES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    path: str
    lines_added: int
    lines_removed: int
    created: bool
    deleted: bool
    def __init__(self, path: _Optional[str] = ..., lines_added: _Optional[int] = ..., lines_removed: _Optional[int] = ..., created: _Optional[bool] = ..., deleted: _Optional[bool] = ...) -> None: ...

class ApplyAgentDiffSuccess(_message.Message):
    __slots__ = ("files",)
    FILES_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[AppliedFile]
    def __init__(self, files: _Optional[_Iterable[_Union[AppliedFile, _Mapping]]] = ...) -> None: ...

class DiffDoesNotApply(_message.Message):
    __slots__ = ("path", "reason", "hunk_index")
    PATH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    HUNK_INDEX_FIELD_NUMBER: _ClassVar[int]
    path: str
    reason: str
    hunk_index: int
    def __init__(self, path: _Optional[str] = ..., reason: _Optional[str] = ..., hunk_index: _Optional[int] = ...) -> None: ...

class ApplyAgentDiffResult(_message.Message):
    __slots__ = ("success", "error", "does_not_apply", "permission_denied", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DOES_NOT_APPLY_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_DENIED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: ApplyAgentDiffSuccess
    error: _common_pb2.ToolError
    does_not_apply: DiffDoesNotApply
    permission_denied: _common_pb2.PermissionDenied
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[ApplyAgentDiffSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., does_not_apply: _Optional[_Union[DiffDoesNotApply, _Mapping]] = ..., permission_denied: _Optional[_Union[_common_pb2.PermissionDenied, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class ApplyAgentDiffToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: ApplyAgentDiffArgs
    result: ApplyAgentDiffResult
    def __init__(self, args: _Optional[_Union[ApplyAgentDiffArgs, _Mapping]] = ..., result: _Optional[_Union[ApplyAgentDiffResult, _Mapping]] = ...) -> None: ...

class ReadLintsArgs(_message.Message):
    __slots__ = ("paths", "tool_call_id")
    PATHS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    paths: _containers.RepeatedScalarFieldContainer[str]
    tool_call_id: str
    def __init__(self, paths: _Optional[_Iterable[str]] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class LintDiagnostic(_message.Message):
    __slots__ = ("severity", "message", "source", "code", "start_line", "start_column", "end_line", "end_column")
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    START_COLUMN_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    END_COLUMN_FIELD_NUMBER: _ClassVar[int]
    severity: str
    message: str
    source: str
    code: str
    start_line: int
    start_column: int
    end_line: int
    end_column: int
    def __init__(self, severity: _Optional[str] = ..., message: _Optional[str] = ..., source: _Optional[str] = ..., code: _Optional[str] = ..., start_line: _Optional[int] = ..., start_column: _Optional[int] = ..., end_line: _Optional[int] = ..., end_column: _Optional[int] = ...) -> None: ...

class FileLints(_message.Message):
    __slots__ = ("path", "diagnostics")
    PATH_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    path: str
    diagnostics: _containers.RepeatedCompositeFieldContainer[LintDiagnostic]
    def __init__(self, path: _Optional[str] = ..., diagnostics: _Optional[_Iterable[_Union[LintDiagnostic, _Mapping]]] = ...) -> None: ...

class SkippedLintPath(_message.Message):
    __slots__ = ("path", "reason")
    PATH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    path: str
    reason: str
    def __init__(self, path: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ReadLintsSuccess(_message.Message):
    __slots__ = ("files", "total_diagnostics", "unsupported_paths", "linters", "skipped", "truncated")
    FILES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    UNSUPPORTED_PATHS_FIELD_NUMBER: _ClassVar[int]
    LINTERS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[FileLints]
    total_diagnostics: int
    unsupported_paths: _containers.RepeatedScalarFieldContainer[str]
    linters: _containers.RepeatedScalarFieldContainer[str]
    skipped: _containers.RepeatedCompositeFieldContainer[SkippedLintPath]
    truncated: bool
    def __init__(self, files: _Optional[_Iterable[_Union[FileLints, _Mapping]]] = ..., total_diagnostics: _Optional[int] = ..., unsupported_paths: _Optional[_Iterable[str]] = ..., linters: _Optional[_Iterable[str]] = ..., skipped: _Optional[_Iterable[_Union[SkippedLintPath, _Mapping]]] = ..., truncated: _Optional[bool] = ...) -> None: ...

class ReadLintsResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: ReadLintsSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[ReadLintsSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class ReadLintsToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: ReadLintsArgs
    result: ReadLintsResult
    def __init__(self, args: _Optional[_Union[ReadLintsArgs, _Mapping]] = ..., result: _Optional[_Union[ReadLintsResult, _Mapping]] = ...) -> None: ...
