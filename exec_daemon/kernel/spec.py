"""What a tool declares about itself for the guards: its `ToolSpec`, written beside its handler.

Each module of tools/ declares the spec of each of its handlers; exec_daemon/registry.py is the
list of them; the dispatcher (exec_daemon/rpc/dispatch.py) takes the handlers from there and hands
the spec to the middleware with every call. The guards (exec_daemon/guards/) read specs, never
tool names.

Undeclared means dangerous: a spec that leaves `effects` out is treated as changing the workspace
and the machine (read-only subagents and the ask/plan modes refuse it), one that leaves
`run_mode` out needs approval outside run_everything, one that leaves `hooks` out is seen by the
hooks under a name made from its variant ("foo_bar_tool_call" -> "FooBar") with the generic
events. tests/test_registry.py fails when a tool of the registry leaves any field out.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from google.protobuf.message import Message

# For attribution (tools/reports.py): the lines a call wrote, by the path it wrote them to
# (from the workspace, the call's args and its result).
EditLines = Callable[[str, Any, Message], dict[str, tuple[list[str], list[str]]]]


class Effect(enum.Flag):
    """What a call may change. NONE: it only reads (daemon bookkeeping such as todos aside)."""

    NONE = 0
    # The agent's plan file (`.cursor/plans/*.md`) and nothing else: what plan mode may write.
    PLAN = enum.auto()
    # Files of the workspace.
    WORKSPACE = enum.auto()
    # Anything else: processes, the screen, files outside the workspace, remote services.
    MACHINE = enum.auto()


EVERYTHING = Effect.PLAN | Effect.WORKSPACE | Effect.MACHINE


class RunModeRule(enum.Enum):
    """How the run modes (allowlist, auto_review) gate a tool; run_everything runs every call."""

    # The run mode does not gate it (its own checks, protected paths included, are enough).
    UNGATED = "ungated"
    # The command must be in terminalAllowlist (or, in auto_review, run sandboxed).
    SHELL_ALLOWLIST = "shell_allowlist"
    # server:tool must be in mcpAllowlist.
    MCP_ALLOWLIST = "mcp_allowlist"
    # The URL's host must be in fetchAllowlist.
    FETCH_ALLOWLIST = "fetch_allowlist"
    # A call that changes nothing runs; one that changes something needs approval (or review).
    WRITES_NEED_APPROVAL = "writes_need_approval"
    # Every call needs approval (or review): what a tool that declares nothing gets.
    NEEDS_APPROVAL = "needs_approval"


class HookEvents(enum.Enum):
    """Which hook events a tool's calls raise, besides preToolUse and postToolUse(Failure)."""

    GENERIC = "generic"
    # beforeShellExecution, afterShellExecution (matchers also searched in the command).
    SHELL = "shell"
    # beforeReadFile (matchers also searched in the path).
    READ_FILE = "read_file"
    # afterFileEdit (matchers also searched in the path; Cursor's name is Write or Edit).
    FILE_EDIT = "file_edit"
    # beforeMCPExecution, afterMCPExecution (Claude's name is mcp__<server>__<tool>).
    MCP = "mcp"


@dataclass(frozen=True)
class Hooks:
    """How hooks see a tool."""

    # Cursor's hook tool name (HooksToolName: Shell, Read, Write, Delete, LS, ...).
    name: str
    # Claude Code's name for it, when it differs (Bash, TodoWrite, WebFetch).
    claude_name: str = ""
    events: HookEvents = HookEvents.GENERIC


class Subject(NamedTuple):
    """What one call acts on, taken from its args (paths as the args spell them).

    A NamedTuple: one is made for every call, and a frozen dataclass costs several times more."""

    command: str = ""
    paths_read: tuple[str, ...] = ()
    paths_written: tuple[str, ...] = ()
    url: str = ""
    mcp_server: str = ""
    mcp_tool: str = ""
    # What this call changes when it is less than the spec declares (a GET fetch: NONE).
    effects: Effect | None = None


NO_SUBJECT = Subject()


def no_subject(_args: Any) -> Subject:
    """For tools whose args name nothing the guards check."""
    return NO_SUBJECT


def hook_name_of(variant: str) -> str:
    """How hooks name a tool that declares no name: "foo_bar_tool_call" -> "FooBar"."""
    return "".join(part.capitalize() for part in variant.removesuffix("_tool_call").split("_"))


@dataclass(frozen=True)
class ToolSpec:
    """One ToolCall variant: its handler and what the guards need to know about it."""

    # The ToolCall oneof field, e.g. "shell_tool_call".
    variant: str
    # (args, CallContext) -> result; typed loosely here: the context module builds on this one.
    handler: Callable[[Any, Any], Awaitable[Message]]
    # What its calls may change; None (undeclared) counts as everything.
    effects: Effect | None = None
    # How the run modes gate it; None (undeclared) means every call needs approval.
    run_mode: RunModeRule | None = None
    # How hooks see it; None (undeclared) means its derived name and the generic events.
    hooks: Hooks | None = None
    # Its subject from its args; None (undeclared) means none (no protected-path check can see
    # what it writes, so declare paths_written when it writes files the args name).
    subject: Callable[[Any], Subject] | None = None
    # Tools that edit files for the agent say which lines they wrote (None: not recorded).
    edit_lines: EditLines | None = None
    # Its calls reach services that continue the caller's trace from OpenTelemetry's current
    # span (the MCP SDK sends `traceparent` to MCP servers): telemetry makes the call's span
    # current while it runs. Others skip that cost (exec_daemon/telemetry/tracing.py).
    continues_trace: bool = False

    def declared_effects(self) -> Effect:
        return EVERYTHING if self.effects is None else self.effects

    def call_subject(self, args: Any) -> Subject:
        return NO_SUBJECT if self.subject is None else self.subject(args)

    def call_effects(self, subject: Subject) -> Effect:
        """What a call with this subject may change: the declared effects, or less if it says so."""
        declared = self.declared_effects()
        return declared if subject.effects is None else subject.effects & declared

    def run_mode_rule(self) -> RunModeRule:
        return RunModeRule.NEEDS_APPROVAL if self.run_mode is None else self.run_mode

    def hook_view(self) -> Hooks:
        return Hooks(hook_name_of(self.variant)) if self.hooks is None else self.hooks

    def undeclared(self) -> list[str]:
        """The guard-facing fields left to their undeclared default."""
        return [name for name in GUARDED_FIELDS if getattr(self, name) is None]


# What every tool must declare (tests/test_registry.py holds the registry to it).
GUARDED_FIELDS = ("effects", "run_mode", "hooks", "subject")
