"""Shared by the workspace tools: path resolution, `.cursorignore`, protected paths, atomic writes.

Protected paths (the one table and `protected_reason()`, which applies it to a path, symlinks
included, are in exec_daemon/kernel/protected.py and imported from here by the file tools); the
sandbox (sandbox/protected.py) mounts the same paths read-only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pathspec

from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.protected import display_path as display_path
from exec_daemon.kernel.protected import protected_reason as protected_reason
from exec_daemon.kernel.protected import relative_to_workspace
from exec_daemon.kernel.protected import resolve_path as resolve_path
from exec_daemon.kernel.state import Daemon

CURSORIGNORE = ".cursorignore"


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
    }
    code, message = reasons.get(exc.errno or 0, (ErrorCode.IO_ERROR, f"could not write {shown}"))
    return CodedError(code, message)


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
    Raises CodedError; the old content is then untouched.
    """
    target = write_target(path)
    try:
        existing: os.stat_result | None = target.stat()
    except FileNotFoundError:
        existing = None
    except OSError as exc:
        raise write_failure(exc, path) from exc
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise CodedError(ErrorCode.IS_DIRECTORY, f"{path} is a directory")
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
