from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RuleKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RULE_KIND_UNSPECIFIED: _ClassVar[RuleKind]
    RULE_KIND_ALWAYS: _ClassVar[RuleKind]
    RULE_KIND_AUTO_ATTACHED: _ClassVar[RuleKind]
    RULE_KIND_AGENT_REQUESTED: _ClassVar[RuleKind]
    RULE_KIND_MANUAL: _ClassVar[RuleKind]
    RULE_KIND_FOLDER: _ClassVar[RuleKind]

class McpServerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MCP_SERVER_STATE_UNSPECIFIED: _ClassVar[McpServerState]
    MCP_SERVER_STATE_CONNECTED: _ClassVar[McpServerState]
    MCP_SERVER_STATE_FAILED: _ClassVar[McpServerState]
    MCP_SERVER_STATE_NEEDS_AUTH: _ClassVar[McpServerState]
    MCP_SERVER_STATE_STARTING: _ClassVar[McpServerState]
    MCP_SERVER_STATE_BACKEND: _ClassVar[McpServerState]
RULE_KIND_UNSPECIFIED: RuleKind
RULE_KIND_ALWAYS: RuleKind
RULE_KIND_AUTO_ATTACHED: RuleKind
RULE_KIND_AGENT_REQUESTED: RuleKind
RULE_KIND_MANUAL: RuleKind
RULE_KIND_FOLDER: RuleKind
MCP_SERVER_STATE_UNSPECIFIED: McpServerState
MCP_SERVER_STATE_CONNECTED: McpServerState
MCP_SERVER_STATE_FAILED: McpServerState
MCP_SERVER_STATE_NEEDS_AUTH: McpServerState
MCP_SERVER_STATE_STARTING: McpServerState
MCP_SERVER_STATE_BACKEND: McpServerState

class GetAgentContextRequest(_message.Message):
    __slots__ = ("paths", "agent_id", "requested_rules")
    PATHS_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_RULES_FIELD_NUMBER: _ClassVar[int]
    paths: _containers.RepeatedScalarFieldContainer[str]
    agent_id: str
    requested_rules: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, paths: _Optional[_Iterable[str]] = ..., agent_id: _Optional[str] = ..., requested_rules: _Optional[_Iterable[str]] = ...) -> None: ...

class AgentRule(_message.Message):
    __slots__ = ("path", "kind", "description", "globs", "content", "applies", "format", "scope", "matched_paths", "name")
    PATH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    GLOBS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    APPLIES_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    MATCHED_PATHS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    path: str
    kind: RuleKind
    description: str
    globs: _containers.RepeatedScalarFieldContainer[str]
    content: str
    applies: bool
    format: str
    scope: str
    matched_paths: _containers.RepeatedScalarFieldContainer[str]
    name: str
    def __init__(self, path: _Optional[str] = ..., kind: _Optional[_Union[RuleKind, str]] = ..., description: _Optional[str] = ..., globs: _Optional[_Iterable[str]] = ..., content: _Optional[str] = ..., applies: _Optional[bool] = ..., format: _Optional[str] = ..., scope: _Optional[str] = ..., matched_paths: _Optional[_Iterable[str]] = ..., name: _Optional[str] = ...) -> None: ...

class AgentSkill(_message.Message):
    __slots__ = ("name", "description", "path", "files", "origin")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    path: str
    files: _containers.RepeatedScalarFieldContainer[str]
    origin: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., path: _Optional[str] = ..., files: _Optional[_Iterable[str]] = ..., origin: _Optional[str] = ...) -> None: ...

class SubagentDefinition(_message.Message):
    __slots__ = ("name", "description", "model", "tools", "readonly", "is_background", "path", "prompt", "origin")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    READONLY_FIELD_NUMBER: _ClassVar[int]
    IS_BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    model: str
    tools: _containers.RepeatedScalarFieldContainer[str]
    readonly: bool
    is_background: bool
    path: str
    prompt: str
    origin: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., model: _Optional[str] = ..., tools: _Optional[_Iterable[str]] = ..., readonly: _Optional[bool] = ..., is_background: _Optional[bool] = ..., path: _Optional[str] = ..., prompt: _Optional[str] = ..., origin: _Optional[str] = ...) -> None: ...

class ContextDiagnostic(_message.Message):
    __slots__ = ("path", "message")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    path: str
    message: str
    def __init__(self, path: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class AgentReflection(_message.Message):
    __slots__ = ("at_ms", "unexpected_action_outcomes", "relevant_instructions", "scenario_analysis", "critical_synthesis", "next_steps")
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    UNEXPECTED_ACTION_OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    RELEVANT_INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    SCENARIO_ANALYSIS_FIELD_NUMBER: _ClassVar[int]
    CRITICAL_SYNTHESIS_FIELD_NUMBER: _ClassVar[int]
    NEXT_STEPS_FIELD_NUMBER: _ClassVar[int]
    at_ms: int
    unexpected_action_outcomes: str
    relevant_instructions: str
    scenario_analysis: str
    critical_synthesis: str
    next_steps: str
    def __init__(self, at_ms: _Optional[int] = ..., unexpected_action_outcomes: _Optional[str] = ..., relevant_instructions: _Optional[str] = ..., scenario_analysis: _Optional[str] = ..., critical_synthesis: _Optional[str] = ..., next_steps: _Optional[str] = ...) -> None: ...

class GetAgentContextResponse(_message.Message):
    __slots__ = ("rules", "skills", "subagents", "diagnostics", "mode", "reflections")
    RULES_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    SUBAGENTS_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REFLECTIONS_FIELD_NUMBER: _ClassVar[int]
    rules: _containers.RepeatedCompositeFieldContainer[AgentRule]
    skills: _containers.RepeatedCompositeFieldContainer[AgentSkill]
    subagents: _containers.RepeatedCompositeFieldContainer[SubagentDefinition]
    diagnostics: _containers.RepeatedCompositeFieldContainer[ContextDiagnostic]
    mode: str
    reflections: _containers.RepeatedCompositeFieldContainer[AgentReflection]
    def __init__(self, rules: _Optional[_Iterable[_Union[AgentRule, _Mapping]]] = ..., skills: _Optional[_Iterable[_Union[AgentSkill, _Mapping]]] = ..., subagents: _Optional[_Iterable[_Union[SubagentDefinition, _Mapping]]] = ..., diagnostics: _Optional[_Iterable[_Union[ContextDiagnostic, _Mapping]]] = ..., mode: _Optional[str] = ..., reflections: _Optional[_Iterable[_Union[AgentReflection, _Mapping]]] = ...) -> None: ...

class ListMcpToolsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class McpToolInfo(_message.Message):
    __slots__ = ("name", "description", "input_schema", "title")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    input_schema: str
    title: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema: _Optional[str] = ..., title: _Optional[str] = ...) -> None: ...

class McpServerInfo(_message.Message):
    __slots__ = ("name", "state", "error", "tools", "resource_count", "prompt_count", "source", "transport")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_COUNT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_COUNT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: McpServerState
    error: str
    tools: _containers.RepeatedCompositeFieldContainer[McpToolInfo]
    resource_count: int
    prompt_count: int
    source: str
    transport: str
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[McpServerState, str]] = ..., error: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[McpToolInfo, _Mapping]]] = ..., resource_count: _Optional[int] = ..., prompt_count: _Optional[int] = ..., source: _Optional[str] = ..., transport: _Optional[str] = ...) -> None: ...

class ListMcpToolsResponse(_message.Message):
    __slots__ = ("servers", "problems")
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedCompositeFieldContainer[McpServerInfo]
    problems: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, servers: _Optional[_Iterable[_Union[McpServerInfo, _Mapping]]] = ..., problems: _Optional[_Iterable[str]] = ...) -> None: ...

class WatchAgentContextRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AgentContextChange(_message.Message):
    __slots__ = ("paths", "kinds", "mcp_servers_added", "mcp_servers_removed", "mcp_servers_changed", "watching", "sequence")
    PATHS_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_ADDED_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    WATCHING_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    paths: _containers.RepeatedScalarFieldContainer[str]
    kinds: _containers.RepeatedScalarFieldContainer[str]
    mcp_servers_added: _containers.RepeatedScalarFieldContainer[str]
    mcp_servers_removed: _containers.RepeatedScalarFieldContainer[str]
    mcp_servers_changed: _containers.RepeatedScalarFieldContainer[str]
    watching: _containers.RepeatedScalarFieldContainer[str]
    sequence: int
    def __init__(self, paths: _Optional[_Iterable[str]] = ..., kinds: _Optional[_Iterable[str]] = ..., mcp_servers_added: _Optional[_Iterable[str]] = ..., mcp_servers_removed: _Optional[_Iterable[str]] = ..., mcp_servers_changed: _Optional[_Iterable[str]] = ..., watching: _Optional[_Iterable[str]] = ..., sequence: _Optional[int] = ...) -> None: ...
