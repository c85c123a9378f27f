"""Run modes, permissions.json allowlists, read-only agents, protected paths: may this call run?

Everything here is decided from the tool's spec (exec_daemon/kernel/spec.py), never its name.

Run mode (the daemon's --run-mode, or the call's own `run_mode`) gates each tool as its spec's
`run_mode` rule says (shell: terminalAllowlist; MCP: mcpAllowlist; fetch, web_fetch:
fetchAllowlist; read_mcp_resource with a download_path, setup_vm_environment and
write_shell_stdin: approval; a tool that declares no rule: approval; the rest are not gated):
- run_everything: every call runs.
- allowlist: allowlisted calls run; the rest answer `rejected` with needs_approval, so the
  orchestrator can ask a person and resend the call with run_mode RUN_MODE_RUN_EVERYTHING.
  Deterministic: nothing is sandboxed or reviewed automatically.
- auto_review: allowlisted calls run; other shell commands run confined to the workspace when
  the sandbox is available (--sandbox-enabled and the kernel probe passed; their
  `requested_sandbox_policy` is set to WORKSPACE_READWRITE unless they asked for a confined
  one); the rest (MCP, fetch, shell asking for full access) answer `rejected` with needs_review
  for the orchestrator's classifier. `autoRun.allow_instructions`/`block_instructions` travel in
  every such rejection.

For every shell call the guard takes the one sandbox decision (exec_daemon/kernel/sandboxing.py)
with what it demands (read-only, confined) and hands it to the shell in `CallContext.sandbox`;
the answer's args show the policy the decision imposed.

permissions.json is read from `~/.cursor/` and `<workspace>/.cursor/` (JSON with comments) and
the two are merged (lists concatenated):
    {"terminalAllowlist": ["git", "npm run test"],   // prefix match on whole words
     "mcpAllowlist": ["github:*", "*:read_*"],        // server:tool, * globs
     "fetchAllowlist": ["*.github.com"],              // hosts of fetch/web_fetch calls, * globs
     "autoRun": {"allow_instructions": [...], "block_instructions": [...]}}
A shell line is allowlisted only when every command in it is (`git status && rm -rf /` is not),
it redirects output to no file, and what its programs run in turn is allowlisted too
(exec_daemon/guards/runners.py: `find -exec`, sed's `e`, `xargs`, ...). With the sandbox
enabled, allowlisted commands run in it like the rest: one asking to run outside
(insecure_none) needs approval (review). A command that runs the repository's own code (a build
tool: `make`, `npm run`, `cargo build`) runs without approval only confined: with no sandbox to
be had it needs approval (review).

Independently of the run mode:
- An agent started read-only by the Task tool, and an agent in ask mode (switch_mode), may only
  make calls whose spec (or, for fetch, whose method) says they change nothing; shell commands
  are judged by what they do (read-only ones run, confined read-only when the sandbox is up).
  An agent in plan mode may also write its plan (create_plan). A tool that does not declare its
  effects counts as changing everything.
- Every path a call's spec says it writes is checked, on where it really points, before the
  handler runs (the handlers check again when they open it): a protected path
  (exec_daemon/kernel/protected.py, DeclaredPaths) is refused; one outside the writable set
  (exec_daemon/kernel/writable.py) needs approval (review in auto_review) unless the call runs
  in run_everything.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from google.protobuf.message import Message

from agent.v1.common_pb2 import Rejected
from agent.v1.shell_pb2 import SandboxPolicy, ShellArgs
from exec_daemon.guards.command_env import command_env_refusal
from exec_daemon.guards.commands import judge_allowlist, not_read_only
from exec_daemon.guards.config_files import WatchedConfig, home_dir
from exec_daemon.guards.rejections import refused_result
from exec_daemon.kernel.agents import AgentModes, SubagentSessions
from exec_daemon.kernel.context import (
    AUTO_REVIEW,
    RUN_EVERYTHING,
    Invocation,
    Middleware,
    Next,
    call_run_mode,
)
from exec_daemon.kernel.paths import DeclaredPaths
from exec_daemon.kernel.protected import protected_reason, resolve_path
from exec_daemon.kernel.sandboxing import SandboxDemand, Sandboxing
from exec_daemon.kernel.spec import EVERYTHING, Effect, RunModeRule, Subject
from exec_daemon.kernel.state import Daemon
from exec_daemon.kernel.writable import WritableAreas, WritableSet

_EFFECT_WORDS = {
    Effect.PLAN: "writes a plan",
    Effect.WORKSPACE: "changes the workspace",
    Effect.MACHINE: "changes the machine",
}
_UNGATED = RunModeRule.UNGATED  # read on every call: a global is faster than the enum's attribute


@dataclass(frozen=True)
class PermissionRules:
    terminal_allowlist: tuple[str, ...] = ()
    mcp_allowlist: tuple[str, ...] = ()
    fetch_allowlist: tuple[str, ...] = ()
    allow_instructions: tuple[str, ...] = ()
    block_instructions: tuple[str, ...] = ()


_NO_RULES = PermissionRules()


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str) and item.strip())


def rules_from(documents: list[Any]) -> PermissionRules:
    rules = PermissionRules()
    for document in documents:
        if not isinstance(document, dict):
            continue
        auto_run = document.get("autoRun")
        auto_run = auto_run if isinstance(auto_run, dict) else {}
        rules = PermissionRules(
            terminal_allowlist=rules.terminal_allowlist
            + _strings(document.get("terminalAllowlist")),
            mcp_allowlist=rules.mcp_allowlist + _strings(document.get("mcpAllowlist")),
            fetch_allowlist=rules.fetch_allowlist + _strings(document.get("fetchAllowlist")),
            allow_instructions=rules.allow_instructions
            + _strings(auto_run.get("allow_instructions")),
            block_instructions=rules.block_instructions
            + _strings(auto_run.get("block_instructions")),
        )
    return rules


def permission_files(daemon: Daemon) -> list[Path]:
    relative = Path(".cursor/permissions.json")
    return [home_dir(daemon) / relative, Path(daemon.workspace) / relative]


class PermissionFiles:
    """~/.cursor/permissions.json + <workspace>/.cursor/permissions.json, merged, kept fresh."""

    def __init__(self, daemon: Daemon) -> None:
        self._config = WatchedConfig(
            daemon, permission_files, lambda found: rules_from([doc for _path, doc in found])
        )

    def rules(self) -> PermissionRules:
        return self._config.get()


def effective_run_mode(inv: Invocation) -> str:
    return call_run_mode(inv.ctx)


def mcp_allowlisted(subject: Subject, allowlist: tuple[str, ...]) -> bool:
    qualified = f"{subject.mcp_server}:{subject.mcp_tool}"
    return any(fnmatch.fnmatchcase(qualified, entry) for entry in allowlist)


def mcp_server_may_start(daemon: Daemon, server: str) -> bool:
    """Whether the daemon may start `server` unasked (ListMcpTools): where a tool call could
    start it without approval, i.e. under --run-mode run_everything, or when an mcpAllowlist
    entry allows some tool of it."""
    if daemon.config.run_mode == RUN_EVERYTHING:
        return True
    allowlist = daemon.service(PermissionFiles).rules().mcp_allowlist
    return any(fnmatch.fnmatchcase(server, entry.partition(":")[0]) for entry in allowlist)


def fetch_allowlisted(subject: Subject, allowlist: tuple[str, ...]) -> bool:
    host = (urlsplit(subject.url).hostname or "").lower()
    return bool(host) and any(fnmatch.fnmatchcase(host, entry.lower()) for entry in allowlist)


async def _with_sandbox_decision(
    sandboxing: Sandboxing, inv: Invocation, demand: SandboxDemand
) -> Invocation:
    """The shell call carrying its sandbox decision (and, in its args, the policy it imposed)."""
    args = inv.args
    assert isinstance(args, ShellArgs)
    asked = args.requested_sandbox_policy if args.HasField("requested_sandbox_policy") else None
    decision = await sandboxing.decide(asked, demand)
    if decision.imposed is not None:
        args = ShellArgs()
        args.CopyFrom(inv.args)
        args.requested_sandbox_policy.CopyFrom(decision.imposed)
        inv.ctx.report.args_run = args
    return replace(inv, args=args, ctx=replace(inv.ctx, sandbox=decision))


class Verdict(NamedTuple):
    """Either the call runs (possibly with changed args) or it is refused (one per call: a
    NamedTuple costs less than a frozen dataclass)."""

    invocation: Invocation
    refusal: Rejected | None = None
    # The protected path that refused it, when that is why (answered as permission_denied).
    denied_path: str = ""


@dataclass(frozen=True)
class Restriction:
    """What an agent may change, and who says so."""

    allows: Effect
    who: str
    source: str


def _what_it_changes(inv: Invocation, effects: Effect) -> str:
    if inv.spec.effects is None:
        return f"{inv.tool} does not declare what it changes, so it counts as changing everything"
    return f"{inv.tool} " + " and ".join(
        words for flag, words in _EFFECT_WORDS.items() if flag in effects
    )


class Judge:
    """Decides one call; also used again by the hooks when a hook rewrote the call's input."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        self._files = daemon.service(PermissionFiles)
        self._subagents = daemon.service(SubagentSessions)
        self._modes = daemon.service(AgentModes)
        self._sandboxing = daemon.service(Sandboxing)
        self._writable = daemon.service(WritableAreas)
        self._declared = daemon.service(DeclaredPaths)

    async def __call__(self, inv: Invocation) -> Verdict:
        # Every call of every tool comes here: the common case (no restriction, nothing written,
        # not gated) is kept to a few lookups.
        spec = inv.spec
        subject = spec.call_subject(inv.args)
        restrictions = self._restrictions(inv.ctx.agent_id)
        for restriction in restrictions:
            refusal = _restricted(inv, subject, restriction)
            if refusal is not None:
                return Verdict(inv, refusal)
        mode = effective_run_mode(inv)
        rule = spec.run_mode_rule()
        if subject.paths_written:
            verdict = await self._written_paths(inv, subject, mode, rule)
            if verdict.refusal is not None:
                return verdict
        # The shell is the one tool whose calls take a sandbox decision.
        shell = rule is RunModeRule.SHELL_ALLOWLIST
        if not shell and (mode == RUN_EVERYTHING or rule is _UNGATED):
            return Verdict(inv)
        why_not: str | None = None
        confine: str | None = None
        rules = _NO_RULES
        if mode != RUN_EVERYTHING and self._gated(inv, subject, rule):
            rules = self._files.rules()
            if shell:
                why_not, confine = self._shell_allowlisted(inv, subject, rules)
            else:
                why_not = _why_not_allowed(inv, rule, subject, rules)
        if why_not is not None and not (mode == AUTO_REVIEW and shell):
            return Verdict(inv, _needs_someone(rule, mode, why_not, rules))
        if not shell:
            return Verdict(inv)
        # A restricted agent's command passed as read-only; one nobody approved in auto_review,
        # or one that runs the repository's code, runs confined or is approved (reviewed).
        unconfined_reason = why_not or confine
        demand = SandboxDemand(read_only=bool(restrictions), confined=unconfined_reason is not None)
        inv = await _with_sandbox_decision(self._sandboxing, inv, demand)
        assert inv.ctx.sandbox is not None
        if inv.ctx.sandbox.needs_review:
            assert unconfined_reason is not None
            return Verdict(inv, _needs_someone(rule, mode, unconfined_reason, rules))
        return Verdict(inv)

    def _shell_allowlisted(
        self, inv: Invocation, subject: Subject, rules: PermissionRules
    ) -> tuple[str | None, str | None]:
        """Why the command needs approval (review), and why it may run only confined: it runs
        the repository's code, or, with the sandbox enabled, where allowlisted commands run,
        it asks to run outside (insecure_none)."""
        judged = judge_allowlist(subject.command, rules.terminal_allowlist)
        args = inv.args
        assert isinstance(args, ShellArgs)
        if args.env:
            # The call's own variables are judged with it: they may run code the line does not.
            env_refusal = command_env_refusal(args.env)
            if env_refusal is not None and judged.refusal is None:
                judged = replace(judged, refusal=env_refusal)
        if (
            judged.confine is None
            and self._daemon.config.sandbox_enabled
            and args.HasField("requested_sandbox_policy")
            and args.requested_sandbox_policy.type == SandboxPolicy.TYPE_INSECURE_NONE
        ):
            return judged.refusal, "the command asks to run outside the sandbox"
        return judged.refusal, judged.confine

    @staticmethod
    def _gated(inv: Invocation, subject: Subject, rule: RunModeRule) -> bool:
        if rule is _UNGATED:
            return False
        return rule is not RunModeRule.WRITES_NEED_APPROVAL or bool(inv.spec.call_effects(subject))

    def _restrictions(self, agent_id: str) -> tuple[Restriction, ...]:
        read_only = bool(agent_id) and self._subagents.is_readonly(agent_id)
        allows = self._modes.allows(agent_id)
        if not read_only and allows is EVERYTHING:  # `is`: comparing Flags costs more
            return ()
        return self._restrictions_of(agent_id, read_only, allows)

    def _restrictions_of(
        self, agent_id: str, read_only: bool, allows: Effect
    ) -> tuple[Restriction, ...]:
        restrictions = []
        if read_only:
            restrictions.append(
                Restriction(Effect.NONE, f"read-only agent {agent_id}", "readonly_agent")
            )
        if allows is not EVERYTHING:
            mode = self._modes.mode(agent_id)
            who = f"agent {agent_id or '(default)'} is in {mode} mode"
            restrictions.append(Restriction(allows, who, "agent_mode"))
        return tuple(restrictions)

    async def _written_paths(
        self, inv: Invocation, subject: Subject, mode: str, rule: RunModeRule
    ) -> Verdict:
        """Protected paths are refused; a path outside the writable set needs approval (review
        in auto_review) unless the call runs in run_everything."""
        workspace = self._daemon.workspace
        paths = [resolve_path(workspace, path) for path in subject.paths_written if path]
        writable = None if mode == RUN_EVERYTHING else self._writable
        # Resolving symlinks touches the disk.
        refused = await asyncio.to_thread(
            _first_refused, workspace, paths, self._declared, writable
        )
        if refused is None:
            return Verdict(inv)
        path, reason, protected = refused
        if protected:
            return Verdict(inv, Rejected(reason=reason, source="protected_path"), denied_path=path)
        why = f"{inv.tool} writes outside the writable set: {reason}"
        return Verdict(inv, _needs_someone(rule, mode, why, self._files.rules()))


def _restricted(inv: Invocation, subject: Subject, restriction: Restriction) -> Rejected | None:
    beyond = inv.spec.call_effects(subject) & ~restriction.allows
    if not beyond:
        return None
    if inv.spec.run_mode_rule() is RunModeRule.SHELL_ALLOWLIST:
        # A shell command is judged by what it does: read-only ones may run (confined read-only
        # when the sandbox is up: the sandbox decision's read-only demand).
        reason = not_read_only(subject.command)
        if reason is None and isinstance(inv.args, ShellArgs) and inv.args.env:
            reason = command_env_refusal(inv.args.env)
        if reason is None:
            return None
        why = f"the command is not read-only ({reason})"
    else:
        why = _what_it_changes(inv, beyond)
    return Rejected(reason=f"{restriction.who}: {why}", source=restriction.source)


def _first_refused(
    workspace: str, paths: list[Path], declared: DeclaredPaths, writable: WritableAreas | None
) -> tuple[str, str, bool] | None:
    """The first path refused, why, and whether it is protected (the table, the declared
    paths; else: outside `writable`)."""
    outside: tuple[str, str, bool] | None = None
    found: WritableSet | None = None
    for path in paths:
        if "\0" in str(path):
            continue  # no file has that name: the handler's checked open answers invalid_argument
        real = os.path.realpath(path)
        reason = protected_reason(workspace, path) or declared.reason_for(real)
        if reason is not None:
            return str(path), reason, True
        if writable is not None and outside is None:
            found = found or writable.current()
            reason = found.outside_reason(real)
            if reason is not None:
                outside = str(path), reason, False
    return outside


def _why_not_allowed(
    inv: Invocation, rule: RunModeRule, subject: Subject, rules: PermissionRules
) -> str | None:
    if rule is RunModeRule.MCP_ALLOWLIST:
        if mcp_allowlisted(subject, rules.mcp_allowlist):
            return None
        return "the MCP tool is not in mcpAllowlist"
    if rule is RunModeRule.FETCH_ALLOWLIST:
        if fetch_allowlisted(subject, rules.fetch_allowlist):
            return None
        return "the host is not in fetchAllowlist"
    if rule is RunModeRule.WRITES_NEED_APPROVAL:
        return _what_it_changes(inv, inv.spec.call_effects(subject))
    if inv.spec.run_mode is None:
        return f"{inv.tool} declares no run-mode rule, so every call needs approval"
    return f"{inv.tool} needs approval outside run_everything"


def _needs_someone(rule: RunModeRule, mode: str, why_not: str, rules: PermissionRules) -> Rejected:
    review = mode == AUTO_REVIEW
    who = "review" if review else "approval"
    return Rejected(
        reason=f"needs {who}: {why_not} (run mode {mode})",
        needs_approval=not review,
        needs_review=review,
        sandbox_unavailable=review and rule is RunModeRule.SHELL_ALLOWLIST,
        allow_instructions=rules.allow_instructions,
        block_instructions=rules.block_instructions,
        source="permissions",
    )


def permissions_middleware(daemon: Daemon) -> Middleware:
    judge = daemon.service(Judge)

    async def permissions(inv: Invocation, call_next: Next) -> Message:
        verdict = await judge(inv)
        if verdict.refusal is not None:
            return refused_result(inv.tool, inv.args, verdict.refusal, verdict.denied_path)
        return await call_next(verdict.invocation)

    return permissions
