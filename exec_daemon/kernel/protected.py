"""Protected paths: the ones an agent must not change, because changing them runs code or widens
what the agent may do (git config and hooks, editor settings, Cursor's own config).

`PROTECTED_PATH_RULES` is the one definition: `protected_reason` applies it to a path (the
permissions guard to every path a tool's spec says it writes, the file tools again in their
handlers, on real paths through exec_daemon/kernel/paths.py), and the sandbox
(sandbox/protected.py) mounts the same paths read-only. Each rule has a scope: the workspace,
every home folder, or the system. The trust model is in SECURITY.md.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pathspec


@dataclass(frozen=True)
class ProtectedRule:
    # gitignore syntax ("!" lines re-allow what a rule refused), anchored by `scope`:
    # "workspace": relative to the workspace root (a "**/" rule applies at any depth, also
    # outside the workspace: nested repositories); "home": relative to every home folder (the
    # daemon's, the agent's HOME, /root, /home/*); "system": an absolute path.
    pattern: str
    reason: str
    scope: Literal["workspace", "home", "system"] = "workspace"


_CURSOR_REASON = "Cursor configuration (hooks and their scripts, MCP servers, permissions, sandbox, environment) runs code or widens what the agent may do"
_CLAUDE_REASON = "Claude configuration (settings, hooks, MCP servers) can run code"
_RC_REASON = "shell start-up files run in every shell the daemon starts"
_GIT_REASON = "git configuration can make git run arbitrary commands"

PROTECTED_PATH_RULES: tuple[ProtectedRule, ...] = (
    ProtectedRule("/.vscode", "editor settings and tasks can run code in the user's editor"),
    ProtectedRule("/.cursorignore", ".cursorignore decides which files the agent may see"),
    ProtectedRule("/.cursor/**", _CURSOR_REASON),
    ProtectedRule("/.claude/**", _CLAUDE_REASON),
    # Rules, commands, skills and agents are the user's prompts, not configuration; worktrees
    # are checkouts the agent works in.
    ProtectedRule("!/.cursor/rules/**", ""),
    ProtectedRule("!/.cursor/commands/**", ""),
    ProtectedRule("!/.cursor/worktrees/**", ""),
    ProtectedRule("!/.cursor/skills/**", ""),
    ProtectedRule("!/.cursor/agents/**", ""),
    ProtectedRule("!/.cursor/plans/**", ""),  # create_plan's own output (markdown)
    ProtectedRule("!/.claude/commands/**", ""),
    ProtectedRule("!/.claude/agents/**", ""),
    ProtectedRule("!/.claude/skills/**", ""),
    # Last, so they also hold inside the writable `.cursor/worktrees/` checkouts.
    # A `.git` file (`gitdir: X`) makes git use X's config and hooks; inside a `.git` directory
    # the agent's own git writes objects, refs, logs, index and HEAD, but nothing that tells
    # git where to read config or what to run (the rules after this pair).
    ProtectedRule("**/.git", "a .git file redirects git to another repository and its config"),
    ProtectedRule("!**/.git/*", ""),
    ProtectedRule(
        "**/.git/config",
        "git configuration can make git run arbitrary commands (core.fsmonitor, aliases, hooksPath)",
    ),
    ProtectedRule("**/.git/config.worktree", "per-worktree git configuration, like .git/config"),
    ProtectedRule("**/.git/hooks", "git hooks run code on the user's next git command"),
    ProtectedRule(
        "**/.git/commondir", "commondir makes git read config and hooks from another directory"
    ),
    ProtectedRule(
        "**/.git/info",
        "info/attributes names filter and diff programs for files; info/exclude hides files",
    ),
    ProtectedRule(
        "**/.git/worktrees",
        "linked worktrees' gitdir, commondir and config.worktree redirect their git",
    ),
    ProtectedRule("**/.git/modules", "submodules' git directories hold their config and hooks"),
    ProtectedRule("**/.git/remotes", "legacy remote definitions decide where git pushes"),
    ProtectedRule("**/.git/branches", "legacy remote definitions decide where git fetches"),
    # Home: the same configuration folders, read by the daemon for every workspace.
    ProtectedRule("/.cursor/**", _CURSOR_REASON, "home"),
    ProtectedRule("/.claude/**", _CLAUDE_REASON, "home"),
    ProtectedRule("/.claude.json", _CLAUDE_REASON, "home"),
    ProtectedRule("!/.cursor/rules/**", "", "home"),
    ProtectedRule("!/.cursor/commands/**", "", "home"),
    ProtectedRule("!/.cursor/worktrees/**", "", "home"),
    ProtectedRule("!/.cursor/skills/**", "", "home"),
    ProtectedRule("!/.cursor/agents/**", "", "home"),
    ProtectedRule("!/.cursor/plans/**", "", "home"),
    ProtectedRule("!/.claude/commands/**", "", "home"),
    ProtectedRule("!/.claude/agents/**", "", "home"),
    ProtectedRule("!/.claude/skills/**", "", "home"),
    *(
        ProtectedRule(f"/{name}", _RC_REASON, "home")
        for name in (
            ".bashrc",
            ".bash_profile",
            ".bash_login",
            ".bash_logout",
            ".profile",
            ".zshenv",
            ".zshrc",
            ".zprofile",
            ".zlogin",
        )
    ),
    ProtectedRule("/.gitconfig", _GIT_REASON, "home"),
    ProtectedRule("/.config/git/**", _GIT_REASON, "home"),
    ProtectedRule("/.git-credentials", "git's stored credentials", "home"),
    ProtectedRule("/.ssh/**", "ssh keys and config (ProxyCommand runs commands)", "home"),
    # The system: start-up files, the loader, sudo, git's system config, and the programs the
    # daemon runs (bash, git, rg, node): none of it is the agent's to change with file tools.
    ProtectedRule(
        "/etc/**", "system configuration (shell profiles, loader, sudo, git) runs code", "system"
    ),
    *(
        ProtectedRule(f"/{folder}/**", "programs and libraries the daemon runs", "system")
        for folder in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "boot")
    ),
    *(
        ProtectedRule(
            f"/{folder}/**", "kernel and device interfaces (core_pattern runs code)", "system"
        )
        for folder in ("proc", "sys", "dev")
    ),
)


def _glob_escape(text: str) -> str:
    return "".join(f"[{char}]" if char in "*?[\\" else char for char in text)


def _anchored(rule: ProtectedRule, base: str) -> str:
    negated = rule.pattern.startswith("!")
    body = rule.pattern.lstrip("!")
    if body.startswith("**/"):
        line = body  # at any depth, wherever the base is
    else:
        line = (
            "/" + _glob_escape(base.strip("/")) + "/" + body.lstrip("/")
            if base.strip("/")
            else body
        )
    return ("!" if negated else "") + line


def home_folders(extra: Iterable[str] = ()) -> list[str]:
    """Every home whose start-up and config files the daemon or its shells may read."""
    homes = [str(Path.home()), "/root", *extra]
    with contextlib.suppress(OSError):
        homes += [
            entry.path for entry in os.scandir("/home") if entry.is_dir(follow_symlinks=False)
        ]
    found: dict[str, None] = {}
    for home in homes:
        if home:
            found[os.path.normpath(home)] = None
            found[os.path.realpath(home)] = None
    return list(found)


class AbsoluteRules:
    """PROTECTED_PATH_RULES anchored at concrete folders, matched against absolute real paths.

    The system rules do not apply inside the workspace (one under /usr or /opt is the agent's
    to edit); the workspace and home rules apply everywhere they are anchored."""

    def __init__(self, workspaces: Iterable[str], homes: Iterable[str]) -> None:
        self._workspaces = list(dict.fromkeys(workspaces))
        bases = {"workspace": self._workspaces, "home": list(dict.fromkeys(homes))}
        self._system = self._build([r for r in PROTECTED_PATH_RULES if r.scope == "system"], bases)
        self._anchored = self._build(
            [r for r in PROTECTED_PATH_RULES if r.scope != "system"], bases
        )

    @staticmethod
    def _build(
        rules: list[ProtectedRule], bases: dict[str, list[str]]
    ) -> tuple[pathspec.GitIgnoreSpec, list[ProtectedRule]]:
        lines: list[str] = []
        matched: list[ProtectedRule] = []
        for rule in rules:
            for base in bases.get(rule.scope, [""]):
                line = _anchored(rule, base)
                if line not in lines or line.startswith("!"):
                    lines.append(line)
                    matched.append(rule)
        return pathspec.GitIgnoreSpec.from_lines(lines), matched

    def reason(self, real: str) -> str | None:
        inside = any(relative_to_workspace(base, real) for base in self._workspaces)
        for spec, rules in (self._anchored,) if inside else (self._system, self._anchored):
            check = spec.check_file(real.lstrip("/"))
            if check.include and check.index is not None:
                return f"{real} is a protected path: {rules[check.index].reason}"
        return None


def resolve_path(workspace: Path | str, path: str) -> Path:
    """The absolute, normalised path: relative paths are relative to the workspace, `~` expands.

    Symlinks are not resolved (`..` is collapsed lexically); an empty path is the workspace.
    """
    expanded = os.path.expanduser(path) if path else ""
    return Path(os.path.normpath(os.path.join(str(workspace), expanded)))


def relative_to_workspace(workspace: Path | str, path: Path | str) -> str | None:
    """`path` relative to the workspace in POSIX form ("." for the root), or None if outside."""
    root = os.path.normpath(str(workspace))
    target = os.path.normpath(str(path))
    if target == root:
        return "."
    prefix = root.rstrip("/") + "/"
    return target[len(prefix) :] if target.startswith(prefix) else None


def display_path(workspace: Path | str, path: Path | str) -> str:
    """How results name a path: relative inside the workspace, absolute outside it."""
    relative = relative_to_workspace(workspace, path)
    return str(path) if relative is None or relative == "." else relative


@functools.lru_cache(maxsize=8)
def rules_for(workspace: str, home: str = "") -> AbsoluteRules:
    """The table anchored at `workspace` (as spelled and real) and every home (`home` too)."""
    return AbsoluteRules([workspace, os.path.realpath(workspace)], home_folders([home]))


def protected_reason(workspace: Path | str, path: Path | str) -> str | None:
    """Why `path` must not be written, created or deleted by the agent; None when it may be.

    The rules AgentPaths applies, checked on the path as given and where it really leads (a
    link inside the workspace must not become a way around them). The file tools check the real
    path of what they open instead (kernel/paths.py); this serves checks without an open.
    """
    rules = rules_for(os.path.normpath(str(workspace)))
    return rules.reason(os.path.normpath(str(path))) or rules.reason(os.path.realpath(path))
