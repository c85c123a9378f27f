"""Shared by the workspace tools: path resolution, `.cursorignore`, protected paths, atomic writes.

Protected paths are the ones an agent must not change because changing them runs code or
widens what the agent may do (git config and hooks, editor settings, Cursor's own config).
`PROTECTED_PATH_RULES` and `protected_reason()` are the one definition: the file tools refuse
writes there, and the sandbox (sandbox/protected.py) mounts the same paths read-only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

from exec_daemon.state import Daemon

CURSORIGNORE = ".cursorignore"


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


def _protected_rule(relative: str) -> ProtectedRule | None:
    check = _PROTECTED_SPEC.check_file(relative)
    if not check.include or check.index is None:
        return None
    return PROTECTED_PATH_RULES[check.index]


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
            rule = _protected_rule(relative)
            if rule is not None and not rule.pattern.startswith("**/"):
                rule = None
        elif relative == ".":
            continue
        else:
            rule = _protected_rule(relative)
        if rule is not None:
            shown = display_path(base, candidate)
            return f"{shown} is a protected path: {rule.reason}"
    return None


class CursorIgnore:
    """The workspace's `.cursorignore` (gitignore syntax), re-read when the file changes.

    Hides files from the agent's read, grep, glob and ls (not from its shell). One per daemon:
    `daemon.service(CursorIgnore)`.
    """

    def __init__(self, daemon: Daemon) -> None:
        self.workspace = Path(daemon.workspace)
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
        if relative is None or relative == ".":
            return False
        return bool(spec.match_file(relative + "/" if is_dir else relative))

    def rg_args(self) -> list[str]:
        """Arguments that make ripgrep (run with the workspace as its cwd) honour the file."""
        return ["--ignore-file", str(self.file)] if self.exists() else []


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
    }
    code, message = reasons.get(exc.errno or 0, ("io_error", f"could not write {shown}"))
    return WriteFailure(code, message)


def _default_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_target(path: Path) -> Path:
    """Where a write to `path` lands: the file a symlink points to, so the link survives."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def atomic_write(
    path: Path,
    chunks: Iterator[bytes] | bytes,
    *,
    on_chunk: Callable[[bytes, int], None] | None = None,
) -> tuple[int, bool]:
    """Writes the file through a temp file in the same directory + fsync + rename.

    Readers see the old or the new file, never a mix, also when the disk fills up. The mode and
    owner of an existing file are kept; missing parents are created. `on_chunk(chunk, offset)` is
    called after each chunk is written. Returns (bytes written, whether the file was created).
    Raises WriteFailure; the old content is then untouched.
    """
    target = write_target(path)
    try:
        existing: os.stat_result | None = target.stat()
    except FileNotFoundError:
        existing = None
    except OSError as exc:
        raise write_failure(exc, path) from exc
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise WriteFailure("is_directory", f"{path} is a directory")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
        )
    except OSError as exc:
        raise write_failure(exc, path) from exc
    written = 0
    try:
        with os.fdopen(fd, "wb") as temp:
            for chunk in [chunks] if isinstance(chunks, bytes) else chunks:
                temp.write(chunk)
                if on_chunk is not None:
                    on_chunk(chunk, written)
                written += len(chunk)
            temp.flush()
            if existing is not None:
                os.fchmod(temp.fileno(), stat.S_IMODE(existing.st_mode))
                if (existing.st_uid, existing.st_gid) != (os.geteuid(), os.getegid()):
                    with contextlib.suppress(PermissionError):
                        os.fchown(temp.fileno(), existing.st_uid, existing.st_gid)
            else:
                os.fchmod(temp.fileno(), _default_mode())
            os.fsync(temp.fileno())
        os.replace(temp_name, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        if isinstance(exc, OSError):
            raise write_failure(exc, path) from exc
        raise
    _fsync_directory(target.parent)
    return written, existing is None


def _fsync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
