from agent.v1 import agent_pb2 as _agent_pb2
from agent.v1 import common_pb2 as _common_pb2
from agent.v1 import computer_pb2 as _computer_pb2
from agent.v1 import files_pb2 as _files_pb2
from agent.v1 import mcp_pb2 as _mcp_pb2
from agent.v1 import shell_pb2 as _shell_pb2
from agent.v1 import todos_pb2 as _todos_pb2
from agent.v1 import web_pb2 as _web_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ToolCall(_message.Message):
    __slots__ = ("shell_tool_call", "delete_tool_call", "glob_tool_call", "grep_tool_call", "read_tool_call", "update_todos_tool_call", "read_todos_tool_call", "edit_tool_call", "ls_tool_call", "read_lints_tool_call", "mcp_tool_call", "sem_search_tool_call", "create_plan_tool_call", "web_search_tool_call", "task_tool_call", "list_mcp_resources_tool_call", "read_mcp_resource_tool_call", "apply_agent_diff_tool_call", "ask_question_tool_call", "fetch_tool_call", "switch_mode_tool_call", "generate_image_tool_call", "record_screen_tool_call", "computer_use_tool_call", "write_shell_stdin_tool_call", "reflect_tool_call", "setup_vm_environment_tool_call", "truncated_tool_call", "start_grind_execution_tool_call", "start_grind_planning_tool_call", "web_fetch_tool_call", "report_bugfix_results_tool_call", "ai_attribution_tool_call", "pr_management_tool_call", "mcp_auth_tool_call", "await_tool_call", "hook_feedback")
    SHELL_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    DELETE_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    GLOB_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    GREP_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    READ_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TODOS_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    READ_TODOS_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    EDIT_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    LS_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    READ_LINTS_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    MCP_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    SEM_SEARCH_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    CREATE_PLAN_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    WEB_SEARCH_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TASK_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    LIST_MCP_RESOURCES_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    READ_MCP_RESOURCE_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    APPLY_AGENT_DIFF_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    ASK_QUESTION_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    FETCH_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    SWITCH_MODE_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    GENERATE_IMAGE_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    RECORD_SCREEN_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    COMPUTER_USE_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    WRITE_SHELL_STDIN_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    REFLECT_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    SETUP_VM_ENVIRONMENT_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    START_GRIND_EXECUTION_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    START_GRIND_PLANNING_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    WEB_FETCH_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    REPORT_BUGFIX_RESULTS_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    AI_ATTRIBUTION_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    PR_MANAGEMENT_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    MCP_AUTH_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    AWAIT_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    HOOK_FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    shell_tool_call: _shell_pb2.ShellToolCall
    delete_tool_call: _files_pb2.DeleteToolCall
    glob_tool_call: _files_pb2.GlobToolCall
    grep_tool_call: _files_pb2.GrepToolCall
    read_tool_call: _files_pb2.ReadToolCall
    update_todos_tool_call: _todos_pb2.UpdateTodosToolCall
    read_todos_tool_call: _todos_pb2.ReadTodosToolCall
    edit_tool_call: _files_pb2.EditToolCall
    ls_tool_call: _files_pb2.LsToolCall
    read_lints_tool_call: _files_pb2.ReadLintsToolCall
    mcp_tool_call: _mcp_pb2.McpToolCall
    sem_search_tool_call: _agent_pb2.SemSearchToolCall
    create_plan_tool_call: _todos_pb2.CreatePlanToolCall
    web_search_tool_call: _web_pb2.WebSearchToolCall
    task_tool_call: _agent_pb2.TaskToolCall
    list_mcp_resources_tool_call: _mcp_pb2.ListMcpResourcesToolCall
    read_mcp_resource_tool_call: _mcp_pb2.ReadMcpResourceToolCall
    apply_agent_diff_tool_call: _files_pb2.ApplyAgentDiffToolCall
    ask_question_tool_call: _agent_pb2.AskQuestionToolCall
    fetch_tool_call: _web_pb2.FetchToolCall
    switch_mode_tool_call: _agent_pb2.SwitchModeToolCall
    generate_image_tool_call: _agent_pb2.GenerateImageToolCall
    record_screen_tool_call: _computer_pb2.RecordScreenToolCall
    computer_use_tool_call: _computer_pb2.ComputerUseToolCall
    write_shell_stdin_tool_call: _shell_pb2.WriteShellStdinToolCall
    reflect_tool_call: _agent_pb2.ReflectToolCall
    setup_vm_environment_tool_call: _agent_pb2.SetupVmEnvironmentToolCall
    truncated_tool_call: _agent_pb2.TruncatedToolCall
    start_grind_execution_tool_call: _agent_pb2.StartGrindExecutionToolCall
    start_grind_planning_tool_call: _agent_pb2.StartGrindPlanningToolCall
    web_fetch_tool_call: _web_pb2.WebFetchToolCall
    report_bugfix_results_tool_call: _agent_pb2.ReportBugfixResultsToolCall
    ai_attribution_tool_call: _agent_pb2.AiAttributionToolCall
    pr_management_tool_call: _agent_pb2.PrManagementToolCall
    mcp_auth_tool_call: _mcp_pb2.McpAuthToolCall
    await_tool_call: _shell_pb2.AwaitToolCall
    hook_feedback: _common_pb2.HookFeedback
    def __init__(self, shell_tool_call: _Optional[_Union[_shell_pb2.ShellToolCall, _Mapping]] = ..., delete_tool_call: _Optional[_Union[_files_pb2.DeleteToolCall, _Mapping]] = ..., glob_tool_call: _Optional[_Union[_files_pb2.GlobToolCall, _Mapping]] = ..., grep_tool_call: _Optional[_Union[_files_pb2.GrepToolCall, _Mapping]] = ..., read_tool_call: _Optional[_Union[_files_pb2.ReadToolCall, _Mapping]] = ..., update_todos_tool_call: _Optional[_Union[_todos_pb2.UpdateTodosToolCall, _Mapping]] = ..., read_todos_tool_call: _Optional[_Union[_todos_pb2.ReadTodosToolCall, _Mapping]] = ..., edit_tool_call: _Optional[_Union[_files_pb2.EditToolCall, _Mapping]] = ..., ls_tool_call: _Optional[_Union[_files_pb2.LsToolCall, _Mapping]] = ..., read_lints_tool_call: _Optional[_Union[_files_pb2.ReadLintsToolCall, _Mapping]] = ..., mcp_tool_call: _Optional[_Union[_mcp_pb2.McpToolCall, _Mapping]] = ..., sem_search_tool_call: _Optional[_Union[_agent_pb2.SemSearchToolCall, _Mapping]] = ..., create_plan_tool_call: _Optional[_Union[_todos_pb2.CreatePlanToolCall, _Mapping]] = ..., web_search_tool_call: _Optional[_Union[_web_pb2.WebSearchToolCall, _Mapping]] = ..., task_tool_call: _Optional[_Union[_agent_pb2.TaskToolCall, _Mapping]] = ..., list_mcp_resources_tool_call: _Optional[_Union[_mcp_pb2.ListMcpResourcesToolCall, _Mapping]] = ..., read_mcp_resource_tool_call: _Optional[_Union[_mcp_pb2.ReadMcpResourceToolCall, _Mapping]] = ..., apply_agent_diff_tool_call: _Optional[_Union[_files_pb2.ApplyAgentDiffToolCall, _Mapping]] = ..., ask_question_tool_call: _Optional[_Union[_agent_pb2.AskQuestionToolCall, _Mapping]] = ..., fetch_tool_call: _Optional[_Union[_web_pb2.FetchToolCall, _Mapping]] = ..., switch_mode_tool_call: _Optional[_Union[_agent_pb2.SwitchModeToolCall, _Mapping]] = ..., generate_image_tool_call: _Optional[_Union[_agent_pb2.GenerateImageToolCall, _Mapping]] = ..., record_screen_tool_call: _Optional[_Union[_computer_pb2.RecordScreenToolCall, _Mapping]] = ..., computer_use_tool_call: _Optional[_Union[_computer_pb2.ComputerUseToolCall, _Mapping]] = ..., write_shell_stdin_tool_call: _Optional[_Union[_shell_pb2.WriteShellStdinToolCall, _Mapping]] = ..., reflect_tool_call: _Optional[_Union[_agent_pb2.ReflectToolCall, _Mapping]] = ..., setup_vm_environment_tool_call: _Optional[_Union[_agent_pb2.SetupVmEnvironmentToolCall, _Mapping]] = ..., truncated_tool_call: _Optional[_Union[_agent_pb2.TruncatedToolCall, _Mapping]] = ..., start_grind_execution_tool_call: _Optional[_Union[_agent_pb2.StartGrindExecutionToolCall, _Mapping]] = ..., start_grind_planning_tool_call: _Optional[_Union[_agent_pb2.StartGrindPlanningToolCall, _Mapping]] = ..., web_fetch_tool_call: _Optional[_Union[_web_pb2.WebFetchToolCall, _Mapping]] = ..., report_bugfix_results_tool_call: _Optional[_Union[_agent_pb2.ReportBugfixResultsToolCall, _Mapping]] = ..., ai_attribution_tool_call: _Optional[_Union[_agent_pb2.AiAttributionToolCall, _Mapping]] = ..., pr_management_tool_call: _Optional[_Union[_agent_pb2.PrManagementToolCall, _Mapping]] = ..., mcp_auth_tool_call: _Optional[_Union[_mcp_pb2.McpAuthToolCall, _Mapping]] = ..., await_tool_call: _Optional[_Union[_shell_pb2.AwaitToolCall, _Mapping]] = ..., hook_feedback: _Optional[_Union[_common_pb2.HookFeedback, _Mapping]] = ...) -> None: ...

class ToolCallDelta(_message.Message):
    __slots__ = ("shell_tool_call_delta", "task_tool_call_delta", "edit_tool_call_delta")
    SHELL_TOOL_CALL_DELTA_FIELD_NUMBER: _ClassVar[int]
    TASK_TOOL_CALL_DELTA_FIELD_NUMBER: _ClassVar[int]
    EDIT_TOOL_CALL_DELTA_FIELD_NUMBER: _ClassVar[int]
    shell_tool_call_delta: _shell_pb2.ShellToolCallDelta
    task_tool_call_delta: _agent_pb2.TaskToolCallDelta
    edit_tool_call_delta: _files_pb2.EditToolCallDelta
    def __init__(self, shell_tool_call_delta: _Optional[_Union[_shell_pb2.ShellToolCallDelta, _Mapping]] = ..., task_tool_call_delta: _Optional[_Union[_agent_pb2.TaskToolCallDelta, _Mapping]] = ..., edit_tool_call_delta: _Optional[_Union[_files_pb2.EditToolCallDelta, _Mapping]] = ...) -> None: ...
