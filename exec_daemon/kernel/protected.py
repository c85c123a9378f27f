"""Protected paths: the ones an agent must not change, because changing them runs code or widens
what the agent may do (git config and hooks, editor settings, Cursor's own config).

`PROTECTED_PATH_RULES` is the one definition: the file tools refuse writes there
(tools/workspace.py's `protected_reason`), and the sandbox (sandbox/protected.py) mounts the
same paths read-only.
"""

from __future__ import annotations

from dataclasses import dataclass

import pathspec


@dataclass(frozen=True)
class ProtectedRule:
    # gitignore syntax, relative to the workspace root ("!" lines re-allow what a rule refused).
    pattern: str
    reason: str


PROTECTED_PATH_RULES: tuple[ProtectedRule, ...] = (
    ProtectedRule(
        "**/.git/config",
        "git configuration can make git run arbitrary commands (core.fsmonitor, aliases, hooksPath)",
    ),
    ProtectedRule("**/.git/hooks", "git hooks run code on the user's next git command"),
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
)

_PROTECTED_SPEC = pathspec.GitIgnoreSpec.from_lines(rule.pattern for rule in PROTECTED_PATH_RULES)


def protected_rule(relative: str) -> ProtectedRule | None:
    """The rule that protects `relative` (POSIX, relative to the workspace root), or None."""
    check = _PROTECTED_SPEC.check_file(relative)
    if not check.include or check.index is None:
        return None
    return PROTECTED_PATH_RULES[check.index]
