"""The subagent loop Task runs in the daemon: a model (tools/models.py) calling the daemon's tools.

Each subagent has its own conversation (kept by agent id, so a Task with `resume` goes on from
where it stopped) and a tool set its type chooses; read-only subagents are offered only the tools
whose spec declares no effect (exec_daemon/kernel/spec.py). Every call the model asks for runs
through the daemon's dispatcher (`daemon.service(ToolCalls)`, the orchestrator's own path: guards,
hooks, redaction) under the subagent's agent id, so the permissions guard refuses a read-only
subagent's writes even when a model asks for a tool it was not offered. Progress streams as
TaskToolCallDelta (the model's text and one line per tool call). Every loop is bounded in model
turns (--subagent-max-steps) and tokens (--subagent-max-tokens). The computer-use subagent is
offered computer_use only, the browser one only the browser's tools (tools/browser.py); an image
a tool answers reaches the model as an image part, not as text (tools/subagent_media.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from agent.v1.agent_pb2 import SubagentType, TaskToolCallDelta
from agent.v1.tool_call_pb2 import ToolCall, ToolCallDelta
from exec_daemon.kernel.config import off_without
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.paths import PathRefused, read_checked
from exec_daemon.kernel.spec import EVERYTHING, Effect, ToolSpec
from exec_daemon.kernel.state import Daemon
from exec_daemon.kernel.tool_calls import ToolCalls
from tools.agent_context import AgentContexts
from tools.browser import BROWSER_TOOL_NAMES, BROWSER_TOOLS, run_browser_tool
from tools.models import ModelEndpoint, model_failure
from tools.subagent_media import (
    TOOL_IMAGE_PREFIX,
    Picture,
    conversation_chars,
    drop_old_tool_images,
    pictures_message,
    split_images,
    tool_images_message,
)

# Subagents never start subagents or batch runs: every loop stays one level deep.
NOT_FOR_SUBAGENTS = frozenset(
    {"task_tool_call", "start_grind_planning_tool_call", "start_grind_execution_tool_call"}
)
# What a tool answers the model, at most (the rest is cut with a note).
TOOL_RESULT_MAX_CHARS = 30_000
# Conversations kept for resuming: each may hold up to max-steps tool results.
MAX_CONVERSATIONS = 64
_CUSTOM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
# Nested messages are described this deep in a tool's JSON schema; deeper ones are any object.
_SCHEMA_DEPTH = 4

_COMMON = (
    "You are a subagent of a coding agent, working in the workspace {workspace}. You call the "
    "tools you are given to do the task below, then answer with a final message: what you "
    "found or did, precisely and briefly, for the agent that gave you the task."
)


@dataclass(frozen=True)
class SubagentKind:
    """What a subagent type chooses: its prompt, whether it only reads, its tools."""

    name: str
    prompt: str
    readonly: bool = False
    # What its tools may change (the permissions guard enforces it through the agent's mode or
    # read-only flag; here it chooses what the model is offered).
    allows: Effect = EVERYTHING
    # Variants this type is offered beyond those every type gets (e.g. computer use).
    only_for_it: frozenset[str] = frozenset()
    model: str = ""
    # The only variants it is offered (and may call), when set: the computer-use subagent sees
    # the desktop, no files or shell.
    only_tools: frozenset[str] | None = None
    # A Task of this type naming an existing subagent of it (agent_id) resumes that one.
    stateful: bool = False
    # It drives the daemon's browser (tools/browser.py, --browser-enabled) with BROWSER_TOOLS.
    browser: bool = False


# Tools only the types named for them are offered.
_SPECIAL_TOOLS = frozenset({"computer_use_tool_call", "record_screen_tool_call"})

KINDS: dict[int, SubagentKind] = {
    SubagentType.SUBAGENT_TYPE_UNSPECIFIED: SubagentKind(
        "generalPurpose", "Research, change and verify code as the task asks."
    ),
    SubagentType.SUBAGENT_TYPE_EXPLORE: SubagentKind(
        "explore",
        "Explore the code base to answer the question: list, search and read files. You "
        "change nothing.",
        readonly=True,
    ),
    SubagentType.SUBAGENT_TYPE_DEBUG: SubagentKind(
        "debug",
        "Find the cause of the bug described: reproduce it, form hypotheses, test them with "
        "the tools, and report the cause with the evidence (and the fix if asked for).",
        stateful=True,
    ),
    SubagentType.SUBAGENT_TYPE_COMPUTER_USE: SubagentKind(
        "computerUse",
        "Operate the desktop with the computer use tool (screenshots, mouse, keyboard) to do "
        "the task. Each screenshot comes to you as an image of 1280x800 pixels; coordinates "
        "you give are in that space.",
        only_tools=frozenset({"computer_use_tool_call"}),
        stateful=True,
    ),
    SubagentType.SUBAGENT_TYPE_MEDIA_REVIEW: SubagentKind(
        "videoReview",
        "Review the recordings and images named in the task and report what they show.",
        readonly=True,
    ),
    SubagentType.SUBAGENT_TYPE_VM_SETUP_HELPER: SubagentKind(
        "vmSetupHelper",
        "Set up this VM for the project: find and run its install steps, then record them "
        "with setup_vm_environment.",
    ),
    SubagentType.SUBAGENT_TYPE_BASH: SubagentKind(
        "bash", "Run the shell commands the task needs and report their results."
    ),
    SubagentType.SUBAGENT_TYPE_SHELL: SubagentKind(
        "shell", "Run the shell commands the task needs and report their results."
    ),
    SubagentType.SUBAGENT_TYPE_BROWSER_USE: SubagentKind(
        "browserUse",
        "Use your browser page to do the task: open URLs, find elements by CSS selector or "
        "accessible name to click and type into, read the page's text and accessibility tree, "
        "take screenshots.",
        only_tools=frozenset(),
        browser=True,
    ),
    SubagentType.SUBAGENT_TYPE_CURSOR_GUIDE: SubagentKind(
        "cursorGuide",
        "Answer the question about Cursor and this workspace's Cursor configuration.",
        readonly=True,
    ),
}


# --- custom subagents: .cursor/agents/<name>.md ------------------------------------------------


class SubagentDefinitions:
    """Custom subagent types, by name: the definitions tools/agent_context.py reads
    (`.cursor/agents/*.md` and `.claude/agents/*.md` in the workspace, then the same under home;
    front matter name, description, model, readonly; the body is the prompt)."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon

    def find(self, name: str) -> SubagentKind | None:
        """Runs in a worker thread (it reads files)."""
        if not _CUSTOM_NAME.match(name):
            raise CodedError(ErrorCode.INVALID_ARGUMENT, f"invalid custom subagent name {name!r}")
        found = self._daemon.service(AgentContexts).subagent(name)
        if found is None:
            return None
        return SubagentKind(
            name=name,
            prompt=found.prompt or found.description,
            readonly=found.readonly,
            model="fast" if found.model == "fast" else "",
        )


def read_agent_file(daemon: Daemon, path: str | Path, limit: int) -> str | None:
    """The text of a workspace file as the agent's read tool would get it (the agent's path
    rules: tools/workspace.py); None when it does not exist."""
    from tools.workspace import AgentPaths

    try:
        data, _info = read_checked(path, daemon.service(AgentPaths), limit)
    except FileNotFoundError:
        return None
    except (OSError, PathRefused) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CodedError(ErrorCode.FAILED_PRECONDITION, f"cannot read {path}: {why}") from None
    return data.decode("utf-8", "replace")


def kind_of(daemon: Daemon, subagent_type: int, custom_name: str) -> SubagentKind:
    if subagent_type == SubagentType.SUBAGENT_TYPE_CUSTOM or custom_name:
        if not custom_name:
            raise CodedError(
                ErrorCode.INVALID_ARGUMENT, "a custom subagent needs custom_subagent_name"
            )
        found = daemon.service(SubagentDefinitions).find(custom_name)
        if found is None:
            raise CodedError(
                ErrorCode.NOT_FOUND,
                f"no custom subagent {custom_name!r}: no definition named so in .cursor/agents/"
                f"{custom_name}.md or .claude/agents/ (workspace or home)",
            )
        return found
    kind = KINDS.get(subagent_type)
    if kind is None:
        raise CodedError(ErrorCode.INVALID_ARGUMENT, f"unknown subagent type {subagent_type}")
    return kind


# --- tools as the model sees them ----------------------------------------------------------------


def tool_name(variant: str) -> str:
    return variant.removesuffix("_tool_call")


def dispatchable(specs: Sequence[ToolSpec], kind: SubagentKind) -> dict[str, ToolSpec]:
    """The tools a subagent of `kind` may call, by the name the model uses (before any
    read-only restriction: that one the permissions guard enforces on every call)."""
    if kind.only_tools is not None:
        return {tool_name(spec.variant): spec for spec in specs if spec.variant in kind.only_tools}
    return {
        tool_name(spec.variant): spec
        for spec in specs
        if spec.variant not in NOT_FOR_SUBAGENTS
        and (spec.variant not in _SPECIAL_TOOLS or spec.variant in kind.only_for_it)
    }


def offered(tools: dict[str, ToolSpec], allows: Effect) -> list[dict[str, Any]]:
    """The tool definitions sent to the model: those whose declared effects the subagent may
    have (a read-only one: only the tools that change nothing)."""
    return [
        function_definition(name, spec)
        for name, spec in tools.items()
        if spec.declared_effects() & ~allows == Effect.NONE
    ]


# What the model is told each tool does (a tool not listed: its handler's docstring, or its name).
DESCRIPTIONS = {
    "read": "Read a file (text; `offset`/`limit` in lines for a part of a long one).",
    "edit": "Write a file (`contents`), or replace `old_string` by `new_string` in it.",
    "delete": "Delete a file.",
    "ls": "List a directory (`path`, absolute or relative to the workspace).",
    "glob": "Find files whose paths match a glob pattern.",
    "grep": "Search file contents with a regular expression (ripgrep).",
    "shell": "Run a bash command in the workspace; its output and exit code come back.",
    "await": "Wait for a background shell command to finish or print more.",
    "write_shell_stdin": "Write characters to a running shell command's input.",
    "apply_agent_diff": "Apply a unified diff to the workspace's files.",
    "fetch": "Make an HTTP request to a public URL.",
    "web_fetch": "Fetch a web page as markdown.",
    "sem_search": "Search the code by meaning (semantic search).",
    "read_lints": "Lint files and report the problems found.",
    "update_todos": "Set the todo list.",
    "read_todos": "Read the todo list.",
    "create_plan": "Save a plan (markdown and todos) in .cursor/plans/.",
    "computer_use": "Act on the desktop: screenshot, click, type, scroll.",
    "record_screen": "Start, save or discard a screen recording.",
    "setup_vm_environment": "Record the commands that install this project's dependencies.",
}


def function_definition(name: str, spec: ToolSpec) -> dict[str, Any]:
    descriptor = _args_descriptor(spec.variant)
    doc = (spec.handler.__doc__ or "").strip().split("\n\n")[0]
    description = DESCRIPTIONS.get(name) or doc or f"The {spec.hook_view().name} tool."
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": " ".join(description.split()),
            "parameters": message_schema(descriptor, _SCHEMA_DEPTH),
        },
    }


def _args_descriptor(variant: str) -> Descriptor:
    variant_type = ToolCall.DESCRIPTOR.fields_by_name[variant].message_type
    assert variant_type is not None
    args = variant_type.fields_by_name["args"].message_type
    assert args is not None
    return args


_SCALARS = {
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "string",
    FieldDescriptor.TYPE_BOOL: "boolean",
    FieldDescriptor.TYPE_DOUBLE: "number",
    FieldDescriptor.TYPE_FLOAT: "number",
}


def message_schema(descriptor: Descriptor, depth: int) -> dict[str, Any]:
    """A JSON schema of a message as protobuf's JSON mapping reads it (field names as in the
    .proto; the ids the orchestrator sets are left out)."""
    if depth <= 0:
        return {"type": "object"}
    properties = {
        field.name: _field_schema(field, depth)
        for field in descriptor.fields
        if field.name != "tool_call_id"
    }
    return {"type": "object", "properties": properties}


def _field_schema(field: FieldDescriptor, depth: int) -> dict[str, Any]:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value = field.message_type.fields_by_name["value"]
        return {"type": "object", "additionalProperties": _single_schema(value, depth)}
    single = _single_schema(field, depth)
    if field.is_repeated:
        return {"type": "array", "items": single}
    return single


def _single_schema(field: FieldDescriptor, depth: int) -> dict[str, Any]:
    if field.message_type is not None:
        return message_schema(field.message_type, depth - 1)
    if field.enum_type is not None:
        return {"type": "string", "enum": [value.name for value in field.enum_type.values]}
    return {"type": _SCALARS.get(field.type, "integer")}


# --- conversations -------------------------------------------------------------------------------


@dataclass
class Conversation:
    messages: list[dict[str, Any]] = field(default_factory=list)
    running: bool = False
    # The type it runs as (a resumed subagent keeps it, custom ones included).
    kind: SubagentKind | None = None


class Conversations:
    """Each subagent's messages, by agent id, in memory: the least recently used idle ones
    beyond MAX_CONVERSATIONS are forgotten (resuming one of those starts a new conversation)."""

    def __init__(self, daemon: Daemon) -> None:
        self._by_agent: OrderedDict[str, Conversation] = OrderedDict()

    def kind_of(self, agent_id: str) -> SubagentKind | None:
        kept = self._by_agent.get(agent_id)
        return kept.kind if kept is not None else None

    def last_success(self, agent_id: str, tool: str) -> dict[str, Any] | None:
        """The `success` of the latest call of `tool` (its name for the model) that succeeded."""
        messages = self.get(agent_id).messages
        names = {
            call["id"]: call["function"]["name"]
            for message in messages
            for call in message.get("tool_calls") or ()
        }
        for message in reversed(messages):
            if message["role"] == "tool" and names.get(message["tool_call_id"]) == tool:
                with contextlib.suppress(ValueError):
                    success = json.loads(message["content"]).get("success")
                    if isinstance(success, dict):
                        return success
        return None

    def get(self, agent_id: str) -> Conversation:
        conversation = self._by_agent.get(agent_id)
        if conversation is None:
            conversation = self._by_agent[agent_id] = Conversation()
        self._by_agent.move_to_end(agent_id)
        idle = [key for key, kept in self._by_agent.items() if not kept.running]
        for forgotten in idle[: max(0, len(self._by_agent) - MAX_CONVERSATIONS)]:
            if forgotten != agent_id:
                del self._by_agent[forgotten]
        return conversation


# --- the loop ------------------------------------------------------------------------------------


@dataclass
class Turn:
    text: str = ""
    tool_calls: dict[int, dict[str, str]] = field(default_factory=dict)
    tokens: int = 0


@dataclass(frozen=True)
class SubagentRun:
    """One run of the loop: who runs, on what, within which bounds."""

    agent_id: str
    kind: SubagentKind
    allows: Effect
    model: str
    max_steps: int
    max_tokens: int


def prepared(
    daemon: Daemon, agent_id: str, kind: SubagentKind, *, readonly: bool, model: str, feature: str
) -> SubagentRun:
    """A run of `kind` as `agent_id` within the daemon's budgets; `model` "fast" or ""."""
    config = daemon.config
    if kind.browser and not config.browser_enabled:
        raise CodedError(
            ErrorCode.UNAVAILABLE, off_without("the browserUse subagent", "--browser-enabled")
        )
    return SubagentRun(
        agent_id=agent_id,
        kind=kind,
        allows=Effect.NONE if readonly else kind.allows,
        model=daemon.service(ModelEndpoint).chat_model(model or kind.model, feature),
        max_steps=config.subagent_max_steps,
        max_tokens=config.subagent_max_tokens,
    )


async def run_subagent(
    subagent: SubagentRun, prompt: str, ctx: CallContext, pictures: Sequence[Picture] = ()
) -> str:
    """Runs the subagent on `prompt` (after its earlier messages; `pictures`, a Task's
    attachments, as image parts after it) until it answers without a tool call; its final
    message. Raises CodedError (budget, model endpoint)."""
    daemon = ctx.daemon
    conversation = daemon.service(Conversations).get(subagent.agent_id)
    if conversation.running:
        raise CodedError(
            ErrorCode.FAILED_PRECONDITION, f"subagent {subagent.agent_id} is already running"
        )
    specs = daemon.service(ToolCalls).specs
    tools = dispatchable(specs, subagent.kind)
    definitions = offered(tools, subagent.allows)
    if subagent.kind.browser:
        definitions += BROWSER_TOOLS
    if not conversation.messages:
        system = _COMMON.format(workspace=daemon.workspace) + "\n\n" + subagent.kind.prompt
        conversation.messages.append({"role": "system", "content": system})
    if pictures:
        conversation.messages.append(pictures_message(prompt, pictures))
    else:
        conversation.messages.append({"role": "user", "content": prompt})
    conversation.kind = subagent.kind
    conversation.running = True
    try:
        return await _loop(subagent, conversation.messages, tools, definitions, ctx)
    finally:
        _answer_unanswered(conversation.messages)
        conversation.running = False


def _answer_unanswered(messages: list[dict[str, Any]]) -> None:
    """After a run was stopped (abort, budget, error) mid-turn: every tool call of the last
    assistant message gets an answer, so a resumed conversation is one a provider accepts."""
    last = next(
        (
            index
            for index in range(len(messages) - 1, -1, -1)
            if messages[index]["role"] == "assistant"
        ),
        None,
    )
    if last is None:
        return
    answered = {m["tool_call_id"] for m in messages[last + 1 :] if m["role"] == "tool"}
    for call in messages[last].get("tool_calls") or ():
        if call["id"] not in answered:
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": "error: not run (stopped)"}
            )


async def _loop(
    subagent: SubagentRun,
    messages: list[dict[str, Any]],
    tools: dict[str, ToolSpec],
    definitions: list[dict[str, Any]],
    ctx: CallContext,
) -> str:
    tokens = 0
    for _step in range(subagent.max_steps):
        turn = await _model_turn(subagent, messages, definitions, ctx)
        tokens += turn.tokens
        calls = [turn.tool_calls[index] for index in sorted(turn.tool_calls)]
        assistant: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if calls:
            assistant["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls
            ]
        messages.append(assistant)
        if not calls:
            return turn.text
        pictures: list[Picture] = []
        for call in calls:
            await _say(ctx, subagent.agent_id, f"\n→ {call['name']} {call['arguments'][:200]}\n")
            answer, images = await _run_tool(
                call, tools, subagent.agent_id, ctx, browser=subagent.kind.browser
            )
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": answer})
            pictures.extend(images)
        # A tool message holds text only: the images follow, once every call has its answer.
        if pictures:
            messages.append(tool_images_message(pictures))
        if tokens > subagent.max_tokens:
            raise CodedError(
                ErrorCode.RESOURCE_EXHAUSTED,
                f"subagent {subagent.agent_id} used {tokens} tokens, more than its budget of "
                f"{subagent.max_tokens} (--subagent-max-tokens), before giving a final answer",
            )
    raise CodedError(
        ErrorCode.RESOURCE_EXHAUSTED,
        f"subagent {subagent.agent_id} took {subagent.max_steps} model turns "
        "(--subagent-max-steps) without giving a final answer",
    )


async def _model_turn(
    subagent: SubagentRun,
    messages: list[dict[str, Any]],
    definitions: list[dict[str, Any]],
    ctx: CallContext,
) -> Turn:
    import openai

    client = ctx.daemon.service(ModelEndpoint).client("Task (subagents)")
    drop_old_tool_images(messages)
    turn = Turn()
    try:
        stream = await client.chat.completions.create(  # type: ignore[call-overload]
            model=subagent.model,
            messages=messages,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
            tools=definitions or openai.omit,
        )
        async with stream:
            async for chunk in stream:
                if chunk.usage is not None:
                    turn.tokens = chunk.usage.total_tokens
                for choice in chunk.choices:
                    await _take_delta(turn, choice.delta, subagent.agent_id, ctx)
    except openai.OpenAIError as exc:
        raise model_failure(exc, f"subagent {subagent.agent_id}") from None
    if not turn.tokens:
        # No usage reported: about four characters a token.
        turn.tokens = (conversation_chars(messages) + len(turn.text)) // 4
    return turn


async def _take_delta(turn: Turn, delta: Any, agent_id: str, ctx: CallContext) -> None:
    if delta.content:
        turn.text += delta.content
        await _say(ctx, agent_id, delta.content)
    for piece in delta.tool_calls or ():
        call = turn.tool_calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
        call["id"] = piece.id or call["id"]
        if piece.function is not None:
            call["name"] += piece.function.name or ""
            call["arguments"] += piece.function.arguments or ""


async def _say(ctx: CallContext, agent_id: str, text: str) -> None:
    await ctx.emit(
        ToolCallDelta(task_tool_call_delta=TaskToolCallDelta(agent_id=agent_id, text=text))
    )


async def _run_tool(
    call: dict[str, str],
    tools: dict[str, ToolSpec],
    agent_id: str,
    ctx: CallContext,
    *,
    browser: bool = False,
) -> tuple[str, list[Picture]]:
    """What the model reads back: the call's result as JSON (or why it did not run), and the
    images the result held (not in the JSON: they go to the model as images)."""
    if browser and call["name"] in BROWSER_TOOL_NAMES:
        return await _run_browser_tool(call, agent_id, ctx)
    spec = tools.get(call["name"])
    if spec is None:
        return f"error: there is no tool {call['name']!r} for this subagent", []
    try:
        tool_call = _tool_call(spec.variant, call["arguments"])
    except CodedError as failure:
        return f"error {failure.code}: {failure.message}", []
    sub_ctx = CallContext(
        daemon=ctx.daemon,
        call_id=ctx.call_id,
        agent_id=agent_id,
        extras=ctx.extras,
        run_mode=ctx.run_mode,
    )
    # Its own task: an abort of the Task cancels it too, and whatever the tool makes of that
    # (the shell answers `aborted` and goes on), the Task's own cancellation stays visible here.
    running = asyncio.create_task(ctx.daemon.service(ToolCalls).run(tool_call, sub_ctx))
    try:
        answer = await running
    except CodedError as failure:
        return f"error {failure.code}: {failure.message}", []
    finally:
        _raise_if_cancelled()
    result, pictures = split_images(getattr(answer, spec.variant).result, call["name"])
    text = _cut(json_format.MessageToJson(result, preserving_proto_field_name=True, indent=None))
    if pictures:
        text += f"\n[{len(pictures)} image(s) from this call follow in the next message]"
    return text, pictures


async def _run_browser_tool(
    call: dict[str, str], agent_id: str, ctx: CallContext
) -> tuple[str, list[Picture]]:
    try:
        arguments = json.loads(call["arguments"] or "{}")
        if not isinstance(arguments, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        return f"error invalid_argument: the arguments are not a JSON object: {exc}", []
    try:
        answer = await run_browser_tool(ctx.daemon, agent_id, call["name"], arguments)
    except CodedError as failure:
        return f"error {failure.code}: {failure.message}", []
    if not answer.png:
        return answer.text, []
    caption = f"{TOOL_IMAGE_PREFIX}{call['name']} call:"
    return answer.text + "\n[the screenshot follows in the next message]", [
        Picture("image/png", answer.png, caption)
    ]


def _raise_if_cancelled() -> None:
    """A tool answers an abort with its `aborted` result instead of raising: the abort of the
    Task must still end the loop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _tool_call(variant: str, arguments: str) -> ToolCall:
    tool_call = ToolCall()
    args: Message = getattr(tool_call, variant).args
    try:
        parsed = json.loads(arguments or "{}")
        json_format.ParseDict(parsed, args, ignore_unknown_fields=True)
    except (ValueError, json_format.ParseError) as exc:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT, f"the arguments are not valid for {variant}: {exc}"
        ) from None
    return tool_call


def _cut(text: str) -> str:
    if len(text) <= TOOL_RESULT_MAX_CHARS:
        return text
    return text[:TOOL_RESULT_MAX_CHARS] + f"\n[cut: {len(text)} characters in all]"
