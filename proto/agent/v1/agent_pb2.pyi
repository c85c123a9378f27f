from agent.v1 import common_pb2 as _common_pb2
from agent.v1 import todos_pb2 as _todos_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubagentType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SUBAGENT_TYPE_UNSPECIFIED: _ClassVar[SubagentType]
    SUBAGENT_TYPE_EXPLORE: _ClassVar[SubagentType]
    SUBAGENT_TYPE_DEBUG: _ClassVar[SubagentType]
    SUBAGENT_TYPE_COMPUTER_USE: _ClassVar[SubagentType]
    SUBAGENT_TYPE_MEDIA_REVIEW: _ClassVar[SubagentType]
    SUBAGENT_TYPE_VM_SETUP_HELPER: _ClassVar[SubagentType]
    SUBAGENT_TYPE_BASH: _ClassVar[SubagentType]
    SUBAGENT_TYPE_SHELL: _ClassVar[SubagentType]
    SUBAGENT_TYPE_BROWSER_USE: _ClassVar[SubagentType]
    SUBAGENT_TYPE_CURSOR_GUIDE: _ClassVar[SubagentType]
    SUBAGENT_TYPE_CUSTOM: _ClassVar[SubagentType]

class PrAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PR_ACTION_UNSPECIFIED: _ClassVar[PrAction]
    PR_ACTION_CREATE: _ClassVar[PrAction]
    PR_ACTION_UPDATE: _ClassVar[PrAction]
    PR_ACTION_VIEW: _ClassVar[PrAction]
    PR_ACTION_COMMENT: _ClassVar[PrAction]
SUBAGENT_TYPE_UNSPECIFIED: SubagentType
SUBAGENT_TYPE_EXPLORE: SubagentType
SUBAGENT_TYPE_DEBUG: SubagentType
SUBAGENT_TYPE_COMPUTER_USE: SubagentType
SUBAGENT_TYPE_MEDIA_REVIEW: SubagentType
SUBAGENT_TYPE_VM_SETUP_HELPER: SubagentType
SUBAGENT_TYPE_BASH: SubagentType
SUBAGENT_TYPE_SHELL: SubagentType
SUBAGENT_TYPE_BROWSER_USE: SubagentType
SUBAGENT_TYPE_CURSOR_GUIDE: SubagentType
SUBAGENT_TYPE_CUSTOM: SubagentType
PR_ACTION_UNSPECIFIED: PrAction
PR_ACTION_CREATE: PrAction
PR_ACTION_UPDATE: PrAction
PR_ACTION_VIEW: PrAction
PR_ACTION_COMMENT: PrAction

class TaskArgs(_message.Message):
    __slots__ = ("description", "prompt", "subagent_type", "model", "resume", "readonly", "attachments", "agent_id", "tool_call_id", "custom_subagent_name")
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    SUBAGENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    READONLY_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_SUBAGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    description: str
    prompt: str
    subagent_type: SubagentType
    model: str
    resume: str
    readonly: bool
    attachments: _containers.RepeatedScalarFieldContainer[str]
    agent_id: str
    tool_call_id: str
    custom_subagent_name: str
    def __init__(self, description: _Optional[str] = ..., prompt: _Optional[str] = ..., subagent_type: _Optional[_Union[SubagentType, str]] = ..., model: _Optional[str] = ..., resume: _Optional[str] = ..., readonly: _Optional[bool] = ..., attachments: _Optional[_Iterable[str]] = ..., agent_id: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., custom_subagent_name: _Optional[str] = ...) -> None: ...

class TaskSuccess(_message.Message):
    __slots__ = ("agent_id", "final_message", "duration_ms", "resumed", "readonly")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    FINAL_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    READONLY_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    final_message: str
    duration_ms: int
    resumed: bool
    readonly: bool
    def __init__(self, agent_id: _Optional[str] = ..., final_message: _Optional[str] = ..., duration_ms: _Optional[int] = ..., resumed: _Optional[bool] = ..., readonly: _Optional[bool] = ...) -> None: ...

class TaskResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: TaskSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[TaskSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class TaskToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: TaskArgs
    result: TaskResult
    def __init__(self, args: _Optional[_Union[TaskArgs, _Mapping]] = ..., result: _Optional[_Union[TaskResult, _Mapping]] = ...) -> None: ...

class TaskToolCallDelta(_message.Message):
    __slots__ = ("agent_id", "text")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    text: str
    def __init__(self, agent_id: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class SemSearchArgs(_message.Message):
    __slots__ = ("query", "target_directories", "explanation", "tool_call_id", "max_results")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TARGET_DIRECTORIES_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    query: str
    target_directories: _containers.RepeatedScalarFieldContainer[str]
    explanation: str
    tool_call_id: str
    max_results: int
    def __init__(self, query: _Optional[str] = ..., target_directories: _Optional[_Iterable[str]] = ..., explanation: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., max_results: _Optional[int] = ...) -> None: ...

class CodeChunk(_message.Message):
    __slots__ = ("path", "start_line", "end_line", "contents", "score")
    PATH_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    CONTENTS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    path: str
    start_line: int
    end_line: int
    contents: str
    score: float
    def __init__(self, path: _Optional[str] = ..., start_line: _Optional[int] = ..., end_line: _Optional[int] = ..., contents: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class SemSearchSuccess(_message.Message):
    __slots__ = ("results", "index_complete", "indexed_files", "total_files", "note", "model")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    INDEX_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    INDEXED_FILES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FILES_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CodeChunk]
    index_complete: bool
    indexed_files: int
    total_files: int
    note: str
    model: str
    def __init__(self, results: _Optional[_Iterable[_Union[CodeChunk, _Mapping]]] = ..., index_complete: _Optional[bool] = ..., indexed_files: _Optional[int] = ..., total_files: _Optional[int] = ..., note: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class SemSearchResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: SemSearchSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[SemSearchSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class SemSearchToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: SemSearchArgs
    result: SemSearchResult
    def __init__(self, args: _Optional[_Union[SemSearchArgs, _Mapping]] = ..., result: _Optional[_Union[SemSearchResult, _Mapping]] = ...) -> None: ...

class QuestionOption(_message.Message):
    __slots__ = ("id", "label")
    ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    id: str
    label: str
    def __init__(self, id: _Optional[str] = ..., label: _Optional[str] = ...) -> None: ...

class Question(_message.Message):
    __slots__ = ("id", "prompt", "options", "allow_multiple")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_MULTIPLE_FIELD_NUMBER: _ClassVar[int]
    id: str
    prompt: str
    options: _containers.RepeatedCompositeFieldContainer[QuestionOption]
    allow_multiple: bool
    def __init__(self, id: _Optional[str] = ..., prompt: _Optional[str] = ..., options: _Optional[_Iterable[_Union[QuestionOption, _Mapping]]] = ..., allow_multiple: _Optional[bool] = ...) -> None: ...

class AskQuestionArgs(_message.Message):
    __slots__ = ("title", "questions", "tool_call_id")
    TITLE_FIELD_NUMBER: _ClassVar[int]
    QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    title: str
    questions: _containers.RepeatedCompositeFieldContainer[Question]
    tool_call_id: str
    def __init__(self, title: _Optional[str] = ..., questions: _Optional[_Iterable[_Union[Question, _Mapping]]] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class QuestionAnswer(_message.Message):
    __slots__ = ("question_id", "selected_option_ids", "free_text")
    QUESTION_ID_FIELD_NUMBER: _ClassVar[int]
    SELECTED_OPTION_IDS_FIELD_NUMBER: _ClassVar[int]
    FREE_TEXT_FIELD_NUMBER: _ClassVar[int]
    question_id: str
    selected_option_ids: _containers.RepeatedScalarFieldContainer[str]
    free_text: str
    def __init__(self, question_id: _Optional[str] = ..., selected_option_ids: _Optional[_Iterable[str]] = ..., free_text: _Optional[str] = ...) -> None: ...

class AskQuestionSuccess(_message.Message):
    __slots__ = ("answers",)
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    answers: _containers.RepeatedCompositeFieldContainer[QuestionAnswer]
    def __init__(self, answers: _Optional[_Iterable[_Union[QuestionAnswer, _Mapping]]] = ...) -> None: ...

class AskQuestionResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: AskQuestionSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[AskQuestionSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class AskQuestionToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: AskQuestionArgs
    result: AskQuestionResult
    def __init__(self, args: _Optional[_Union[AskQuestionArgs, _Mapping]] = ..., result: _Optional[_Union[AskQuestionResult, _Mapping]] = ...) -> None: ...

class SwitchModeArgs(_message.Message):
    __slots__ = ("target_mode_id", "explanation", "tool_call_id")
    TARGET_MODE_ID_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    target_mode_id: str
    explanation: str
    tool_call_id: str
    def __init__(self, target_mode_id: _Optional[str] = ..., explanation: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class SwitchModeSuccess(_message.Message):
    __slots__ = ("from_mode_id", "to_mode_id")
    FROM_MODE_ID_FIELD_NUMBER: _ClassVar[int]
    TO_MODE_ID_FIELD_NUMBER: _ClassVar[int]
    from_mode_id: str
    to_mode_id: str
    def __init__(self, from_mode_id: _Optional[str] = ..., to_mode_id: _Optional[str] = ...) -> None: ...

class SwitchModeResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: SwitchModeSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[SwitchModeSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class SwitchModeToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: SwitchModeArgs
    result: SwitchModeResult
    def __init__(self, args: _Optional[_Union[SwitchModeArgs, _Mapping]] = ..., result: _Optional[_Union[SwitchModeResult, _Mapping]] = ...) -> None: ...

class GenerateImageArgs(_message.Message):
    __slots__ = ("description", "filename", "reference_image_paths", "tool_call_id")
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_IMAGE_PATHS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    description: str
    filename: str
    reference_image_paths: _containers.RepeatedScalarFieldContainer[str]
    tool_call_id: str
    def __init__(self, description: _Optional[str] = ..., filename: _Optional[str] = ..., reference_image_paths: _Optional[_Iterable[str]] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class GenerateImageSuccess(_message.Message):
    __slots__ = ("path", "mime_type", "data")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    path: str
    mime_type: str
    data: bytes
    def __init__(self, path: _Optional[str] = ..., mime_type: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class GenerateImageResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: GenerateImageSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[GenerateImageSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class GenerateImageToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: GenerateImageArgs
    result: GenerateImageResult
    def __init__(self, args: _Optional[_Union[GenerateImageArgs, _Mapping]] = ..., result: _Optional[_Union[GenerateImageResult, _Mapping]] = ...) -> None: ...

class ReflectArgs(_message.Message):
    __slots__ = ("unexpected_action_outcomes", "relevant_instructions", "scenario_analysis", "critical_synthesis", "next_steps", "tool_call_id")
    UNEXPECTED_ACTION_OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    RELEVANT_INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    SCENARIO_ANALYSIS_FIELD_NUMBER: _ClassVar[int]
    CRITICAL_SYNTHESIS_FIELD_NUMBER: _ClassVar[int]
    NEXT_STEPS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    unexpected_action_outcomes: str
    relevant_instructions: str
    scenario_analysis: str
    critical_synthesis: str
    next_steps: str
    tool_call_id: str
    def __init__(self, unexpected_action_outcomes: _Optional[str] = ..., relevant_instructions: _Optional[str] = ..., scenario_analysis: _Optional[str] = ..., critical_synthesis: _Optional[str] = ..., next_steps: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class ReflectSuccess(_message.Message):
    __slots__ = ("reflection_count",)
    REFLECTION_COUNT_FIELD_NUMBER: _ClassVar[int]
    reflection_count: int
    def __init__(self, reflection_count: _Optional[int] = ...) -> None: ...

class ReflectResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: ReflectSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[ReflectSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class ReflectToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: ReflectArgs
    result: ReflectResult
    def __init__(self, args: _Optional[_Union[ReflectArgs, _Mapping]] = ..., result: _Optional[_Union[ReflectResult, _Mapping]] = ...) -> None: ...

class SetupVmEnvironmentArgs(_message.Message):
    __slots__ = ("install_command", "start_command", "tool_call_id")
    INSTALL_COMMAND_FIELD_NUMBER: _ClassVar[int]
    START_COMMAND_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    install_command: str
    start_command: str
    tool_call_id: str
    def __init__(self, install_command: _Optional[str] = ..., start_command: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class SetupVmEnvironmentSuccess(_message.Message):
    __slots__ = ("config_path", "install_command")
    CONFIG_PATH_FIELD_NUMBER: _ClassVar[int]
    INSTALL_COMMAND_FIELD_NUMBER: _ClassVar[int]
    config_path: str
    install_command: str
    def __init__(self, config_path: _Optional[str] = ..., install_command: _Optional[str] = ...) -> None: ...

class SetupVmEnvironmentResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: SetupVmEnvironmentSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[SetupVmEnvironmentSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class SetupVmEnvironmentToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: SetupVmEnvironmentArgs
    result: SetupVmEnvironmentResult
    def __init__(self, args: _Optional[_Union[SetupVmEnvironmentArgs, _Mapping]] = ..., result: _Optional[_Union[SetupVmEnvironmentResult, _Mapping]] = ...) -> None: ...

class TruncatedToolCallArgs(_message.Message):
    __slots__ = ("original_tool_name", "reason")
    ORIGINAL_TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    original_tool_name: str
    reason: str
    def __init__(self, original_tool_name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class TruncatedToolCallSuccess(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...

class TruncatedToolCallResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: TruncatedToolCallSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[TruncatedToolCallSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class TruncatedToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: TruncatedToolCallArgs
    result: TruncatedToolCallResult
    def __init__(self, args: _Optional[_Union[TruncatedToolCallArgs, _Mapping]] = ..., result: _Optional[_Union[TruncatedToolCallResult, _Mapping]] = ...) -> None: ...

class StartGrindPlanningArgs(_message.Message):
    __slots__ = ("goal", "context_paths", "tool_call_id")
    GOAL_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_PATHS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    goal: str
    context_paths: _containers.RepeatedScalarFieldContainer[str]
    tool_call_id: str
    def __init__(self, goal: _Optional[str] = ..., context_paths: _Optional[_Iterable[str]] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class StartGrindPlanningSuccess(_message.Message):
    __slots__ = ("plan_id",)
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    plan_id: str
    def __init__(self, plan_id: _Optional[str] = ...) -> None: ...

class StartGrindPlanningResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: StartGrindPlanningSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[StartGrindPlanningSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class StartGrindPlanningToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: StartGrindPlanningArgs
    result: StartGrindPlanningResult
    def __init__(self, args: _Optional[_Union[StartGrindPlanningArgs, _Mapping]] = ..., result: _Optional[_Union[StartGrindPlanningResult, _Mapping]] = ...) -> None: ...

class StartGrindExecutionArgs(_message.Message):
    __slots__ = ("plan_id", "tasks", "tool_call_id")
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    plan_id: str
    tasks: _containers.RepeatedCompositeFieldContainer[_todos_pb2.TodoItem]
    tool_call_id: str
    def __init__(self, plan_id: _Optional[str] = ..., tasks: _Optional[_Iterable[_Union[_todos_pb2.TodoItem, _Mapping]]] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class StartGrindExecutionSuccess(_message.Message):
    __slots__ = ("execution_id",)
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    def __init__(self, execution_id: _Optional[str] = ...) -> None: ...

class StartGrindExecutionResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: StartGrindExecutionSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[StartGrindExecutionSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class StartGrindExecutionToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: StartGrindExecutionArgs
    result: StartGrindExecutionResult
    def __init__(self, args: _Optional[_Union[StartGrindExecutionArgs, _Mapping]] = ..., result: _Optional[_Union[StartGrindExecutionResult, _Mapping]] = ...) -> None: ...

class BugfixResult(_message.Message):
    __slots__ = ("bug_id", "status", "summary", "files_changed")
    BUG_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    FILES_CHANGED_FIELD_NUMBER: _ClassVar[int]
    bug_id: str
    status: str
    summary: str
    files_changed: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, bug_id: _Optional[str] = ..., status: _Optional[str] = ..., summary: _Optional[str] = ..., files_changed: _Optional[_Iterable[str]] = ...) -> None: ...

class ReportBugfixResultsArgs(_message.Message):
    __slots__ = ("results", "tool_call_id")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[BugfixResult]
    tool_call_id: str
    def __init__(self, results: _Optional[_Iterable[_Union[BugfixResult, _Mapping]]] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class ReportBugfixResultsSuccess(_message.Message):
    __slots__ = ("report_path", "result_count")
    REPORT_PATH_FIELD_NUMBER: _ClassVar[int]
    RESULT_COUNT_FIELD_NUMBER: _ClassVar[int]
    report_path: str
    result_count: int
    def __init__(self, report_path: _Optional[str] = ..., result_count: _Optional[int] = ...) -> None: ...

class ReportBugfixResultsResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: ReportBugfixResultsSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[ReportBugfixResultsSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class ReportBugfixResultsToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: ReportBugfixResultsArgs
    result: ReportBugfixResultsResult
    def __init__(self, args: _Optional[_Union[ReportBugfixResultsArgs, _Mapping]] = ..., result: _Optional[_Union[ReportBugfixResultsResult, _Mapping]] = ...) -> None: ...

class AiAttributionArgs(_message.Message):
    __slots__ = ("paths", "tool_call_id")
    PATHS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    paths: _containers.RepeatedScalarFieldContainer[str]
    tool_call_id: str
    def __init__(self, paths: _Optional[_Iterable[str]] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class FileAttribution(_message.Message):
    __slots__ = ("path", "ai_lines_added", "ai_lines_removed", "total_lines_added", "total_lines_removed")
    PATH_FIELD_NUMBER: _ClassVar[int]
    AI_LINES_ADDED_FIELD_NUMBER: _ClassVar[int]
    AI_LINES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LINES_ADDED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LINES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    path: str
    ai_lines_added: int
    ai_lines_removed: int
    total_lines_added: int
    total_lines_removed: int
    def __init__(self, path: _Optional[str] = ..., ai_lines_added: _Optional[int] = ..., ai_lines_removed: _Optional[int] = ..., total_lines_added: _Optional[int] = ..., total_lines_removed: _Optional[int] = ...) -> None: ...

class AiAttributionSuccess(_message.Message):
    __slots__ = ("files", "ai_edits_recorded", "note")
    FILES_FIELD_NUMBER: _ClassVar[int]
    AI_EDITS_RECORDED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[FileAttribution]
    ai_edits_recorded: bool
    note: str
    def __init__(self, files: _Optional[_Iterable[_Union[FileAttribution, _Mapping]]] = ..., ai_edits_recorded: _Optional[bool] = ..., note: _Optional[str] = ...) -> None: ...

class AiAttributionResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: AiAttributionSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[AiAttributionSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class AiAttributionToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: AiAttributionArgs
    result: AiAttributionResult
    def __init__(self, args: _Optional[_Union[AiAttributionArgs, _Mapping]] = ..., result: _Optional[_Union[AiAttributionResult, _Mapping]] = ...) -> None: ...

class PrManagementArgs(_message.Message):
    __slots__ = ("action", "title", "body", "base_branch", "head_branch", "pr_number", "draft", "tool_call_id")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    BASE_BRANCH_FIELD_NUMBER: _ClassVar[int]
    HEAD_BRANCH_FIELD_NUMBER: _ClassVar[int]
    PR_NUMBER_FIELD_NUMBER: _ClassVar[int]
    DRAFT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    action: PrAction
    title: str
    body: str
    base_branch: str
    head_branch: str
    pr_number: int
    draft: bool
    tool_call_id: str
    def __init__(self, action: _Optional[_Union[PrAction, str]] = ..., title: _Optional[str] = ..., body: _Optional[str] = ..., base_branch: _Optional[str] = ..., head_branch: _Optional[str] = ..., pr_number: _Optional[int] = ..., draft: _Optional[bool] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class PrManagementSuccess(_message.Message):
    __slots__ = ("pr_number", "url", "state", "output", "title", "draft")
    PR_NUMBER_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    DRAFT_FIELD_NUMBER: _ClassVar[int]
    pr_number: int
    url: str
    state: str
    output: str
    title: str
    draft: bool
    def __init__(self, pr_number: _Optional[int] = ..., url: _Optional[str] = ..., state: _Optional[str] = ..., output: _Optional[str] = ..., title: _Optional[str] = ..., draft: _Optional[bool] = ...) -> None: ...

class PrManagementResult(_message.Message):
    __slots__ = ("success", "error", "rejected", "aborted")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    success: PrManagementSuccess
    error: _common_pb2.ToolError
    rejected: _common_pb2.Rejected
    aborted: _common_pb2.Aborted
    def __init__(self, success: _Optional[_Union[PrManagementSuccess, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ToolError, _Mapping]] = ..., rejected: _Optional[_Union[_common_pb2.Rejected, _Mapping]] = ..., aborted: _Optional[_Union[_common_pb2.Aborted, _Mapping]] = ...) -> None: ...

class PrManagementToolCall(_message.Message):
    __slots__ = ("args", "result")
    ARGS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    args: PrManagementArgs
    result: PrManagementResult
    def __init__(self, args: _Optional[_Union[PrManagementArgs, _Mapping]] = ..., result: _Optional[_Union[PrManagementResult, _Mapping]] = ...) -> None: ...
