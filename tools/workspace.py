"""Shared by the workspace tools: path resolution, `.cursorignore`, protected paths, atomic writes.

Protected paths are the ones an agent must not change because changing them runs code or
widens what the agent may do (git config and hooks, editor settings, Cursor's and Claude's
config, shell start-up files, the system). `PROTECTED_PATH_RULES` is the one definition: the
file tools refuse writes there, judged on real paths (`AgentPaths`, through
exec_daemon/kernel/paths.py), and the sandbox (sandbox/protected.py) mounts the same paths
read-only. The trust model is in SECURITY.md.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pathspec

from exec_daemon.kernel.paths import (
    DeclaredPaths,
    NoRules,
    PathRefused,
    PathRules,
    bytes_chunks,
    write_checked,
)
from exec_daemon.state import Daemon

CURSORIGNORE = ".cursorignore"


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
    ProtectedRule(
        "**/.git/config",
        "git configuration can make git run arbitrary commands (core.fsmonitor, aliases, hooksPath)",
    ),
    ProtectedRule("**/.git/hooks", "git hooks run code on the user's next git command"),
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


class CursorIgnore:
    """The workspace's `.cursorignore` (gitignore syntax), re-read when the file changes.

    Hides files from the agent's read, grep, glob and ls (not from its shell). One per daemon:
    `daemon.service(CursorIgnore)`.
    """

    def __init__(self, daemon: Daemon) -> None:
        self.workspace = Path(daemon.workspace)
        self.real_workspace = Path(os.path.realpath(self.workspace))
        self.file = self.workspace / CURSORIGNORE
        self._stamp: tuple[int, int, int] | None = None
        self._spec: pathspec.GitIgnoreSpec | None = None

    def _current_spec(self) -> pathspec.GitIgnoreSpec | None:
        try:
            info = self.file.stat()
        except OSError:
            self._stamp, self._spec = None, None
            return None
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
        if stamp != self._stamp:
            try:
                lines = self.file.read_text(errors="replace").splitlines()
            except OSError:
                lines = []
            self._spec = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
            self._stamp = stamp
        return self._spec

    def exists(self) -> bool:
        return self._current_spec() is not None

    def has_exceptions(self) -> bool:
        """Whether the file re-allows paths with `!` lines."""
        spec = self._current_spec()
        return spec is not None and any(pattern.include is False for pattern in spec.patterns)

    def is_ignored(self, path: Path | str, is_dir: bool = False) -> bool:
        spec = self._current_spec()
        if spec is None:
            return False
        relative = relative_to_workspace(self.workspace, path)
        if relative is None:
            relative = relative_to_workspace(self.real_workspace, path)
        if relative is None or relative == ".":
            return False
        return bool(spec.match_file(relative + "/" if is_dir else relative))

    def rg_args(self) -> list[str]:
        """Arguments that make ripgrep (run with the workspace as its cwd) honour the file."""
        return ["--ignore-file", str(self.file)] if self.exists() else []


class AgentPaths:
    """The rules the agent's file tools apply to real paths (kernel/paths.py's PathRules):
    PROTECTED_PATH_RULES anchored at the workspace (lexical and real), every home and `/`, the
    paths declared at run time (hook scripts, the daemon's own files), and `.cursorignore`.
    One per daemon: `daemon.service(AgentPaths)`."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        self._workspace = os.path.normpath(daemon.workspace)
        self._ignore = daemon.service(CursorIgnore)
        self.declared = daemon.service(DeclaredPaths)

    def protected(self, real: str) -> str | None:
        rules = rules_for(self._workspace, self._daemon.env.get("HOME") or "")
        return rules.reason(real) or self.declared.reason_for(real)

    def hidden(self, real: str, is_dir: bool) -> str | None:
        secret = self.declared.reason_for(real, reading=True)
        if secret is not None:
            return secret
        if self._ignore.is_ignored(real, is_dir):
            return f"{real} is hidden from the agent by .cursorignore"
        return None


# ---------------------------------------------------------------------------------------------
# Atomic writes


class WriteFailure(Exception):
    """A write that did not happen; the old file is untouched. `code` is a ToolError code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def write_failure(exc: OSError, path: Path | str) -> WriteFailure:
    """The user-facing reason for an OSError of a write (no exception text leaves the daemon)."""
    shown = str(path)
    reasons = {
        errno.ENOSPC: ("no_space", f"no space left on the device holding {shown}"),
        errno.EDQUOT: ("no_space", f"disk quota exceeded writing {shown}"),
        errno.EACCES: ("permission_denied", f"permission denied writing {shown}"),
        errno.EPERM: ("permission_denied", f"operation not permitted writing {shown}"),
        errno.EROFS: ("read_only", f"{shown} is on a read-only file system"),
        errno.EISDIR: ("is_directory", f"{shown} is a directory"),
        errno.ENOTDIR: ("not_a_directory", f"a parent of {shown} is not a directory"),
        errno.ENAMETOOLONG: ("invalid_argument", f"the name {shown} is too long"),
        errno.EFBIG: ("too_large", f"{shown} would exceed the largest file size allowed"),
        errno.ELOOP: ("permission_denied", f"{shown} goes through a symbolic link (not followed)"),
    }
    code, message = reasons.get(exc.errno or 0, ("io_error", f"could not write {shown}"))
    return WriteFailure(code, message)


def write_target(path: Path) -> Path:
    """Where an append to `path` lands: the file a symlink points to, so the link survives."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def refusal_failure(refused: PathRefused) -> WriteFailure:
    code = "invalid_argument" if refused.kind == "invalid" else "permission_denied"
    return WriteFailure(code, refused.reason)


def atomic_write(
    path: Path,
    chunks: Iterator[bytes] | bytes,
    *,
    on_chunk: Callable[[bytes, int], None] | None = None,
    rules: PathRules | None = None,
) -> tuple[int, bool]:
    """Writes the file through a temp file in the same (checked) directory + fsync + rename:
    kernel/paths.py's write_checked with `rules` (the agent's: AgentPaths; none for the
    orchestrator's own RPCs and the daemon's own files).

    Readers see the old or the new file, never a mix, also when the disk fills up. The mode and
    owner of an existing file are kept; missing parents are created. `on_chunk(chunk, offset)` is
    called after each chunk is written. Returns (bytes written, whether the file was created).
    Raises WriteFailure; the old content is then untouched.
    """
    try:
        return write_checked(path, bytes_chunks(chunks), rules or NoRules(), on_chunk=on_chunk)
    except PathRefused as refused:
        raise refusal_failure(refused) from None
    except OSError as exc:
        raise write_failure(exc, path) from exc
