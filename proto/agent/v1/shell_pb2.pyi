from agent.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SandboxPolicy(_message.Message):
    __slots__ = ("type", "network_access", "additional_readwrite_paths", "additional_readonly_paths", "block_git_writes", "disable_tmp_write", "network_allow", "network_deny", "network_mode", "notes")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        TYPE_UNSPECIFIED: _ClassVar[SandboxPolicy.Type]
        TYPE_INSECURE_NONE: _ClassVar[SandboxPolicy.Type]
        TYPE_WORKSPACE_READWRITE: _ClassVar[SandboxPolicy.Type]
        TYPE_WORKSPACE_READONLY: _ClassVar[SandboxPolicy.Type]
    TYPE_UNSPECIFIED: SandboxPolicy.Type
    TYPE_INSECURE_NONE: SandboxPolicy.Type
    TYPE_WORKSPACE_READWRITE: SandboxPolicy.Type
    TYPE_WORKSPACE_READONLY: SandboxPolicy.Type
    class NetworkMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        NETWORK_MODE_UNSPECIFIED: _ClassVar[SandboxPolicy.NetworkMode]
        NETWORK_MODE_NONE: _ClassVar[SandboxPolicy.NetworkMode]
        NETWORK_MODE_PROXY: _ClassVar[SandboxPolicy.NetworkMode]
        NETWORK_MODE_FULL: _ClassVar[SandboxPolicy.NetworkMode]
    NETWORK_MODE_UNSPECIFIED: SandboxPolicy.NetworkMode
    NETWORK_MODE_NONE: SandboxPolicy.NetworkMode
    NETWORK_MODE_PROXY: SandboxPolicy.NetworkMode
    NETWORK_MODE_FULL: SandboxPolicy.NetworkMode
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NETWORK_ACCESS_FIELD_NUMBER: _ClassVar[int]
    ADDITIONAL_READWRITE_PATHS_FIELD_NUMBER: _ClassVar[int]
    ADDITIONAL_READONLY_PATHS_FIELD_NUMBER: _ClassVar[int]
    BLOCK_GIT_WRITES_FIELD_NUMBER: _ClassVar[int]
    DISABLE_TMP_WRITE_FIELD_NUMBER: _ClassVar[int]
    NETWORK_ALLOW_FIELD_NUMBER: _ClassVar[int]
    NETWORK_DENY_FIELD_NUMBER: _ClassVar[int]
    NETWORK_MODE_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    type: SandboxPolicy.Type
    network_access: bool
    additional_readwrite_paths: _containers.RepeatedScalarFieldContainer[str]
    additional_readonly_paths: _containers.RepeatedScalarFieldContainer[str]
    block_git_writes: bool
    disable_tmp_write: bool
    network_allow: _containers.RepeatedScalarFieldContainer[str]
    network_deny: _containers.RepeatedScalarFieldContainer[str]
    network_mode: SandboxPolicy.NetworkMode
    notes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, type: _Optional[_Union[SandboxPolicy.Type, str]] = ..., network_access: _Optional[bool] = ..., additional_readwrite_paths: _Optional[_Iterable[str]] = ..., additional_readonly_paths: _Optional[_Iterable[str]] = ..., block_git_writes: _Optional[bool] = ..., disable_tmp_write: _Optional[bool] = ..., network_allow: _Optional[_Iterable[str]] = ..., network_deny: _Optional[_Iterable[str]] = ..., network_mode: _Optional[_Union[SandboxPolicy.NetworkMode, str]] = ..., notes: _Optional[_Iterable[str]] = ...) -> None: ...

class ShellParsingResult(_message.Message):
    __slots__ = ("parsing_failed", "executable_commands", "has_redirects", "has_command_substitution")
    PARSING_FAILED_FIELD_NUMBER: _ClassVar[int]
    EXECUTABLE_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    HAS_REDIRECTS_FIELD_NUMBER: _ClassVar[int]
    HAS_COMMAND_SUBSTITUTION_FIELD_NUMBER: _ClassVar[int]
    parsing_failed: bool
    executable_commands: _containers.RepeatedScalarFieldContainer[str]
    has_redirects: bool
    has_command_substitution: bool
    def __init__(self, parsing_failed: _Optional[bool] = ..., executable_commands: _Optional[_Iterable[str]] = ..., has_redirects: _Optional[bool] = ..., has_command_substitution: _Optional[bool] = ...) -> None: ...

class ShellArgs(_message.Message):
    __slots__ = ("command", "working_directory", "timeout", "tool_call_id", "simple_commands", "has_input_redirect", "has_output_redirect", "parsing_result", "requested_sandbox_policy", "file_output_threshold_bytes", "is_background", "description", "is_interactive", "env", "secret_env")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    SIMPLE_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    HAS_INPUT_REDIRECT_FIELD_NUMBER: _ClassVar[int]
    HAS_OUTPUT_REDIRECT_FIELD_NUMBER: _ClassVar[int]
    PARSING_RESULT_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_SANDBOX_POLICY_FIELD_NUMBER: _ClassVar[int]
    FILE_OUTPUT_THRESHOLD_BYTES_FIELD_NUMBER: _ClassVar[int]
    IS_BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    IS_INTERACTIVE_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    SECRET_ENV_FIELD_NUMBER: _ClassVar[int]
    command: str
    working_directory: str
    timeout: int
    tool_call_id: str
    simple_commands: _containers.RepeatedScalarFieldContainer[str]
    has_input_redirect: bool
    has_output_redirect: bool
    parsing_result: ShellParsingResult
    requested_sandbox_policy: SandboxPolicy
    file_output_threshold_bytes: int
    is_background: bool
    description: str
    is_interactive: bool
    env: _containers.ScalarMap[str, str]
    secret_env: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, command: _Optional[str] = ..., working_directory: _Optional[str] = ..., timeout: _Optional[int] = ..., tool_call_id: _Optional[str] = ..., simple_commands: _Optional[_Iterable[str]] = ..., has_input_redirect: _Optional[bool] = ..., has_output_redirect: _Optional[bool] = ..., parsing_result: _Optional[_Union[ShellParsingResult, _Mapping]] = ..., requested_sandbox_policy: _Optional[_Union[SandboxPolicy, _Mapping]] = ..., file_output_threshold_bytes: _Optional[int] = ..., is_background: _Optional[bool] = ..., description: _Optional[str] = ..., is_interactive: _Optional[bool] = ..., env: _Optional[_Mapping[str, str]] = ..., secret_env: _Optional[_Iterable[str]] = ...) -> None: ...

class OutputLocation(_message.Message):
    __slots__ = ("file_path", "size_bytes")
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    file_path: str
    size_bytes: int
    def __init__(self, file_path: _Optional[str] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class ShellSuccess(_message.Message):
    __slots__ = ("command", "working_directory", "exit_code", "signal", "stdout", "stderr", "execution_time", "output_location", "shell_id", "interleaved_output", "pid", "truncation_note", "decoded_with_replacement", "shell_exited")
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LOCATION_FIELD_NUMBER: _ClassVar[int]
    SHELL_ID_FIELD_NUMBER: _ClassVar[int]
    INTERLEAVED_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_NOTE_FIELD_NUMBER: _ClassVar[int]
    DECODED_WITH_REPLACEMENT_FIELD_NUMBER: _ClassVar[int]
    SHELL_EXITED_FIELD_NUMBER: _ClassVar[int]
    command: str
    working_directory: str
    exit_code: int
    signal: str
    stdout: str
    stderr: str
    execution_time: int
    output_location: OutputLocation
    shell_id: int
    interleaved_output: str
    pid: int
    truncation_note: str
    decoded_with_replacement: bool
    shell_exited: bool
    def __init__(self, command: _Optional[str] = ..., working_directory: _Optional[str] = ..., exit_code: _Optional[int] = ..., signal: _Optional[str] = ..., stdout: _Optional[str] = ..., stderr: _Optional[str] = ..., execution_time: _Optional[int] = ..., output_location: _Optional[_Union[OutputLocation, _Mapping]] = ..., shell_id: _Optional[int] = ..., interleaved_output: _Optional[str] = ..., pid: _Optional[int] = ..., truncation_note: _Optional[str] = ..., decoded_with_replacement: _Optional[bool] = ..., shell_exited: _Optional[bool] = ...) -> None: ...

class ShellFailure(_message.Message):
    __slots__ = ("command", "working_directory", "exit_code", "signal", "stdout", "stderr", "execution_time", "output_location", "shell_id", "interleaved_output", "pid", "truncation_note", "decoded_with_replacement", "shell_exited")
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LOCATION_FIELD_NUMBER: _ClassVar[int]
    SHELL_ID_FIELD_NUMBER: _ClassVar[int]
    INTERLEAVED_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_NOTE_FIELD_NUMBER: _ClassVar[int]
    DECODED_WITH_REPLACEMENT_FIELD_NUMBER: _ClassVar[int]
    SHELL_EXITED_FIELD_NUMBER: _ClassVar[int]
    command: str
    working_directory: str
    exit_code: int
    signal: str
    stdout: str
    stderr: str
    execution_time: int
    output_location: OutputLocation
    shell_id: int
    interleaved_output: str
    pid: int
    truncation_note: str
    decoded_with_replacement: bool
    shell_exited: bool
    def __init__(self, command: _Optional[str] = ..., working_directory: _Optional[str] = ..., exit_code: _Optional[int] = ..., signal: _Optional[str] = ..., stdout: _Optional[str] = ..., stderr: _Optional[str] = ..., execution_time: _Optional[int] = ..., output_location: _Optional[_Union[OutputLocation, _Mapping]] = ..., shell_id: _Optional[int] = ..., interleaved_output: _Optional[str] = ..., pid: _Optional[int] = ..., truncation_note: _Optional[str] = ..., decoded_with_replacement: _Optional[bool] = ..., shell_exited: _Optional[bool] = ...) -> None: ...

class ShellTimeout(_message.Message):
    __slots__ = ("command", "working_directory", "timeout_ms", "stdout", "stderr", "interleaved_output", "output_location", "shell_id", "pid", "truncation_note", "decoded_with_replacement", "execution_time")
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    INTERLEAVED_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LOCATION_FIELD_NUMBER: _ClassVar[int]
    SHELL_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_NOTE_FIELD_NUMBER: _ClassVar[int]
    DECODED_WITH_REPLACEMENT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIME_FIELD_NUMBER: _ClassVar[int]
    command: str
    working_directory: str
    timeout_ms: int
    stdout: str
    stderr: str
    interleaved_output: str
    output_location: OutputLocation
    shell_id: int
    pid: int
    truncation_note: str
    decoded_with_replacement: bool
    execution_time: int
    def __init__(self, command: _Optional[str] = ..., working_directory: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., stdout: _Optional[str] = ..., stderr: _Optional[str] = ..., interleaved_output: _Optional[str] = ..., output_location: _Optional[_Union[OutputLocation, _Mapping]] = ..., shell_id: _Optional[int] = ..., pid: _Optional[int] = ..., truncation_note: _Optional[str] = ..., decoded_with_replacement: _Optional[bool] = ..., execution_time: _Optional[int] = ...) -> None: ...

class ShellRejected(_message.Message):
    __slots__ = ("command", "working_directory", "reason", "is_readonly", "details")
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    IS_READONLY_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    command: str
    working_directory: str
    reason: str
    is_readonly: bool
    details: _common_pb2.Rejected
    def __init__(self, command: _Optional[str] = ..., working_directory: _Optional[str] = ..., reason: _Optional[str] = ..., is_readonly: _Optional[bool] = ..., details: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ...) -> None: ...

class ShellSpawnError(_message.Message):
    __slots__ = ("command", "working_directory", "reason")
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    command: str
    working_directory: str
    reason: str
    def __init__(self, command: _Optional[str] = ..., working_directory: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ShellPermissionDenied(_message.Message):
    __slots__ = ("command", "working_directory", "reason")
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    command: str
    working_directory: str
    reason: str
    def __init__(self, command: _Optional[str] = ..., working_directory: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ShellAborted(_message.Message):
    __slots__ = ("command", "working_directory", "reason", "stdout", "stderr", "interleaved_output", "shell_id", "pid", "output_location", "truncation_note", "decoded_with_replacement", "execution_time")
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    INTERLEAVED_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    SHELL_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LOCATION_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_NOTE_FIELD_NUMBER: _ClassVar[int]
    DECODED_WITH_REPLACEMENT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIME_FIELD_NUMBER: _ClassVar[int]
    command: str
    working_directory: str
    reason: str
    stdout: str
    stderr: str
    interleaved_output: str
    shell_id: int
    pid: int
    output_location: OutputLocation
    truncation_note: str
    decoded_with_replacement: bool
    execution_time: int
    def __init__(self, command: _Optional[str] = ..., working_directory: _Optional[str] = ..., reason: _Optional[str] = ..., stdout: _Optional[str] = ..., stderr: _Optional[str] = ..., interleaved_output: _Optional[str] = ..., shell_id: _Optional[int] = ..., pid: _Optional[int] = ..., output_location: _Optional[_Union[OutputLocation, _Mapping]] = ..., truncation_note: _Optional[str] = ..., decoded_with_replacement: _Optional[bool] = ..., execution_time: _Optional[int] = ...) -> None: ...

class ShellResult(_message.Message):
    __slots__ = ("success", "failure", "timeout", "rejected", "spawn_error", "permission_denied", "aborted", "error", "sandbox_policy", "is_background", "terminals_folder", "pid", "shell_id", "output_file", "degraded_note")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    SPAWN_ERROR_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_DENIED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_POLICY_FIELD_NUMBER: _ClassVar[int]
    IS_BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    TERMINALS_FOLDER_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    SHELL_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FILE_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_NOTE_FIELD_NUMBER: _ClassVar[int]
    success: ShellSuccess
    failure: ShellFailure
    timeout: ShellTimeout
    rejected: ShellRejected
    spawn_error: ShellSpawnError
    permission_denied: ShellPermissionDenied
    aborted: ShellAborted
    error: _common_pb2.ToolError
    sandbox_policy: SandboxPolicy
    is_background: bool
    terminals_folder: str
    pid: int
    shell_id: int
    output_file: str
    degraded_note: str
    def __init__(self, success: _Optional[_Union[ShellSuccess, _Mapping]] = ..., failure: _Optional[_Union[ShellFailure, _Mapping]] = ..., timeout: _Optional[_Union[ShellTimeout, _Mapping]] = ..., rejected: _Optional[_Union[ShellRejected, _Mapping]] = ..., spawn_error: _Optional[_Union[ShellSpawnError, _Mapping]] = ..., permission_denied: _Optional[_Union[ShellPermissionDenied, _Mapping]] = ..., aborted: _Optional[_Union[ShellAborted, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., sandbox_policy: _Optional[_Union[SandboxPolicy, _Mapping]] = ..., is_background: _Optional[bool] = ..., terminals_folder: _Optional[str] = ..., pid: _Optional[int] = ..., shell_id: _Optional[int] = ..., output_file: _Optional[str] = ..., degraded_note: _Optional[str] = ...) -> None: ...

class ShellToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: ShellArgs
    result: ShellResult
    def __init__(self, args: _Optional[_Union[ShellArgs, _Mapping]] = ..., result: _Optional[_Union[ShellResult, _Mapping]] = ...) -> None: ...

class ShellToolCallDelta(_message.Message):
    __slots__ = ("stdout", "stderr", "started")
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    stdout: str
    stderr: str
    started: ShellStarted
    def __init__(self, stdout: _Optional[str] = ..., stderr: _Optional[str] = ..., started: _Optional[_Union[ShellStarted, _Mapping]] = ...) -> None: ...

class ShellStarted(_message.Message):
    __slots__ = ("shell_id", "pid")
    SHELL_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    shell_id: int
    pid: int
    def __init__(self, shell_id: _Optional[int] = ..., pid: _Optional[int] = ...) -> None: ...

class WriteShellStdinArgs(_message.Message):
    __slots__ = ("shell_id", "chars", "tool_call_id", "close_stdin")
    SHELL_ID_FIELD_NUMBER: _ClassVar[int]
    CHARS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CLOSE_STDIN_FIELD_NUMBER: _ClassVar[int]
    shell_id: int
    chars: str
    tool_call_id: str
    close_stdin: bool
    def __init__(self, shell_id: _Optional[int] = ..., chars: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., close_stdin: _Optional[bool] = ...) -> None: ...

class WriteShellStdinSuccess(_message.Message):
    __slots__ = ("shell_id", "bytes_written")
    SHELL_ID_FIELD_NUMBER: _ClassVar[int]
    BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    shell_id: int
    bytes_written: int
    def __init__(self, shell_id: _Optional[int] = ..., bytes_written: _Optional[int] = ...) -> None: ...

class ShellNotFound(_message.Message):
    __slots__ = ("shell_id", "reason")
    SHELL_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    shell_id: int
    reason: str
    def __init__(self, shell_id: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class WriteShellStdinResult(_message.Message):
    __slots__ = ("success", "error", "shell_not_found", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SHELL_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: WriteShellStdinSuccess
    error: _common_pb2.ToolError
    shell_not_found: ShellNotFound
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[WriteShellStdinSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., shell_not_found: _Optional[_Union[ShellNotFound, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class WriteShellStdinToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: WriteShellStdinArgs
    result: WriteShellStdinResult
    def __init__(self, args: _Optional[_Union[WriteShellStdinArgs, _Mapping]] = ..., result: _Optional[_Union[WriteShellStdinResult, _Mapping]] = ...) -> None: ...

class AwaitArgs(_message.Message):
    __slots__ = ("shell_id", "pattern", "timeout_ms", "tool_call_id")
    SHELL_ID_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    shell_id: int
    pattern: str
    timeout_ms: int
    tool_call_id: str
    def __init__(self, shell_id: _Optional[int] = ..., pattern: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class AwaitSuccess(_message.Message):
    __slots__ = ("shell_id", "exited", "exit_code", "signal", "matched", "matched_text", "output_tail", "timed_out", "waited_ms")
    SHELL_ID_FIELD_NUMBER: _ClassVar[int]
    EXITED_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    MATCHED_TEXT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    WAITED_MS_FIELD_NUMBER: _ClassVar[int]
    shell_id: int
    exited: bool
    exit_code: int
    signal: str
    matched: bool
    matched_text: str
    output_tail: str
    timed_out: bool
    waited_ms: int
    def __init__(self, shell_id: _Optional[int] = ..., exited: _Optional[bool] = ..., exit_code: _Optional[int] = ..., signal: _Optional[str] = ..., matched: _Optional[bool] = ..., matched_text: _Optional[str] = ..., output_tail: _Optional[str] = ..., timed_out: _Optional[bool] = ..., waited_ms: _Optional[int] = ...) -> None: ...

class AwaitResult(_message.Message):
    __slots__ = ("success", "error", "shell_not_found", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SHELL_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: AwaitSuccess
    error: _common_pb2.ToolError
    shell_not_found: ShellNotFound
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[AwaitSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., shell_not_found: _Optional[_Union[ShellNotFound, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class AwaitToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: AwaitArgs
    result: AwaitResult
    def __init__(self, args: _Optional[_Union[AwaitArgs, _Mapping]] = ..., result: _Optional[_Union[AwaitResult, _Mapping]] = ...) -> None: ...
