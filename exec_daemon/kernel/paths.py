"""The one way a tool opens a path the agent named, for reading, writing or deleting.

The agent is assumed hostile: it can plant symlinks, swap them while a call runs, and spell a
path through `/proc/self/root`, `/proc/self/cwd` or a symlinked folder. So nothing here checks a
path and then opens it by name. Instead:

- Reads: the path is opened once (`openat2` with RESOLVE_NO_MAGICLINKS, so no `/proc/*/fd`,
  `/proc/*/root`, `/proc/*/cwd` jumps), then the *real* path of the opened fd
  (`/proc/self/fd/N`) is checked: the daemon's own `/proc` entries, then the caller's rules
  (`.cursorignore`). The caller reads from that fd.
- Writes: the parent folder is opened the same way and its real path plus the final name is
  checked against the protected paths. Missing parents are created one by one below the checked
  ancestor (mkdirat + an open that refuses symlinks). The new content goes to a fresh
  `O_CREAT|O_EXCL|O_NOFOLLOW` temp file in that folder fd and is renamed over the name
  (renameat), so a symlink or hard link planted at the name is replaced, never written through.
  The temp file's name says which process wrote it; a write removes the temp files that dead
  writers (a daemon killed mid-write) left in its folder, and `journal_temp_folders` lets a
  restarted daemon sweep every folder its killed predecessor wrote in.
  A symlink that already is the target is followed once to its real file (the link survives);
  a dangling one is refused.
- Deletes: unlinkat in the checked parent fd (a link is removed, not its target).

The rules themselves (protected paths, `.cursorignore`) come from the caller as a `PathRules`
(tools/workspace.py's `AgentPaths`), so this module imports nothing else of the project.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import secrets
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

# <linux/openat2.h>
RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
# The syscall number is the same on every architecture (the unified table, Linux >= 5.6).
_SYS_OPENAT2 = 437
_PROC_PREFIX = "/proc/"
# Entries of any process (not only the daemon's) that hold secrets or jump elsewhere: the
# environment (tokens inherited by children), memory, and the fd / map_files links.
_SECRET_PROC_ENTRIES = frozenset(
    {"environ", "mem", "fd", "fdinfo", "map_files", "pagemap", "auxv", "root", "cwd", "exe"}
)

RefusalKind = Literal["invalid", "protected", "hidden", "private", "symlink"]


class PathRefused(Exception):
    """A path a tool must not use, with the reason the agent is told. `kind`:
    invalid (NUL byte, undecodable), protected (writes), hidden (.cursorignore),
    private (the daemon's own /proc entries, secrets), symlink (a dangling or magic link)."""

    def __init__(self, kind: RefusalKind, path: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.path = path
        self.reason = reason


class PathRules(Protocol):
    """What the caller's policy says about a real (symlink-free, absolute) path."""

    def protected(self, real: str) -> str | None:
        """Why `real` must not be written, created or deleted; None when it may be."""
        ...

    def hidden(self, real: str, is_dir: bool) -> str | None:
        """Why `real` must not be read or listed; None when it may be."""
        ...

    def secret_file(self, info: os.stat_result) -> str | None:
        """Why the file `info` describes must not be read whatever its path (a hard link to a
        secret file shares its device and inode); None when it may be."""
        ...


class NoRules:
    """Rules for the orchestrator's own file RPCs: only the symlink safety applies."""

    def protected(self, real: str) -> str | None:
        return None

    def hidden(self, real: str, is_dir: bool) -> str | None:
        return None

    def secret_file(self, info: os.stat_result) -> str | None:
        return None


# ---------------------------------------------------------------------------------------------
# openat2


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_openat2_missing = False
_probe_lock = threading.Lock()


def openat2(dir_fd: int, path: str | bytes, flags: int, resolve: int, mode: int = 0) -> int:
    """openat2(2); raises OSError. Where the kernel lacks it (< 5.6), falls back to openat with
    O_NOFOLLOW on the last component when RESOLVE_NO_SYMLINKS is asked (callers re-check the
    real path of the fd in every case, so only the magic-link refusal is lost)."""
    global _openat2_missing
    raw = os.fsencode(path)
    if not _openat2_missing:
        how = _OpenHow(flags | os.O_CLOEXEC, mode, resolve)
        fd = _syscall(
            ctypes.c_long(_SYS_OPENAT2),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(raw),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd >= 0:
            return int(fd)
        code = ctypes.get_errno()
        if code != errno.ENOSYS:
            raise OSError(code, os.strerror(code), os.fsdecode(raw))
        with _probe_lock:
            _openat2_missing = True
    extra = os.O_NOFOLLOW if resolve & RESOLVE_NO_SYMLINKS else 0
    return os.open(raw, flags | extra | os.O_CLOEXEC, mode, dir_fd=dir_fd)


def fd_path(fd: int) -> str:
    """The real path of an open fd (what the kernel resolved, not how it was spelled)."""
    return os.readlink(f"/proc/self/fd/{fd}")


# ---------------------------------------------------------------------------------------------
# Checks that need no rules


def check_path_text(path: str) -> None:
    """Raises PathRefused("invalid") for a path no file can have: a NUL byte, or text that is not
    valid Unicode (lone surrogates from a bad decode)."""
    if "\x00" in path:
        raise PathRefused("invalid", path.replace("\x00", "\\0"), "the path contains a NUL byte")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = path.encode("utf-8", "backslashreplace").decode()
        raise PathRefused("invalid", shown, "the path is not valid UTF-8") from None


def _daemon_task_ids() -> set[str]:
    ids = {str(os.getpid())}
    with contextlib.suppress(OSError):
        ids.update(os.listdir("/proc/self/task"))
    return ids


def private_proc_reason(real: str) -> str | None:
    """Why a real path under /proc must not be opened by a tool: any entry of the daemon itself
    (its pid, any of its thread ids — `/proc/<tid>` works though it is not listed — and their
    `task/` folders), and the secret-bearing entries of every other process."""
    if not real.startswith(_PROC_PREFIX):
        return None
    parts = real[len(_PROC_PREFIX) :].split("/")
    head = parts[0]
    if head in ("self", "thread-self"):  # never the real path of an fd, but spelled by callers
        return f"{real} belongs to the daemon's own process"
    if not head.isdigit():
        return None
    if head in _daemon_task_ids():
        return f"{real} belongs to the daemon's own process"
    entry = (
        parts[3] if len(parts) > 3 and parts[1] == "task" else parts[1] if len(parts) > 1 else ""
    )
    if entry in _SECRET_PROC_ENTRIES:
        return f"{real}: a process's {entry} can hold secrets (tokens, keys) and is not readable"
    return None


# ---------------------------------------------------------------------------------------------
# Reading


@dataclass
class Opened:
    """A path opened for reading: the fd (owned by the caller), its real path and its stat."""

    fd: int
    real: str
    info: os.stat_result

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.info.st_mode)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _refuse_errno(exc: OSError, path: str) -> None:
    if exc.errno == errno.EXDEV:
        raise PathRefused(
            "symlink", path, f"{path} goes through a /proc link to another place (not followed)"
        ) from None
    if exc.errno == errno.ELOOP:
        raise PathRefused(
            "symlink",
            path,
            f"{path} goes through a /proc magic link or too many symbolic links (not followed)",
        ) from None


def _open_resolved(path: str, flags: int) -> tuple[int, str]:
    """Opens `path` (no magic links) and returns (fd, real path). A normalised absolute path
    without any symlink is its own real path: that common case costs one openat2; a path
    through a symlink is opened again following it, and its real path read from the fd."""
    fast = not _openat2_missing and os.path.isabs(path) and not path.startswith("//")
    if fast and os.path.normpath(path) == path:
        try:
            fd = openat2(-100, path, flags, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
        except OSError as exc:
            # ELOOP: a symlink on the way; or openat2 just turned out to be missing.
            if exc.errno != errno.ELOOP and not _openat2_missing:
                raise
        else:
            # Without openat2 the fallback refused a symlink in the last component only.
            return fd, (fd_path(fd) if _openat2_missing else path)
    try:
        fd = openat2(-100, path, flags, RESOLVE_NO_MAGICLINKS)  # AT_FDCWD
    except OSError as exc:
        _refuse_errno(exc, path)
        raise
    try:
        return fd, fd_path(fd)
    except BaseException:
        os.close(fd)
        raise


def open_checked(path: Path | str, rules: PathRules, *, path_only: bool = False) -> Opened:
    """Opens `path` for reading (or, with `path_only`, as an O_PATH handle, e.g. to learn where a
    folder really is) and checks its real path. Raises PathRefused or OSError (ENOENT, ...)."""
    text = str(path)
    check_path_text(text)
    private = private_proc_reason(text)
    if private is not None:
        raise PathRefused("private", text, private)
    # O_NONBLOCK: opening a FIFO must not hang (regular files ignore the flag).
    flags = os.O_PATH if path_only else os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY
    fd, real = _open_resolved(text, flags)
    try:
        info = os.fstat(fd)
        reason = private_proc_reason(real)
        if reason is not None:
            raise PathRefused("private", text, reason)
        reason = rules.hidden(real, stat.S_ISDIR(info.st_mode))
        if reason is not None:
            raise PathRefused("hidden", text, reason)
        reason = rules.secret_file(info)
        if reason is not None:
            raise PathRefused("private", text, reason)
    except BaseException:
        os.close(fd)
        raise
    return Opened(fd, real, info)


def real_path(path: Path | str, rules: PathRules) -> str:
    """The real path of an existing `path`, checked as a read (open_checked with O_PATH)."""
    opened = open_checked(path, rules, path_only=True)
    opened.close()
    return opened.real


# ---------------------------------------------------------------------------------------------
# Writing


@dataclass
class Target:
    """Where a write or delete lands: a folder fd (owned) and a name in it, checked."""

    dir_fd: int
    name: str
    real: str  # the real path of the name (folder's real path + name)
    existing: os.stat_result | None  # lstat of the name (never a symlink: those are resolved)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.dir_fd)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY


def _open_dir(path: str) -> tuple[int, str]:
    return _open_resolved(path, _DIR_FLAGS)


def _open_existing_ancestor(parent: str) -> tuple[int, str, list[str]]:
    """The deepest existing folder of `parent` (opened, with its real path) and the missing
    names below it."""
    missing: list[str] = []
    current = parent
    while True:
        try:
            fd, real = _open_dir(current)
            return fd, real, list(reversed(missing))
        except FileNotFoundError:
            head, tail = os.path.split(current)
            if not tail or head == current:
                raise
            missing.append(tail)
            current = head


def _make_dirs(fd: int, names: list[str]) -> int:
    """Creates `names` one below the other under folder `fd`; returns the last one's fd. Each is
    opened refusing any symlink, so a link planted between mkdir and open is not followed."""
    for name in names:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=fd)
        try:
            child = openat2(fd, name, _DIR_FLAGS, RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH)
        finally:
            os.close(fd)
        fd = child
    return fd


def _lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _check_protected(real: str, shown: str, rules: PathRules) -> None:
    reason = private_proc_reason(real)
    if reason is not None:
        raise PathRefused("private", shown, reason)
    reason = rules.protected(real)
    if reason is not None:
        raise PathRefused("protected", shown, reason)


def open_target(
    path: Path | str, rules: PathRules, *, create_parents: bool = True, follow_link: bool = True
) -> Target:
    """The checked folder fd and name for writing (or deleting) `path` (absolute, normalised).

    With `follow_link`, a symlink at the name is followed once to the real file (which must
    exist: a dangling link is refused); otherwise the link itself is the target.
    Raises PathRefused or OSError; creates missing parents only after the whole real path passed.
    """
    text = str(path)
    check_path_text(text)
    parent, name = os.path.split(text)
    if not name or name in (".", ".."):
        raise PathRefused("invalid", text, f"{text} does not name a file")
    fd, real_ancestor, missing = _open_existing_ancestor(parent or "/")
    try:
        real_parent = os.path.join(real_ancestor, *missing)
        real = os.path.join(real_parent, name)
        _check_protected(real, text, rules)
        if missing:
            if not create_parents:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), text)
            fd = _make_dirs(fd, missing)
        existing = _lstat_at(fd, name)
    except BaseException:
        os.close(fd)
        raise
    if existing is None or not stat.S_ISLNK(existing.st_mode) or not follow_link:
        return Target(fd, name, real, existing)
    try:
        link_fd = openat2(fd, name, os.O_PATH, RESOLVE_NO_MAGICLINKS)
    except FileNotFoundError:
        os.close(fd)
        raise PathRefused(
            "symlink", text, f"{text} is a symbolic link to a missing file (not followed)"
        ) from None
    except OSError as exc:
        os.close(fd)
        _refuse_errno(exc, text)
        raise
    os.close(fd)
    try:
        resolved = fd_path(link_fd)
    finally:
        os.close(link_fd)
    return open_target(resolved, rules, create_parents=False, follow_link=False)


def _read_umask() -> int:
    # Read once at import: setting the umask to read it would race with other threads' creates.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_NEW_FILE_MODE = 0o666 & ~_read_umask()


# A temp file's name says which process wrote it: `.<name>.<pid>-<start ticks>.<hex>.tmp`. A
# writer killed mid-write (kill -9) leaves it behind; the next write into that folder by a daemon
# removes the temp files whose writer is gone (pid dead, or reused by a later process).
_TEMP_NAME = re.compile(r"\..*\.(\d+)-(\d+)\.[0-9a-f]{12}\.tmp", re.DOTALL)
# Folders (st_dev, st_ino) already swept by this process: its predecessors' leftovers are gone
# after one sweep, and its own temp files are removed when a write fails.
_swept: set[tuple[int, int]] = set()
_swept_lock = threading.Lock()
# Where this process records the folders it writes temp files in (journal_temp_folders).
_journal: Path | None = None
_JOURNAL_SUFFIX = ".folders"


def _start_ticks(pid: int) -> str | None:
    """When `pid` started (clock ticks since boot; /proc/PID/stat field 22), None if gone."""
    try:
        stat_text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat_text[stat_text.rindex(")") + 2 :].split()[19]


_writer_ids: dict[int, str] = {}


def _writer_id() -> str:
    """This process's pid and start time (looked up once per pid: a fork has its own)."""
    pid = os.getpid()
    if pid not in _writer_ids:
        _writer_ids[pid] = f"{pid}-{_start_ticks(pid)}"
    return _writer_ids[pid]


def _writer_is_gone(pid: str, ticks: str) -> bool:
    return _start_ticks(int(pid)) != ticks


def sweep_stale_temps(dir_fd: int) -> list[str]:
    """Removes the temp files of dead writers from the folder `dir_fd`, once per folder and
    process; returns the names removed."""
    info = os.fstat(dir_fd)
    with _swept_lock:
        if (info.st_dev, info.st_ino) in _swept:
            return []
        _swept.add((info.st_dev, info.st_ino))
    if _journal is not None:
        _record_folder(_journal / f"{_writer_id()}{_JOURNAL_SUFFIX}", fd_path(dir_fd))
    removed = []
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            match = _TEMP_NAME.fullmatch(entry.name)
            if match is None or not _writer_is_gone(*match.groups()):
                continue
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=False):
                    os.unlink(entry.name, dir_fd=dir_fd)
                    removed.append(entry.name)
    return removed


def _record_folder(journal: Path, folder: str) -> None:
    fd = os.open(
        journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    try:
        os.write(fd, os.fsencode(folder) + b"\0")
    finally:
        os.close(fd)


def journal_temp_folders(journal: Path) -> list[str]:
    """Records from now on, in the daemon's own folder `journal`, each folder this process
    writes a temp file in; first sweeps the folders recorded by writers that are gone (a daemon
    killed mid-write) and drops their records. Returns the temp files removed."""
    global _journal
    removed = []
    for record in journal.glob(f"*{_JOURNAL_SUFFIX}"):
        pid, _, ticks = record.name.removesuffix(_JOURNAL_SUFFIX).partition("-")
        if not pid.isdigit() or not _writer_is_gone(pid, ticks):
            continue
        for folder in set(record.read_bytes().split(b"\0")) - {b""}:
            removed += _sweep_recorded(os.fsdecode(folder))
        record.unlink()
    with _swept_lock:
        # Swept, but not yet recorded for this process: the next write there records them.
        _swept.clear()
    _journal = journal
    return removed


def _sweep_recorded(folder: str) -> list[str]:
    """Sweeps `folder` if it still is the real folder recorded (no symlink on the way now)."""
    try:
        dir_fd = openat2(-100, folder, _DIR_FLAGS, RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS)
    except OSError:
        return []
    try:
        return [os.path.join(folder, name) for name in sweep_stale_temps(dir_fd)]
    except OSError:
        return []
    finally:
        os.close(dir_fd)


def _temp_file(dir_fd: int, name: str) -> tuple[int, str]:
    with contextlib.suppress(OSError):
        sweep_stale_temps(dir_fd)
    writer = _writer_id()
    for _ in range(16):
        temp = f".{name[:200]}.{writer}.{secrets.token_hex(6)}.tmp"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            return os.open(temp, flags, 0o600, dir_fd=dir_fd), temp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", name)


def write_checked(
    path: Path | str,
    chunks: Iterable[bytes],
    rules: PathRules,
    *,
    on_chunk: Callable[[bytes, int], None] | None = None,
) -> tuple[int, bool]:
    """Replaces `path` atomically with `chunks` after checking its real path (see module doc).

    Readers see the old or the new file, never a mix. The mode and owner of an existing file are
    kept. Returns (bytes written, whether the file was created). Raises PathRefused or OSError;
    the old content is then untouched.
    """
    target = open_target(path, rules)
    try:
        existing = target.existing
        if existing is not None and stat.S_ISDIR(existing.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        fd, temp = _temp_file(target.dir_fd, target.name)
        try:
            written = _fill(fd, chunks, on_chunk, existing)
            os.replace(temp, target.name, src_dir_fd=target.dir_fd, dst_dir_fd=target.dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=target.dir_fd)
            raise
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.fsync(target.dir_fd)
    finally:
        target.close()
    return written, existing is None


def _fill(
    fd: int,
    chunks: Iterable[bytes],
    on_chunk: Callable[[bytes, int], None] | None,
    existing: os.stat_result | None,
) -> int:
    written = 0
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]
        if on_chunk is not None:
            on_chunk(chunk, written)
        written += len(chunk)
    if existing is not None and stat.S_ISREG(existing.st_mode):
        os.fchmod(fd, stat.S_IMODE(existing.st_mode))
        if (existing.st_uid, existing.st_gid) != (os.geteuid(), os.getegid()):
            with contextlib.suppress(PermissionError):
                os.fchown(fd, existing.st_uid, existing.st_gid)
    else:
        os.fchmod(fd, _NEW_FILE_MODE)
    os.fsync(fd)
    return written


def delete_checked(path: Path | str, rules: PathRules) -> os.stat_result:
    """Removes the file (or symlink: never its target) at `path` after checking its real path;
    returns what it was. Raises PathRefused, IsADirectoryError, FileNotFoundError, OSError."""
    target = open_target(path, rules, create_parents=False, follow_link=False)
    try:
        if target.existing is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
        if stat.S_ISDIR(target.existing.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        os.unlink(target.name, dir_fd=target.dir_fd)
        return target.existing
    finally:
        target.close()


def create_exclusive(folder: Path | str, name: str, mode: int = 0o600) -> int:
    """A new file `name` in `folder` opened for writing, refusing anything already there (a
    planted symlink, a file): O_CREAT|O_EXCL|O_NOFOLLOW in the opened folder."""
    check_path_text(name)
    dir_fd = openat2(-100, str(folder), _DIR_FLAGS, RESOLVE_NO_MAGICLINKS)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(name, flags, mode, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def bytes_chunks(data: bytes | Iterator[bytes]) -> Iterable[bytes]:
    return [data] if isinstance(data, bytes) else data


# ---------------------------------------------------------------------------------------------
# Paths declared at run time


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True)
class Declared:
    path: str  # absolute, symlinks resolved
    reason: str
    secret: bool = False  # also refused for reads (a token file)


class DeclaredPaths:
    """Paths the daemon learns at run time that the agent's tools must not change: the scripts
    a hooks config names, the daemon's own install and state. `secret` ones are not readable
    either. The file tools refuse them (tools/workspace.py's AgentPaths) and the sandbox mounts
    the existing ones read-only (sandbox/service.py). One per daemon: `daemon.service(...)`."""

    def __init__(self, daemon: object = None) -> None:
        self._fixed: dict[str, Declared] = {}
        self._providers: list[Callable[[], Iterable[Declared]]] = []
        if daemon is not None:
            self._declare_daemon_files(daemon)

    def _declare_daemon_files(self, daemon: object) -> None:
        """The daemon's install (its code, venv, sandbox helper) and state folders. Skipped when
        it overlaps the workspace: a daemon serving its own repository lets the agent edit it."""
        workspace = os.path.realpath(str(getattr(daemon, "workspace", "/")))
        config = getattr(daemon, "config", None)
        install = Path(__file__).resolve().parents[2]
        own = {
            str(install): "the daemon's own code and environment",
            str(getattr(config, "state_root", "")): "the daemon's private state",
            str(
                getattr(config, "terminals_folder", "")
            ): "the daemon's terminal logs and output files",
            str(getattr(config, "artifacts_folder", "")): "the daemon's artifacts",
            str(getattr(config, "record_folder", "") or ""): "the daemon's session record",
            str(getattr(config, "sandbox_helper_path", "") or ""): "the sandbox helper",
        }
        for path, reason in own.items():
            real = os.path.realpath(path) if path and path != "None" else ""
            if real and not _under(workspace, real) and not _under(real, workspace):
                self.add(real, reason)
        token_file = getattr(config, "auth_token_file", None)
        if token_file:
            # Wherever it lies, the workspace included: neither read nor written by the agent.
            self.add(token_file, "the daemon's auth token", secret=True)

    def add(self, path: Path | str, reason: str, *, secret: bool = False) -> None:
        real = os.path.realpath(path)
        self._fixed[real] = Declared(real, reason, secret)

    def secret_file_reason(self, info: os.stat_result) -> str | None:
        """Why the regular file `info` describes is a secret file under another name (a hard
        link to the token file: same device and inode), or None. Only a file with more than one
        link can be one, so most reads cost nothing here."""
        if info.st_nlink < 2 or not stat.S_ISREG(info.st_mode):
            return None
        for declared in self._fixed.values():
            if not declared.secret:
                continue
            try:
                secret = os.stat(declared.path)
            except OSError:
                continue
            if (secret.st_dev, secret.st_ino) == (info.st_dev, info.st_ino):
                return f"this file is {declared.path} under another name: {declared.reason}"
        return None

    def add_provider(self, provider: Callable[[], Iterable[Declared]]) -> None:
        """`provider()` is asked on every write check (it should cache what it reads); what it
        gives is protected from writes (secrets are added with `add`)."""
        self._providers.append(provider)

    def all(self) -> list[Declared]:
        found = list(self._fixed.values())
        for provider in self._providers:
            found.extend(provider())
        return found

    def secrets(self) -> list[str]:
        return [item.path for item in self._fixed.values() if item.secret]

    def reason_for(self, real: str, *, reading: bool = False) -> str | None:
        """Why `real` must not be written (or, `reading`, read: secret paths only, which are
        never provided, so a read costs no provider call)."""
        found = [item for item in self._fixed.values() if item.secret] if reading else self.all()
        for declared in found:
            if _under(real, declared.path):
                return f"{real} is protected: {declared.reason}"
        return None


def check_writable(path: Path | str, rules: PathRules) -> None:
    """Raises PathRefused when a write to `path` would be refused, before any work is done (the
    write checks again on what it opens). Missing files and folders are no refusal."""
    try:
        target = open_target(path, rules, create_parents=False)
    except (FileNotFoundError, NotADirectoryError):
        return
    target.close()


def read_checked(path: Path | str, rules: PathRules, limit: int) -> tuple[bytes, os.stat_result]:
    """Up to `limit` bytes of the file at `path` (opened and checked as open_checked does)."""
    opened = open_checked(path, rules)
    if opened.is_dir:
        opened.close()
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    with os.fdopen(opened.fd, "rb") as file:
        return file.read(limit), opened.info


CONFIG_FILE_LIMIT = 1024 * 1024


def read_config_text(
    path: Path | str, limit: int = CONFIG_FILE_LIMIT, errors: str = "strict"
) -> str:
    """The text of a configuration file a repository or the agent may have planted (mcp.json,
    permissions.json, hooks.json, sandbox.json, environment.json): a regular file only (a FIFO
    would block, /dev/zero never ends), opened without blocking, at most `limit` bytes. Raises
    OSError (FileNotFoundError when missing, EINVAL, EFBIG) or UnicodeDecodeError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        data = file.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
    return data.decode("utf-8", errors)


def ensure_daemon_folder(path: Path | str, mode: int = 0o755) -> None:
    """Creates the daemon's own folder (terminal logs, spill files) with missing parents, and
    makes sure it is a real folder of the daemon's user with `mode`, never a symlink someone
    planted. Raises OSError (ELOOP for a symlink) when it cannot be made so."""
    folder = Path(path)
    folder.mkdir(mode=mode, parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            os.fchown(fd, os.geteuid(), os.getegid())
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


class OnlyPath(NoRules):
    """Rules for a daemon write with one fixed destination (environment.json): anything else a
    symlink on the way leads to is refused."""

    def __init__(self, expected: Path | str) -> None:
        self.expected = os.path.realpath(expected)

    def protected(self, real: str) -> str | None:
        if real == self.expected:
            return None
        return f"{real} is not {self.expected} (a symbolic link on the way was not followed)"
