"""Hooks: the user's scripts around tool calls, as Cursor and Claude Code define them.

Where they come from (all that exist are used, in this order):
- `~/.cursor/hooks.json` and `<workspace>/.cursor/hooks.json`:
      {"version": 1, "hooks": {"beforeShellExecution": [
          {"command": "./hooks/guard.sh", "matcher": "rm -rf", "timeout": 10, "failClosed": true}]}}
  The command runs with the `.cursor` folder holding the file as its working directory.
- Claude Code's `~/.claude/settings.json`, `<workspace>/.claude/settings.json` and
  `settings.local.json`: {"hooks": {"PreToolUse": [{"matcher": "Bash|Write",
  "hooks": [{"type": "command", "command": "...", "timeout": 60}]}], "PostToolUse": [...]}},
  run in the workspace.

Events: before a call `preToolUse` (every tool), `beforeShellExecution`, `beforeReadFile`,
`beforeMCPExecution`; after it `postToolUse` (it ran) or `postToolUseFailure`, and
`afterShellExecution`, `afterFileEdit`, `afterMCPExecution`. A `matcher` is matched against the
tool's names (Cursor's `Shell`, `Read`, `Write`, ...; Claude's `Bash`, `Edit`, `mcp__srv__tool`;
the variant name): plain names (`Edit|Write`) must match exactly, anything else is a regular
expression searched in the name. For shell and file events it is also searched in the command
or the path (`"matcher": "rm -rf"`). No matcher, `""` or `*` matches everything. Each tool's
names and events come from its spec (exec_daemon/kernel/spec.py); a tool whose spec declares
none is seen as its variant's name in CamelCase ("foo_tool_call" -> "Foo"), with preToolUse
and postToolUse only.

A hook gets one JSON object on stdin (hook_event_name, conversation_id, tool_name, tool_input,
tool_use_id, cwd, workspace_roots and the event's own fields: command, file_path, output, ...)
with no secret in it: a shell call's secret variables (named in its `secret_env` or among the
daemon's injected secret names) keep their names but their values read `[REDACTED]`, and every
value the redactor knows (exec_daemon/guards/redaction.py) is masked wherever it occurs (the
command, a file's content, the tool's output): a hook may log its input. It may answer one
JSON object on stdout: `permission` allow/deny/ask (Claude's
`hookSpecificOutput.permissionDecision` and `decision: block` too), `user_message`,
`agent_message`, `updated_input`, `additional_context`. Exit code 2 denies (stderr is the
message). A crash, a timeout or output that is not JSON fails open — the call goes on and the
daemon logs why — unless the hook says `failClosed`, then the call is refused.

All hooks of one step run at once, each in its own process group, killed at its timeout; none
blocks the event loop. Any deny wins over ask, ask over allow. Deny → the tool's `rejected`
case (source "hook", with the hook's messages); ask → `rejected` with needs_approval, unless the
call itself carries run_mode RUN_MODE_RUN_EVERYTHING (a person approved it). Rewritten input is
judged again by the permission rules before it runs, and the answer then carries the args that
ran (hook_feedback.input_rewritten); a value the hook gives back as it was shown (a masked one
included) stays the call's own. `additional_context` and the messages of allowing hooks go
into the answer's hook_feedback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from agent.v1.common_pb2 import Rejected, RunMode
from agent.v1.shell_pb2 import ShellArgs
from exec_daemon.guards.config_files import WatchedConfig, home_dir
from exec_daemon.guards.permissions import Judge, Verdict
from exec_daemon.guards.redaction import (
    REDACTED,
    CallSecrets,
    SecretMatcher,
    SecretStore,
    call_secrets,
    redact_json_value,
)
from exec_daemon.guards.rejections import refused_result, rejected_result
from exec_daemon.kernel.context import Invocation, Middleware, Next
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.metering import Meter, Metric
from exec_daemon.kernel.paths import Declared, DeclaredPaths
from exec_daemon.kernel.runner import HelperFailed, run_helper
from exec_daemon.kernel.spec import HookEvents
from exec_daemon.kernel.state import Daemon

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS = 30.0
# What the daemon keeps of a hook's stdout/stderr (the rest is read and dropped).
OUTPUT_CAP_BYTES = 1024 * 1024
# beforeReadFile hooks get the file's content when it is at most this big.
READ_CONTENT_CAP_BYTES = 1024 * 1024

PRE_TOOL_USE = "preToolUse"
POST_TOOL_USE = "postToolUse"
POST_TOOL_USE_FAILURE = "postToolUseFailure"
BEFORE_SHELL = "beforeShellExecution"
AFTER_SHELL = "afterShellExecution"
BEFORE_READ = "beforeReadFile"
AFTER_EDIT = "afterFileEdit"
BEFORE_MCP = "beforeMCPExecution"
AFTER_MCP = "afterMCPExecution"
EVENTS = frozenset(
    {
        PRE_TOOL_USE,
        POST_TOOL_USE,
        POST_TOOL_USE_FAILURE,
        BEFORE_SHELL,
        AFTER_SHELL,
        BEFORE_READ,
        AFTER_EDIT,
        BEFORE_MCP,
        AFTER_MCP,
    }
)
_CLAUDE_EVENTS = {
    "PreToolUse": PRE_TOOL_USE,
    "PostToolUse": POST_TOOL_USE,
    "PostToolUseFailure": POST_TOOL_USE_FAILURE,
}
_CLAUDE_EVENT_NAMES = {ours: theirs for theirs, ours in _CLAUDE_EVENTS.items()}

# Besides preToolUse, the events before a call of each kind (exec_daemon/kernel/spec.py).
_PRE_EVENTS = {
    HookEvents.SHELL: BEFORE_SHELL,
    HookEvents.READ_FILE: BEFORE_READ,
    HookEvents.MCP: BEFORE_MCP,
}
# Result cases after which the tool counts as having run (postToolUse, not ...Failure).
_RAN_CASES = frozenset({"success", "failure"})
# Kinds whose matchers are also searched in the call's subject (the command or the path).
_SUBJECT_EVENTS = frozenset({BEFORE_SHELL, AFTER_SHELL, BEFORE_READ, AFTER_EDIT})
_PLAIN_MATCHER = re.compile(r"[\w\s,|-]*")


@dataclass(frozen=True)
class Hook:
    event: str
    command: str
    matcher: str
    timeout: float
    fail_closed: bool
    cwd: Path
    dialect: str  # "cursor" or "claude"
    origin: Path


@dataclass
class HookAnswer:
    hook: Hook
    decision: str | None = None  # allow, deny, ask
    user_message: str = ""
    agent_message: str = ""
    updated_input: dict[str, Any] | None = None
    additional_context: str = ""
    failure: str | None = None

    @property
    def denies(self) -> bool:
        return self.decision == "deny" or (self.failure is not None and self.hook.fail_closed)


# --- configuration -------------------------------------------------------------------------------


def _timeout(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return DEFAULT_TIMEOUT_SECONDS


def cursor_hooks(document: Any, origin: Path) -> list[Hook]:
    if not isinstance(document, dict) or not isinstance(document.get("hooks"), dict):
        return []
    hooks: list[Hook] = []
    for event, entries in document["hooks"].items():
        if event not in EVENTS or not isinstance(entries, list):
            log.debug("%s: ignoring hooks of event %r", origin, event)
            continue
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
                continue
            if entry.get("type", "command") != "command":
                log.warning("%s: only command hooks can run in the daemon", origin)
                continue
            hooks.append(
                Hook(
                    event=event,
                    command=entry["command"],
                    matcher=str(entry.get("matcher") or ""),
                    timeout=_timeout(entry.get("timeout")),
                    fail_closed=bool(entry.get("failClosed", False)),
                    cwd=origin.parent,
                    dialect="cursor",
                    origin=origin,
                )
            )
    return hooks


def claude_hooks(document: Any, origin: Path, workspace: Path) -> list[Hook]:
    if not isinstance(document, dict) or not isinstance(document.get("hooks"), dict):
        return []
    hooks: list[Hook] = []
    for claude_event, groups in document["hooks"].items():
        event = _CLAUDE_EVENTS.get(claude_event)
        if event is None or not isinstance(groups, list):
            continue
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            for entry in group["hooks"]:
                if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
                    continue
                if entry.get("type", "command") != "command":
                    continue
                hooks.append(
                    Hook(
                        event=event,
                        command=entry["command"],
                        matcher=str(group.get("matcher") or ""),
                        timeout=_timeout(entry.get("timeout")),
                        fail_closed=bool(entry.get("failClosed", False)),
                        cwd=workspace,
                        dialect="claude",
                        origin=origin,
                    )
                )
    return hooks


def hook_files(daemon: Daemon) -> list[Path]:
    home, workspace = home_dir(daemon), Path(daemon.workspace)
    return [
        home / ".cursor/hooks.json",
        workspace / ".cursor/hooks.json",
        home / ".claude/settings.json",
        workspace / ".claude/settings.json",
        workspace / ".claude/settings.local.json",
    ]


def _hooks_from(found: list[tuple[Path, Any]], workspace: Path) -> tuple[Hook, ...]:
    hooks: list[Hook] = []
    for path, document in found:
        if path.parent.name == ".claude":
            hooks.extend(claude_hooks(document, path, workspace))
        else:
            hooks.extend(cursor_hooks(document, path))
    return tuple(hooks)


def hook_scripts(hooks: Sequence[Hook]) -> tuple[Declared, ...]:
    """The files a hook command runs (`./hooks/audit.sh`, `python3 hooks/check.py`): every word
    of the command that names an existing file, relative to the hook's working folder. The
    daemon runs them unconfined, so they are as protected as the config naming them."""
    found: dict[str, Declared] = {}
    for hook in hooks:
        try:
            words = shlex.split(hook.command)
        except ValueError:
            words = hook.command.split()
        for word in words:
            candidate = os.path.join(hook.cwd, os.path.expanduser(word))
            if os.path.isfile(candidate):
                real = os.path.realpath(candidate)
                found[real] = Declared(real, f"a script the hooks of {hook.origin} run")
    return tuple(found.values())


class HookFiles:
    def __init__(self, daemon: Daemon) -> None:
        workspace = Path(daemon.workspace)
        self._config = WatchedConfig(
            daemon, hook_files, lambda found: _hooks_from(found, workspace)
        )
        self._scripts: tuple[tuple[Hook, ...], tuple[Declared, ...]] = ((), ())
        daemon.service(DeclaredPaths).add_provider(self.scripts)

    def hooks(self) -> tuple[Hook, ...]:
        return self._config.get()

    def scripts(self) -> tuple[Declared, ...]:
        hooks = self.hooks()
        if hooks is not self._scripts[0]:
            self._scripts = (hooks, hook_scripts(hooks))
        return self._scripts[1]


# --- the call as hooks see it --------------------------------------------------------------------


@dataclass(frozen=True)
class CallView:
    """The names, input and subjects of one call, computed once for all its hooks."""

    tool: str
    events: HookEvents
    cursor_name: str
    claude_name: str
    names: tuple[str, ...]
    tool_input: dict[str, Any]
    subject: str  # the command (shell), the path (read/edit), else ""

    @staticmethod
    def of(inv: Invocation) -> CallView:
        args = inv.args
        hooks = inv.spec.hook_view()
        what = inv.spec.call_subject(args)
        cursor_name = hooks.name
        claude_name = hooks.claude_name or cursor_name
        names = [cursor_name, claude_name, inv.tool]
        subject = ""
        if hooks.events is HookEvents.FILE_EDIT:
            whole = args.HasField("contents")  # type: ignore[attr-defined]
            cursor_name = claude_name = "Write" if whole else "Edit"
            names = [cursor_name, "StrReplace" if not whole else "Write", "Edit", inv.tool]
            subject = what.paths_written[0] if what.paths_written else ""
        elif hooks.events is HookEvents.MCP:
            claude_name = f"mcp__{what.mcp_server}__{what.mcp_tool}"
            names += [claude_name, f"{what.mcp_server}:{what.mcp_tool}", what.mcp_tool]
        elif hooks.events is HookEvents.SHELL:
            subject = what.command
        elif hooks.events is HookEvents.READ_FILE:
            subject = what.paths_read[0] if what.paths_read else ""
        tool_input = json_format.MessageToDict(args, preserving_proto_field_name=True)
        if "path" in tool_input:
            tool_input.setdefault("file_path", tool_input["path"])
        if hooks.events is HookEvents.FILE_EDIT and "contents" in tool_input:
            tool_input.setdefault("content", tool_input["contents"])
        return CallView(
            tool=inv.tool,
            events=hooks.events,
            cursor_name=cursor_name,
            claude_name=claude_name,
            names=tuple(dict.fromkeys(name for name in names if name)),
            tool_input=tool_input,
            subject=subject,
        )


@dataclass(frozen=True)
class HiddenSecrets:
    """What the hooks of one call never see (a hook may log its input): the values of the
    call's secret variables (ShellArgs.env named in its secret_env or among the daemon's secret
    names), masked whole whatever their length, their names kept; and anywhere in what a hook
    gets, every secret the redactor knows (the daemon's and the call's own)."""

    env_names: frozenset[str]
    secrets: SecretStore | CallSecrets

    @staticmethod
    def of(store: SecretStore, args: Message) -> HiddenSecrets:
        names = store.command_env_secret_names(args) if isinstance(args, ShellArgs) else frozenset()
        return HiddenSecrets(names, call_secrets(store, args))

    @property
    def matcher(self) -> SecretMatcher:
        return self.secrets.matcher

    def tool_input(self, view: CallView) -> dict[str, Any]:
        """The call's input with its secret variables' values masked."""
        env = view.tool_input.get("env")
        if not self.env_names or not isinstance(env, dict):
            return view.tool_input
        hidden = {name: REDACTED if name in self.env_names else env[name] for name in env}
        return {**view.tool_input, "env": hidden}

    def shown_input(self, view: CallView) -> dict[str, Any]:
        """The call's input exactly as its hooks got it."""
        shown: dict[str, Any] = redact_json_value(self.tool_input(view), self.matcher)
        return shown


def unmasked(
    update: dict[str, Any], shown: dict[str, Any], original: dict[str, Any]
) -> dict[str, Any]:
    """A hook's updated input with every value it gave back as it was shown (a masked secret in
    it) replaced by the call's own: a hook echoing the input back, or a part of it, changes
    nothing (a variable's value does not become `[REDACTED]`)."""
    restored: dict[str, Any] = {}
    for key, value in update.items():
        seen, own = shown.get(key), original.get(key)
        if key in shown and key in original and value == seen:
            restored[key] = own
        elif isinstance(value, dict) and isinstance(seen, dict) and isinstance(own, dict):
            restored[key] = unmasked(value, seen, own)
        else:
            restored[key] = value
    return restored


def _matches_names(matcher: str, names: Sequence[str]) -> bool:
    if _PLAIN_MATCHER.fullmatch(matcher):
        wanted = {part.strip() for part in re.split(r"[|,]", matcher) if part.strip()}
        return any(name in wanted for name in names)
    return any(_search(matcher, name) for name in names)


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return pattern == text


def hook_applies(hook: Hook, view: CallView) -> bool:
    matcher = hook.matcher.strip()
    if matcher in ("", "*"):
        return True
    if _matches_names(matcher, view.names):
        return True
    return hook.event in _SUBJECT_EVENTS and bool(view.subject) and _search(matcher, view.subject)


# --- running one hook ----------------------------------------------------------------------------


async def run_hook(
    hook: Hook, payload: dict[str, Any], env: dict[str, str], matcher: SecretMatcher
) -> HookAnswer:
    """Runs one hook process to its end or its timeout; never raises (but for cancellation).
    The hook gets `payload` with every secret `matcher` knows masked."""
    started = time.monotonic()
    # A tool's output can be large: redact and encode it off the event loop.
    data = await asyncio.to_thread(lambda: json.dumps(redact_json_value(payload, matcher)).encode())
    try:
        done = await run_helper(
            ["/bin/sh", "-c", hook.command],
            env=env,
            cwd=str(hook.cwd) if hook.cwd.is_dir() else None,
            input=data,
            time_limit=hook.timeout,
            limit=OUTPUT_CAP_BYTES,
            stderr_limit=OUTPUT_CAP_BYTES,
        )
    except HelperFailed as exc:
        if exc.code == ErrorCode.TIMEOUT:
            return _failed(hook, f"timed out after {hook.timeout:g}s")
        return _failed(hook, f"could not start ({exc.message})")
    log.debug(
        "hook %r (%s) exited %s in %.0f ms",
        hook.command,
        hook.event,
        done.returncode,
        (time.monotonic() - started) * 1000,
    )
    return answer_from(hook, done.returncode, done.stdout.data, done.stderr.data)


def _failed(hook: Hook, why: str) -> HookAnswer:
    closed = " (failClosed: the call is refused)" if hook.fail_closed else " (the call goes on)"
    log.warning("%s hook %r from %s %s%s", hook.event, hook.command, hook.origin, why, closed)
    return HookAnswer(hook, failure=why)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _decision(value: Any) -> str | None:
    word = _text(value).lower()
    return {
        "allow": "allow",
        "approve": "allow",
        "deny": "deny",
        "block": "deny",
        "ask": "ask",
    }.get(word)


def answer_from(hook: Hook, exit_code: int, stdout: bytes, stderr: bytes) -> HookAnswer:
    err_text = stderr.decode("utf-8", "replace").strip()[:4096]
    if exit_code == 2:
        message = err_text or "blocked by a hook"
        return HookAnswer(hook, decision="deny", user_message=message, agent_message=message)
    if exit_code != 0:
        return _failed(hook, f"exited with {exit_code}: {err_text[:200]}")
    out_text = stdout.decode("utf-8", "replace").strip()
    if not out_text:
        return HookAnswer(hook)
    try:
        data = json.loads(out_text)
    except ValueError:
        return _failed(hook, "answered something that is not JSON")
    if not isinstance(data, dict):
        return _failed(hook, "answered JSON that is not an object")
    specific = data.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    decision = _decision(specific.get("permissionDecision")) or _decision(
        data.get("permission") or data.get("decision")
    )
    agent_message = (
        _text(data.get("agent_message"))
        or _text(data.get("agentMessage"))
        or _text(specific.get("permissionDecisionReason"))
        or _text(data.get("reason"))
    )
    if data.get("continue") is False:
        decision = "deny"
        agent_message = agent_message or _text(data.get("stopReason"))
    updated = data.get("updated_input", data.get("updatedInput", specific.get("updatedInput")))
    return HookAnswer(
        hook,
        decision=decision,
        user_message=_text(data.get("user_message"))
        or _text(data.get("userMessage"))
        or _text(data.get("systemMessage")),
        agent_message=agent_message,
        updated_input=updated if isinstance(updated, dict) else None,
        additional_context=_text(data.get("additional_context"))
        or _text(data.get("additionalContext"))
        or _text(specific.get("additionalContext")),
    )


# --- the middleware ------------------------------------------------------------------------------


@dataclass
class _Step:
    """The hooks of one step of a call (before or after it) with their payloads."""

    runs: list[tuple[Hook, dict[str, Any]]] = field(default_factory=list)

    def add(self, hook: Hook, payload: dict[str, Any]) -> None:
        self.runs.append((hook, payload))


@dataclass(frozen=True)
class _AfterCall:
    """What the step after a call needs of the step before it."""

    hooks: Sequence[Hook]
    view: CallView
    hidden: HiddenSecrets
    started: float


class HookRunner:
    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        self._files = daemon.service(HookFiles)
        self._judge = daemon.service(Judge)
        self._meter = daemon.service(Meter)
        self._secrets = daemon.service(SecretStore)

    def _env(self) -> dict[str, str]:
        env = self._daemon.env.snapshot()
        env["CURSOR_PROJECT_DIR"] = env["CLAUDE_PROJECT_DIR"] = self._daemon.workspace
        return env

    def _payload(
        self,
        hook: Hook,
        event: str,
        inv: Invocation,
        view: CallView,
        extra: dict[str, Any],
        hidden: HiddenSecrets,
    ) -> dict[str, Any]:
        claude = hook.dialect == "claude"
        tool_use_id = getattr(inv.args, "tool_call_id", "") or str(inv.ctx.call_id)
        payload: dict[str, Any] = {
            "hook_event_name": _CLAUDE_EVENT_NAMES.get(event, event) if claude else event,
            "conversation_id": inv.ctx.agent_id,
            "session_id": inv.ctx.agent_id,
            "generation_id": str(inv.ctx.call_id),
            "tool_name": view.claude_name if claude else view.cursor_name,
            "tool_input": hidden.tool_input(view),
            "tool_use_id": tool_use_id,
            "cwd": getattr(inv.args, "working_directory", "") or self._daemon.workspace,
            "workspace_roots": [self._daemon.workspace],
        }
        payload.update(extra)
        return payload

    async def _run_step(self, step: _Step, hidden: HiddenSecrets) -> list[HookAnswer]:
        if not step.runs:
            return []
        env, matcher = self._env(), hidden.matcher
        runs = (run_hook(hook, payload, env, matcher) for hook, payload in step.runs)
        answers = list(await asyncio.gather(*runs))
        for answer in answers:
            outcome = "failed" if answer.failure else answer.decision or "none"
            self._meter.add(Metric.HOOK_RUNS, outcome=outcome)
        return answers

    async def __call__(self, inv: Invocation, call_next: Next) -> Message:
        hooks = self._files.hooks()
        if not hooks:
            return await call_next(inv)
        view = CallView.of(inv)
        hidden = HiddenSecrets.of(self._secrets, inv.args)
        before = await self._before_step(hooks, inv, view, hidden)
        answers = await self._run_step(before, hidden)
        refusal = _refusal(answers, approved=inv.ctx.run_mode == RunMode.RUN_MODE_RUN_EVERYTHING)
        if refusal is not None:
            return rejected_result(inv.tool, inv.args, refusal)
        inv, refused = await self._rewrite(inv, answers, view, hidden)
        if refused is not None and refused.refusal is not None:
            return refused_result(inv.tool, inv.args, refused.refusal, refused.denied_path)
        _note(inv, answers)
        if inv.ctx.report.feedback.input_rewritten:
            # The secrets stay the ones of the call as it came: a hook that drops a name from
            # secret_env does not make after-hooks see its value.
            view = CallView.of(inv)
        started = time.monotonic()
        after = _AfterCall(hooks, view, hidden, started)
        try:
            result = await call_next(inv)
        except CodedError as exc:
            failure = {"error": exc.message, "duration": _ms_since(started)}
            await self._after(after, inv, None, failure)
            raise
        await self._after(after, inv, result, {})
        return result

    async def _before_step(
        self, hooks: Sequence[Hook], inv: Invocation, view: CallView, hidden: HiddenSecrets
    ) -> _Step:
        step = _Step()
        events = [PRE_TOOL_USE]
        if view.events in _PRE_EVENTS:
            events.append(_PRE_EVENTS[view.events])
        fields: dict[str, dict[str, Any]] = {}
        for hook in hooks:
            if hook.event in events and hook_applies(hook, view):
                if hook.event not in fields:
                    fields[hook.event] = await self._before_fields(hook.event, inv, view)
                payload = self._payload(hook, hook.event, inv, view, fields[hook.event], hidden)
                step.add(hook, payload)
        return step

    async def _before_fields(self, event: str, inv: Invocation, view: CallView) -> dict[str, Any]:
        if event == BEFORE_SHELL:
            return {"command": view.subject}
        if event == BEFORE_READ:
            path = self._absolute(view.subject)
            fields: dict[str, Any] = {"file_path": path, "attachments": []}
            content = await asyncio.to_thread(_small_text_file, path)
            if content is not None:
                fields["content"] = content
            return fields
        if event == BEFORE_MCP:
            return _mcp_fields(inv.args)
        return {}

    def _absolute(self, path: str) -> str:
        return str(Path(self._daemon.workspace, path)) if path else path

    async def _rewrite(
        self, inv: Invocation, answers: list[HookAnswer], view: CallView, hidden: HiddenSecrets
    ) -> tuple[Invocation, Verdict | None]:
        """The call as the hooks rewrote it, judged again; or the verdict refusing it."""
        updates = [a.updated_input for a in answers if a.updated_input]
        if not updates:
            return inv, None
        shown = await asyncio.to_thread(hidden.shown_input, view)
        args = type(inv.args)()
        args.CopyFrom(inv.args)
        known = set(args.DESCRIPTOR.fields_by_name)
        for update in updates:
            values = unmasked(update, shown, view.tool_input)
            if "file_path" in values and "path" in known:
                values["path"] = values.pop("file_path")
            if "content" in values and "contents" in known:
                values["contents"] = values.pop("content")
            try:
                json_format.ParseDict(
                    {k: v for k, v in values.items() if k in known},
                    args,
                    ignore_unknown_fields=True,
                )
            except json_format.ParseError as exc:
                log.warning("a hook's updated_input does not fit %s: %s", inv.tool, exc)
                invalid = "a hook rewrote the input into something invalid"
                return inv, Verdict(inv, Rejected(reason=invalid, source="hook"))
        rewritten = replace(inv, args=args)
        verdict = await self._judge(rewritten)
        if verdict.refusal is not None:
            return inv, verdict
        inv.ctx.report.args_run = verdict.invocation.args
        inv.ctx.report.feedback.input_rewritten = True
        return verdict.invocation, None

    async def _after(
        self, call: _AfterCall, inv: Invocation, result: Message | None, failure: dict[str, Any]
    ) -> None:
        view = call.view
        case = result.WhichOneof("result") if result is not None else None  # type: ignore[attr-defined]
        ran = case in _RAN_CASES
        events = [POST_TOOL_USE if ran else POST_TOOL_USE_FAILURE]
        if view.events is HookEvents.SHELL and case in ("success", "failure", "timeout"):
            events.append(AFTER_SHELL)
        elif view.events is HookEvents.FILE_EDIT and case == "success":
            events.append(AFTER_EDIT)
        elif view.events is HookEvents.MCP and case not in (None, "rejected", "aborted"):
            events.append(AFTER_MCP)
        selected = [h for h in call.hooks if h.event in events and hook_applies(h, view)]
        if not selected:
            return
        output, output_json = await asyncio.to_thread(_result_dict, result, call.hidden.matcher)
        duration = _ms_since(call.started)
        step = _Step()
        for hook in selected:
            extra = _after_fields(hook, inv, view, (output, output_json), duration) | failure
            step.add(hook, self._payload(hook, hook.event, inv, view, extra, call.hidden))
        _note(inv, await self._run_step(step, call.hidden))


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _result_dict(result: Message | None, matcher: SecretMatcher) -> tuple[dict[str, Any], str]:
    """The result as JSON data and text, secrets masked (a secret in the text would be escaped
    as JSON escapes it, so the data is masked before it becomes text); both can be large:
    built off the event loop."""
    if result is None:
        return {}, "{}"
    output = json_format.MessageToDict(result, preserving_proto_field_name=True)
    output = redact_json_value(output, matcher)
    return output, json.dumps(output)


def _case_fields(output: dict[str, Any]) -> dict[str, Any]:
    for value in output.values():
        if isinstance(value, dict):
            return value
    return {}


def _after_fields(
    hook: Hook,
    inv: Invocation,
    view: CallView,
    result: tuple[dict[str, Any], str],
    duration: int,
) -> dict[str, Any]:
    output, output_json = result
    fields: dict[str, Any] = {"duration": duration}
    if hook.event in (POST_TOOL_USE, POST_TOOL_USE_FAILURE):
        fields["tool_output"] = output_json
        fields["tool_response"] = output
    elif hook.event == AFTER_SHELL:
        case = _case_fields(output)
        fields["command"] = view.subject
        fields["output"] = case.get("interleaved_output") or (
            str(case.get("stdout", "")) + str(case.get("stderr", ""))
        )
        fields["exit_code"] = case.get("exit_code", 0)
    elif hook.event == AFTER_EDIT:
        args = inv.args
        whole = args.HasField("contents")  # type: ignore[attr-defined]
        fields["file_path"] = str(Path(inv.ctx.daemon.workspace, args.path))  # type: ignore[attr-defined]
        fields["edits"] = [
            {"old_string": "", "new_string": args.contents}  # type: ignore[attr-defined]
            if whole
            else {"old_string": args.old_string, "new_string": args.new_string}  # type: ignore[attr-defined]
        ]
    elif hook.event == AFTER_MCP:
        fields |= _mcp_fields(inv.args)
        fields["result_json"] = output_json
    return fields


def _mcp_fields(args: Message) -> dict[str, Any]:
    arguments = getattr(args, "args", None)
    tool_input = json_format.MessageToDict(arguments) if arguments is not None else {}
    return {
        "tool_name": getattr(args, "tool_name", "") or getattr(args, "name", ""),
        "tool_input": tool_input,
        "server": getattr(args, "provider_identifier", ""),
    }


def _small_text_file(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(READ_CONTENT_CAP_BYTES + 1)
    except OSError:
        return None
    if len(data) > READ_CONTENT_CAP_BYTES or b"\0" in data:
        return None
    return data.decode("utf-8", "replace")


def _joined(answers: list[HookAnswer], attribute: str) -> str:
    return "\n".join(text for a in answers if (text := getattr(a, attribute)))


def _refusal(answers: list[HookAnswer], *, approved: bool) -> Rejected | None:
    denying = [a for a in answers if a.denies]
    if denying:
        message = _joined(denying, "agent_message") or _joined(denying, "user_message")
        if not message:
            message = "; ".join(f"a failClosed hook {a.failure}" for a in denying if a.failure)
        return Rejected(
            reason=f"blocked by a {denying[0].hook.event} hook: {message or 'denied'}",
            source="hook",
            user_message=_joined(denying, "user_message"),
            agent_message=_joined(denying, "agent_message"),
        )
    asking = [a for a in answers if a.decision == "ask"]
    if asking and not approved:
        message = _joined(asking, "user_message") or _joined(asking, "agent_message")
        return Rejected(
            reason=f"a {asking[0].hook.event} hook asks for approval: {message or 'ask'}",
            source="hook",
            needs_approval=True,
            user_message=_joined(asking, "user_message"),
            agent_message=_joined(asking, "agent_message"),
        )
    return None


def _note(inv: Invocation, answers: list[HookAnswer]) -> None:
    feedback = inv.ctx.report.feedback
    for answer in answers:
        if answer.additional_context:
            feedback.additional_context.append(answer.additional_context)
        if answer.user_message:
            feedback.user_messages.append(answer.user_message)
        if answer.agent_message:
            feedback.agent_messages.append(answer.agent_message)


def hooks_middleware(daemon: Daemon) -> Middleware:
    return daemon.service(HookRunner)
