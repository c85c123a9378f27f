"""Run modes, permissions.json allowlists and read-only subagents: may this call run at all?

Run mode (the daemon's --run-mode, or the call's own `run_mode`) applies to shell, MCP and fetch
calls — the tools that reach outside the workspace tools' own checks:
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

permissions.json is read from `~/.cursor/` and `<workspace>/.cursor/` (JSON with comments) and
the two are merged (lists concatenated):
    {"terminalAllowlist": ["git", "npm run test"],   // prefix match on whole words
     "mcpAllowlist": ["github:*", "*:read_*"],        // server:tool, * globs
     "fetchAllowlist": ["*.github.com"],              // hosts of fetch/web_fetch calls, * globs
     "autoRun": {"allow_instructions": [...], "block_instructions": [...]}}
A shell line is allowlisted only when every command in it is (`git status && rm -rf /` is not)
and it redirects output to no file.

Independently of the run mode, an agent started read-only by the Task tool cannot edit, write,
delete, apply diffs, write to a shell's stdin, call MCP tools, drive the screen, or run a shell
command that is not read-only (its shell is also confined read-only when the sandbox is up).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from google.protobuf.message import Message

from agent.v1.common_pb2 import Rejected, RunMode
from agent.v1.shell_pb2 import SandboxPolicy
from exec_daemon.dispatch import Invocation, Middleware, Next
from exec_daemon.guards.commands import not_read_only, unallowlisted
from exec_daemon.guards.config_files import WatchedConfig, home_dir
from exec_daemon.guards.rejections import rejected_result
from exec_daemon.state import Daemon
from sandbox.service import SandboxService
from tools.tasks import SubagentSessions

RUN_EVERYTHING, ALLOWLIST, AUTO_REVIEW = "run_everything", "allowlist", "auto_review"
_RUN_MODE_NAMES = {
    RunMode.RUN_MODE_RUN_EVERYTHING: RUN_EVERYTHING,
    RunMode.RUN_MODE_ALLOWLIST: ALLOWLIST,
    RunMode.RUN_MODE_AUTO_REVIEW: AUTO_REVIEW,
}

SHELL = "shell_tool_call"
MCP = "mcp_tool_call"
MCP_RESOURCE = "read_mcp_resource_tool_call"
FETCH_TOOLS = ("fetch_tool_call", "web_fetch_tool_call")

# What a read-only agent may never call.
READ_ONLY_FORBIDDEN = frozenset(
    {
        "edit_tool_call",
        "delete_tool_call",
        "apply_agent_diff_tool_call",
        "write_shell_stdin_tool_call",
        "mcp_tool_call",
        "computer_use_tool_call",
        "generate_image_tool_call",
        "setup_vm_environment_tool_call",
        "pr_management_tool_call",
        "start_grind_execution_tool_call",
    }
)
_SAFE_HTTP_METHODS = frozenset({"", "GET", "HEAD", "OPTIONS"})
_UNCONFINED = (SandboxPolicy.TYPE_UNSPECIFIED, SandboxPolicy.TYPE_INSECURE_NONE)


@dataclass(frozen=True)
class PermissionRules:
    terminal_allowlist: tuple[str, ...] = ()
    mcp_allowlist: tuple[str, ...] = ()
    fetch_allowlist: tuple[str, ...] = ()
    allow_instructions: tuple[str, ...] = ()
    block_instructions: tuple[str, ...] = ()


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


async def sandbox_available(daemon: Daemon) -> bool:
    """Shell commands can run confined: --sandbox-enabled, the feature is built (see
    exec_daemon.cli) and the kernel has what the sandbox needs (probed once)."""
    from exec_daemon.cli import NOT_BUILT_YET

    if not daemon.config.sandbox_enabled or "sandbox_enabled" in NOT_BUILT_YET:
        return False
    support = await daemon.service(SandboxService).start()
    return not support.missing()


def effective_run_mode(inv: Invocation) -> str:
    return _RUN_MODE_NAMES.get(inv.ctx.run_mode, inv.ctx.daemon.config.run_mode)  # type: ignore[call-overload]


def mcp_allowlisted(args: Message, allowlist: tuple[str, ...]) -> bool:
    server = getattr(args, "provider_identifier", "")
    tool = getattr(args, "tool_name", "") or getattr(args, "name", "")
    qualified = f"{server}:{tool}"
    return any(fnmatch.fnmatchcase(qualified, entry) for entry in allowlist)


def fetch_allowlisted(args: Message, allowlist: tuple[str, ...]) -> bool:
    host = (urlsplit(getattr(args, "url", "")).hostname or "").lower()
    return bool(host) and any(fnmatch.fnmatchcase(host, entry.lower()) for entry in allowlist)


def _with_sandbox(inv: Invocation, policy_type: int) -> Invocation:
    args = type(inv.args)()
    args.CopyFrom(inv.args)
    args.requested_sandbox_policy.type = policy_type  # type: ignore[attr-defined]
    inv.ctx.report.args_run = args
    return replace(inv, args=args)


@dataclass(frozen=True)
class Verdict:
    """Either the call runs (possibly with changed args) or it is refused."""

    invocation: Invocation
    refusal: Rejected | None = None


class Judge:
    """Decides one call; also used again by the hooks when a hook rewrote the call's input."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        self._files = daemon.service(PermissionFiles)
        self._subagents = daemon.service(SubagentSessions)

    async def __call__(self, inv: Invocation) -> Verdict:
        if inv.ctx.agent_id and self._subagents.is_readonly(inv.ctx.agent_id):
            verdict = await self._read_only_agent(inv)
            if verdict.refusal is not None:
                return verdict
            inv = verdict.invocation
        mode = effective_run_mode(inv)
        if mode == RUN_EVERYTHING:
            return Verdict(inv)
        why = _always_needs_someone(inv)
        if why is not None:
            return Verdict(inv, self._needs_someone(inv, mode, why, self._files.rules()))
        if inv.tool not in (SHELL, MCP) and inv.tool not in FETCH_TOOLS:
            return Verdict(inv)
        rules = self._files.rules()
        why_not = self._why_not_allowlisted(inv, rules)
        if why_not is None:
            return Verdict(inv)
        if mode == AUTO_REVIEW and inv.tool == SHELL and await self._sandboxable(inv):
            policy = inv.args.requested_sandbox_policy.type  # type: ignore[attr-defined]
            if policy in _UNCONFINED:
                return Verdict(_with_sandbox(inv, SandboxPolicy.TYPE_WORKSPACE_READWRITE))
            return Verdict(inv)
        return Verdict(inv, self._needs_someone(inv, mode, why_not, rules))

    async def _sandboxable(self, inv: Invocation) -> bool:
        asked = inv.args.requested_sandbox_policy.type  # type: ignore[attr-defined]
        explicit_full_access = inv.args.HasField("requested_sandbox_policy") and (  # type: ignore[attr-defined]
            asked == SandboxPolicy.TYPE_INSECURE_NONE
        )
        return not explicit_full_access and await sandbox_available(self._daemon)

    def _why_not_allowlisted(self, inv: Invocation, rules: PermissionRules) -> str | None:
        if inv.tool == SHELL:
            return unallowlisted(inv.args.command, rules.terminal_allowlist)  # type: ignore[attr-defined]
        if inv.tool == MCP:
            if mcp_allowlisted(inv.args, rules.mcp_allowlist):
                return None
            return "the MCP tool is not in mcpAllowlist"
        if fetch_allowlisted(inv.args, rules.fetch_allowlist):
            return None
        return "the host is not in fetchAllowlist"

    def _needs_someone(
        self, inv: Invocation, mode: str, why_not: str, rules: PermissionRules
    ) -> Rejected:
        review = mode == AUTO_REVIEW
        who = "review" if review else "approval"
        return Rejected(
            reason=f"needs {who}: {why_not} (run mode {mode})",
            needs_approval=not review,
            needs_review=review,
            sandbox_unavailable=review and inv.tool == SHELL,
            allow_instructions=rules.allow_instructions,
            block_instructions=rules.block_instructions,
            source="permissions",
        )

    async def _read_only_agent(self, inv: Invocation) -> Verdict:
        refusal = _read_only_refusal(inv)
        if refusal is not None:
            return Verdict(
                inv,
                Rejected(
                    reason=f"read-only agent {inv.ctx.agent_id}: {refusal}", source="readonly_agent"
                ),
            )
        if inv.tool == SHELL and await sandbox_available(self._daemon):
            return Verdict(_with_sandbox(inv, SandboxPolicy.TYPE_WORKSPACE_READONLY))
        return Verdict(inv)


def _downloads(inv: Invocation) -> bool:
    return bool(getattr(inv.args, "download_path", ""))


def _always_needs_someone(inv: Invocation) -> str | None:
    """Why a call needs approval (or review) outside run_everything whatever the allowlists say:
    it writes what something else fills or what the daemon runs later, unconfined."""
    if inv.tool == MCP_RESOURCE and _downloads(inv):
        return "read_mcp_resource with download_path writes a file the MCP server fills"
    if inv.tool == "setup_vm_environment_tool_call":
        return "setup_vm_environment sets the install command future VM sessions run unconfined"
    return None


def _read_only_refusal(inv: Invocation) -> str | None:
    if inv.tool in READ_ONLY_FORBIDDEN:
        return f"{inv.tool} changes things"
    if inv.tool == MCP_RESOURCE and _downloads(inv):
        return "read_mcp_resource with download_path writes a file"
    if inv.tool == SHELL:
        reason = not_read_only(inv.args.command)  # type: ignore[attr-defined]
        return None if reason is None else f"the command is not read-only ({reason})"
    if inv.tool == "fetch_tool_call":
        method = inv.args.method.upper()  # type: ignore[attr-defined]
        if method not in _SAFE_HTTP_METHODS:
            return f"fetch with method {method} may change things"
    return None


def permissions_middleware(daemon: Daemon) -> Middleware:
    judge = daemon.service(Judge)

    async def permissions(inv: Invocation, call_next: Next) -> Message:
        verdict = await judge(inv)
        if verdict.refusal is not None:
            return rejected_result(inv.tool, inv.args, verdict.refusal)
        return await call_next(verdict.invocation)

    return permissions
