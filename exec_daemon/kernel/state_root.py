"""The daemon's private state root: one folder per daemon instance, out of the agent's reach.

Where: `/run/exec-daemon/<instance>` for root; else `$XDG_RUNTIME_DIR/exec-daemon/<instance>`
when that variable names a folder of the daemon's user with mode 0700; else
`~/.local/state/exec-daemon/<instance>`. `<instance>` is `<pid>-<random>`, new at every start, so
two daemons on one machine (or a daemon and its restart) never share a tmux server, logs or
shell ids. Every folder on the way is checked: no symbolic link, owned by root or the daemon's
user, writable by nobody else (so never /tmp or another world-writable parent); the daemon's
own ones have mode 0700.

What lives there: `terminals/` (the default terminals folder: logs, spill files, the semantic
index's store), `shell/` (the shell sessions' runtime), `recordings/`, `mcp/` (MCP servers'
stderr logs) and `sockets/` (the tmux server's and code-server's sockets). Sandboxes read the
root (the agent reads its terminal logs) but cannot write it, and `sockets/` is masked in every
sandbox by an empty mount (sandbox/plan.py): it exists before any sandbox starts, so a socket
bound there later is out of reach too.

An instance holds a lock on `<instance>/.lock` for its life; at start, a daemon claims (locks)
the folders of instances whose lock nobody holds (daemons that ended), ends what they left
running (exec_daemon/kernel/leftovers.py) and removes them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

SOCKETS = "sockets"
# Beside the instances: the session records, one folder per workspace.
RECORDS = ".records"
LOCK_FILE = ".lock"
# Instances being created are named so until they hold their lock: pruning leaves them alone.
STAGING_PREFIX = ".new-"
PRIVATE_MODE = 0o700

# root -> the open lock file of this process's instance (kept open for the process's life).
_held: dict[str, int] = {}


class StateRootError(OSError):
    """The state root cannot be made private; the message says why (one line)."""


def default_base(env: dict[str, str] | None = None) -> Path:
    """The folder that holds every instance's root, by the rule in the module docstring."""
    if os.geteuid() == 0:
        return Path("/run/exec-daemon")
    runtime = (env if env is not None else os.environ).get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime) and _is_private_folder(runtime):
        return Path(runtime) / "exec-daemon"
    return Path.home() / ".local" / "state" / "exec-daemon"


def new_state_root(base: Path | None = None) -> Path:
    """A fresh instance's root (a name only: `prepare_state_root` makes it)."""
    return (base or default_base()) / f"{os.getpid()}-{secrets.token_hex(4)}"


def default_record_folder(workspace: Path, base: Path | None = None) -> Path:
    """The session record's folder of a workspace: beside the instances' roots (so it outlives
    each instance), named by the workspace's path. Dot-named: pruning leaves it alone."""
    key = hashlib.sha256(os.fsencode(os.path.realpath(workspace))).hexdigest()[:16]
    return (base or default_base()) / RECORDS / key


def prepare_private_folder(folder: Path) -> Path:
    """Makes `folder` and its missing ancestors (0700), with every ancestor checked as the
    state root's are. Raises StateRootError."""
    _make_private_chain(folder.parent)
    _make_private_folder(folder)
    return folder


def sockets_folder(root: Path) -> Path:
    return root / SOCKETS


def prepare_state_root(root: Path) -> Path:
    """Makes `root` (idempotent per process) and returns it. Raises StateRootError."""
    key = str(root)
    if key in _held:
        return root
    if not root.is_absolute():
        raise StateRootError(f"the state root {root} is not an absolute path")
    _make_private_chain(root.parent)
    try:
        _make_instance(root)
    except OSError as exc:
        raise StateRootError(f"cannot make the state root {root}: {exc.strerror or exc}") from None
    return root


def state_folder(root: Path, name: str) -> Path:
    """`root/name`, made (mode 0700, never through a link) together with the root."""
    prepare_state_root(root)
    folder = root / name
    _make_private_folder(folder)
    return folder


@dataclass(frozen=True)
class EndedInstance:
    """The root of a daemon that ended, locked by this process until `remove()`: no other
    daemon starting meanwhile takes it for a live one's or removes it under us."""

    path: Path
    lock: int

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self.lock)


def claim_ended_instances(root: Path) -> list[EndedInstance]:
    """The sibling instances of `root` whose lock nobody holds, each now held by this process."""
    claimed: list[EndedInstance] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(root.parent):
            if entry.name.startswith(".") or entry.path == str(root):
                continue
            if entry.is_dir(follow_symlinks=False):
                lock = _take_lock(Path(entry.path))
                if lock is not None:
                    claimed.append(EndedInstance(Path(entry.path), lock))
    return claimed


def prune_ended_instances(root: Path) -> list[Path]:
    """Removes the sibling instances whose lock nobody holds; returns them."""
    ended = claim_ended_instances(root)
    for instance in ended:
        instance.remove()
    return [instance.path for instance in ended]


def _make_instance(root: Path) -> None:
    """Made under a staging name, locked, then renamed: pruning never sees it unlocked."""
    staging = root.parent / f"{STAGING_PREFIX}{root.name}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(staging, PRIVATE_MODE)
    fd = _open_private_folder(staging)
    try:
        lock = os.open(
            LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd
        )
    finally:
        os.close(fd)
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(staging, root)
    _held[str(root)] = lock
    _make_private_folder(sockets_folder(root))


def _take_lock(instance: Path) -> int | None:
    """The open, locked lock file of `instance`; None when its lock is held (a live daemon)."""
    try:
        fd = os.open(
            instance / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _make_private_chain(folder: Path) -> None:
    """Checks every existing ancestor of `folder` and makes the missing ones (0700)."""
    for ancestor in [*reversed(folder.parents), folder]:
        try:
            info = os.lstat(ancestor)
        except FileNotFoundError:
            _make_private_folder(ancestor)
            continue
        except OSError as exc:
            raise StateRootError(f"cannot inspect {ancestor}: {exc.strerror}") from None
        _check_safe_ancestor(ancestor, info)


def _check_safe_ancestor(path: Path, info: os.stat_result) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise StateRootError(f"{path} is a symbolic link: the state root must not lie under one")
    if not stat.S_ISDIR(info.st_mode):
        raise StateRootError(f"{path} is not a folder")
    if info.st_uid not in (0, os.geteuid()):
        raise StateRootError(f"{path} belongs to another user (uid {info.st_uid})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise StateRootError(
            f"{path} is writable by other users: the state root must not lie under it"
        )


def _make_private_folder(folder: Path) -> None:
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, PRIVATE_MODE)
        os.close(_open_private_folder(folder))
    except OSError as exc:
        raise StateRootError(f"cannot make {folder}: {exc.strerror or exc}") from None


def _open_private_folder(folder: Path) -> int:
    """An fd of `folder`, checked to be a real folder of the daemon's user, set to 0700."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            raise StateRootError(f"{folder} belongs to another user (uid {info.st_uid})")
        if stat.S_IMODE(info.st_mode) != PRIVATE_MODE:
            os.fchmod(fd, PRIVATE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_private_folder(path: str) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.geteuid()
        and not info.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
    )
