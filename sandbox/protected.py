"""The protected paths as concrete mount targets, derived from the one list the file tools use.

`exec_daemon.kernel.protected.PROTECTED_PATH_RULES` (gitignore syntax) is the single definition (its
workspace rules here; its home and system rules in `outside_targets`). A rule naming
a literal path (`/.vscode`, `**/.git/config`) protects that path; a rule with a glob below a
literal prefix (`/.cursor/**/*.json`) protects the whole prefix directory, and the negated rules
under it (`!/.cursor/rules/**`) are kept writable. Directories stand for everything beneath them,
so the sandbox protects a superset of what the rules name (e.g. all of `.cursor/` except the
writable subdirectories). Only the workspace root is covered: nested repositories'
`.git/config` would need a scan of the whole tree per command.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Literal

from exec_daemon.kernel.protected import PROTECTED_PATH_RULES, ProtectedRule

# Literal targets that are files (a missing one gets an empty file as placeholder); every other
# literal target is a directory.
_FILE_TARGETS = frozenset({".git/config", ".git/config.worktree", ".cursorignore"})
# Files protected only while they exist: any placeholder would change what git does (git dies
# on an empty or unreadable `commondir`), so a missing one cannot be kept from being created.
# The daemon's own git ignores a `commondir` in a `.git` directory (exec_daemon/kernel/git.py).
_EXISTING_ONLY_TARGETS = frozenset({".git/commondir"})
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class ProtectedTarget:
    # POSIX path relative to the workspace root.
    relative: str
    kind: Literal["file", "dir", "existing"]
    # Subdirectories (relative to the workspace root) that stay writable.
    writable: tuple[str, ...] = ()


def _body(pattern: str) -> str:
    body = pattern.lstrip("!")
    for prefix in ("**/", "/"):
        body = body.removeprefix(prefix)
    return body.removesuffix("/**").rstrip("/")


def _literal_prefix(body: str) -> str:
    literal: list[str] = []
    for segment in body.split("/"):
        if _GLOB_CHARS & set(segment):
            break
        literal.append(segment)
    return "/".join(literal)


@functools.cache
def protected_targets(
    rules: tuple[ProtectedRule, ...] = PROTECTED_PATH_RULES,
) -> tuple[ProtectedTarget, ...]:
    rules = tuple(rule for rule in rules if rule.scope == "workspace")
    negated = [_body(rule.pattern) for rule in rules if rule.pattern.startswith("!")]
    targets: dict[str, ProtectedTarget] = {}
    for rule in rules:
        if rule.pattern.startswith("!"):
            continue
        body = _body(rule.pattern)
        relative = _literal_prefix(body)
        if not relative:
            continue
        is_literal = relative == body
        kind: Literal["file", "dir", "existing"] = "dir"
        if is_literal and relative in _FILE_TARGETS:
            kind = "file"
        elif is_literal and relative in _EXISTING_ONLY_TARGETS:
            kind = "existing"
        writable = tuple(
            _literal_prefix(exception)
            for exception in negated
            if _literal_prefix(exception).startswith(relative + "/")
        )
        targets[relative] = ProtectedTarget(relative, kind, writable)
    return tuple(targets.values())


@functools.cache
def outside_targets(
    homes: tuple[str, ...], rules: tuple[ProtectedRule, ...] = PROTECTED_PATH_RULES
) -> tuple[str, ...]:
    """The home and system rules as absolute folders and files (their literal prefixes, so
    `/.cursor/**` of a home is the whole `~/.cursor`). Landlock already keeps them read-only
    unless they lie in a writable area (a HOME under /tmp or the workspace); there the sandbox
    mounts the existing ones read-only."""
    found: dict[str, None] = {}
    for rule in rules:
        if rule.pattern.startswith("!") or rule.scope == "workspace":
            continue
        relative = _literal_prefix(_body(rule.pattern))
        bases = homes if rule.scope == "home" else ["/"]
        for base in bases:
            found[os.path.join(base, relative)] = None
    return tuple(found)
