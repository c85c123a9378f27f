"""Shared by the workspace tools: path resolution, `.cursorignore`, protected paths, atomic writes.

Protected paths are the ones an agent must not change because changing them runs code or
widens what the agent may do (git config and hooks, editor settings, Cursor's and Claude's
config, shell start-up files, the system). `PROTECTED_PATH_RULES` (exec_daemon/kernel/
protected.py) is the one definition: the
file tools refuse writes there, judged on real paths (`AgentPaths`, through
exec_daemon/kernel/paths.py), and the sandbox (sandbox/protected.py) mounts the same paths
read-only. Writes are also held to the writable set (exec_daemon/kernel/writable.py, what the
sandbox grants a shell): `write_rules` refuses a real path outside it unless the call runs in
run_everything. The trust model is in SECURITY.md.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pathspec

from exec_daemon.kernel.context import RUN_EVERYTHING, CallContext, call_run_mode
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.paths import (
    DeclaredPaths,
    NoRules,
    PathRefused,
    PathRules,
    bytes_chunks,
    read_config_text,
    write_checked,
)
from exec_daemon.kernel.protected import (
    display_path as display_path,
)
from exec_daemon.kernel.protected import (
    protected_reason as protected_reason,
)
from exec_daemon.kernel.protected import (
    relative_to_workspace,
    rules_for,
)
from exec_daemon.kernel.protected import (
    resolve_path as resolve_path,
)
from exec_daemon.kernel.state import Daemon
from exec_daemon.kernel.writable import WritableAreas

CURSORIGNORE = ".cursorignore"


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
                lines = read_config_text(self.file, errors="replace").splitlines()
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
        return spec is not None and self._matches(spec, path, is_dir)

    def matcher(self) -> Callable[[str, bool], bool] | None:
        """`is_ignored` with the file checked once, for the many entries of one listing;
        None when there is no file (nothing is ignored)."""
        spec = self._current_spec()
        if spec is None:
            return None
        return lambda path, is_dir: self._matches(spec, path, is_dir)

    def _matches(self, spec: pathspec.GitIgnoreSpec, path: Path | str, is_dir: bool) -> bool:
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

    def secret_file(self, info: os.stat_result) -> str | None:
        return self.declared.secret_file_reason(info)


class AgentWrites:
    """AgentPaths for one call's writes: also refuses a real path outside the writable set
    (exec_daemon/kernel/writable.py), which the permissions guard sent for approval first."""

    def __init__(self, paths: AgentPaths, writable: WritableAreas) -> None:
        self._paths = paths
        self._writable = writable

    def protected(self, real: str) -> str | None:
        reason = self._paths.protected(real)
        if reason is not None:
            return reason
        outside = self._writable.outside_reason(real)
        return None if outside is None else f"needs approval: {outside}"

    def hidden(self, real: str, is_dir: bool) -> str | None:
        return self._paths.hidden(real, is_dir)

    def secret_file(self, info: os.stat_result) -> str | None:
        return self._paths.secret_file(info)


def write_rules(ctx: CallContext) -> PathRules:
    """The rules of a file tool writing a path the agent named: AgentPaths, and the writable
    set unless the call runs in run_everything (approved)."""
    paths = ctx.daemon.service(AgentPaths)
    if call_run_mode(ctx) == RUN_EVERYTHING:
        return paths
    return AgentWrites(paths, ctx.daemon.service(WritableAreas))


# ---------------------------------------------------------------------------------------------
# Atomic writes


def write_failure(exc: OSError, path: Path | str) -> CodedError:
    """The user-facing reason for an OSError of a write (no exception text leaves the daemon)."""
    shown = str(path)
    reasons = {
        errno.ENOSPC: (ErrorCode.NO_SPACE, f"no space left on the device holding {shown}"),
        errno.EDQUOT: (ErrorCode.NO_SPACE, f"disk quota exceeded writing {shown}"),
        errno.EACCES: (ErrorCode.PERMISSION_DENIED, f"permission denied writing {shown}"),
        errno.EPERM: (ErrorCode.PERMISSION_DENIED, f"operation not permitted writing {shown}"),
        errno.EROFS: (ErrorCode.READ_ONLY, f"{shown} is on a read-only file system"),
        errno.EISDIR: (ErrorCode.IS_DIRECTORY, f"{shown} is a directory"),
        errno.ENOTDIR: (ErrorCode.NOT_A_DIRECTORY, f"a parent of {shown} is not a directory"),
        errno.ENAMETOOLONG: (ErrorCode.INVALID_ARGUMENT, f"the name {shown} is too long"),
        errno.EFBIG: (ErrorCode.TOO_LARGE, f"{shown} would exceed the largest file size allowed"),
        errno.ELOOP: (
            ErrorCode.PERMISSION_DENIED,
            f"{shown} goes through a symbolic link (not followed)",
        ),
    }
    code, message = reasons.get(exc.errno or 0, (ErrorCode.IO_ERROR, f"could not write {shown}"))
    return CodedError(code, message)


def write_target(path: Path) -> Path:
    """Where an append to `path` lands: the file a symlink points to, so the link survives."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def refusal_failure(refused: PathRefused) -> CodedError:
    code = ErrorCode.INVALID_ARGUMENT if refused.kind == "invalid" else ErrorCode.PERMISSION_DENIED
    return CodedError(code, refused.reason)


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
    Raises CodedError; the old content is then untouched.
    """
    try:
        return write_checked(path, bytes_chunks(chunks), rules or NoRules(), on_chunk=on_chunk)
    except PathRefused as refused:
        raise refusal_failure(refused) from None
    except OSError as exc:
        raise write_failure(exc, path) from exc
