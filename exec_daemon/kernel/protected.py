"""Protected paths: the ones an agent must not change, because changing them runs code or widens
what the agent may do (git config and hooks, editor settings, Cursor's own config).

`PROTECTED_PATH_RULES` is the one definition: `protected_reason` applies it to a path (the
permissions guard to every path a tool's spec says it writes, the file tools again in their
handlers), and the sandbox (sandbox/protected.py) mounts the same paths read-only.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import pathspec


@dataclass(frozen=True)
class ProtectedRule:
    # gitignore syntax, relative to the workspace root ("!" lines re-allow what a rule refused).
    pattern: str
    reason: str


PROTECTED_PATH_RULES: tuple[ProtectedRule, ...] = (
    ProtectedRule("/.vscode", "editor settings and tasks can run code in the user's editor"),
    ProtectedRule("/.cursorignore", ".cursorignore decides which files the agent may see"),
    ProtectedRule(
        "/.cursor/**/*.json",
        "Cursor configuration (MCP servers, hooks, permissions, environment) can run code",
    ),
    ProtectedRule(
        "/.claude/**/*.json",
        "Claude configuration (settings, hooks, MCP servers) can run code",
    ),
    # Rules, commands, skills and agents are the user's prompts, not configuration; worktrees
    # are checkouts the agent works in.
    ProtectedRule("!/.cursor/rules/**", ""),
    ProtectedRule("!/.cursor/commands/**", ""),
    ProtectedRule("!/.cursor/worktrees/**", ""),
    ProtectedRule("!/.cursor/skills/**", ""),
    ProtectedRule("!/.cursor/agents/**", ""),
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
)

_PROTECTED_SPEC = pathspec.GitIgnoreSpec.from_lines(rule.pattern for rule in PROTECTED_PATH_RULES)


def protected_rule(relative: str) -> ProtectedRule | None:
    """The rule that protects `relative` (POSIX, relative to the workspace root), or None."""
    check = _PROTECTED_SPEC.check_file(relative)
    if not check.include or check.index is None:
        return None
    return PROTECTED_PATH_RULES[check.index]


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


def protected_reason(workspace: Path | str, path: Path | str) -> str | None:
    """Why `path` must not be written, created or deleted by the agent; None when it may be.

    Checks the path as given and, when it is (or lies under) a symlink, where it really points:
    a link inside the workspace must not become a way around the rules.
    """
    root = Path(workspace)
    candidates = [(root, Path(path))]
    with contextlib.suppress(OSError):
        candidates.append((root.resolve(), Path(os.path.realpath(path))))
    for base, candidate in candidates:
        relative = relative_to_workspace(base, candidate)
        if relative is None:
            # Outside the workspace only the "at any depth" rules (nested git repos) apply.
            relative = str(candidate).lstrip("/")
            rule = protected_rule(relative)
            if rule is not None and not rule.pattern.startswith("**/"):
                rule = None
        elif relative == ".":
            continue
        else:
            rule = protected_rule(relative)
        if rule is not None:
            shown = display_path(base, candidate)
            return f"{shown} is a protected path: {rule.reason}"
    return None
