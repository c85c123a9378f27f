"""Placeholders for missing protected paths, kept by the daemon between sandboxes.

A protected path that does not exist needs something on disk to mount over (else a confined
command could create it). The helper creates such placeholders itself (marked with an xattr,
share-locked with flock while in use, removed by the last user if still empty), but creating
and removing directories per command costs file-system journal writes, which stall for
milliseconds when the disk is busy. So the daemon creates them once and holds a shared lock
too: helpers then only open and lock them, and never remove them. The daemon removes them when
no sandbox has run for `linger` seconds (and on shutdown), with the helper's own protocol, so a
sandbox still using one keeps it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os

log = logging.getLogger(__name__)

MARK = "user.exec-daemon.placeholder"
DEFAULT_LINGER_SECONDS = 60.0
# A helper that is ending may still hold its lock for a moment (and skip the removal because
# we hold ours): retry that long before leaving a placeholder to the sandboxes still using it.
RELEASE_RETRY_SECONDS = 0.5


def _same_file(fd: int, path: str) -> bool:
    try:
        by_fd, by_path = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (by_fd.st_dev, by_fd.st_ino) == (by_path.st_dev, by_path.st_ino)


def _is_marked(fd: int) -> bool:
    try:
        return bool(os.getxattr(fd, MARK))
    except OSError:
        return False


class PlaceholderKeeper:
    def __init__(self, linger: float = DEFAULT_LINGER_SECONDS) -> None:
        self.linger = linger
        self._held: dict[str, int] = {}
        self._release: asyncio.TimerHandle | None = None
        self._releasing: asyncio.Task[None] | None = None

    def hold(self, path: str, directory: bool) -> None:
        """Makes sure a marked placeholder exists at `path` (unless something real is there)
        and keeps it share-locked. Failures are left to the helper, which reports them."""
        self.cancel_release()
        held = self._held.get(path)
        if held is not None:
            if _same_file(held, path):
                return
            os.close(self._held.pop(path))
        try:
            fd = self._open_or_create(path, directory)
        except OSError as exc:
            log.debug("no placeholder at %s: %s", path, exc)
            return
        if fd is None:
            return
        fcntl.flock(fd, fcntl.LOCK_SH)
        if _same_file(fd, path):
            self._held[path] = fd
        else:
            os.close(fd)

    def _open_or_create(self, path: str, directory: bool) -> int | None:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            if directory:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(path, 0o755)
                fd = os.open(path, flags | os.O_DIRECTORY)
            else:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.setxattr(fd, MARK, b"1")
                _give_to_parents_owner(fd, path)
            except OSError:
                # Unmarked it would never be removed: leave the creation to the helper.
                os.close(fd)
                _remove_if_empty(path)
                return None
            return fd
        if _is_marked(fd):
            return fd
        os.close(fd)  # something real: the helper protects it as it is
        return None

    def schedule_release(self) -> None:
        """Removes the placeholders after `linger` seconds unless a sandbox starts meanwhile."""
        if not self._held:
            return
        self.cancel_release()
        self._release = asyncio.get_running_loop().call_later(self.linger, self._start_release)

    def _start_release(self) -> None:
        self._releasing = asyncio.get_running_loop().create_task(self.release())

    def cancel_release(self) -> None:
        if self._release is not None:
            self._release.cancel()
            self._release = None

    async def release(self) -> None:
        self.cancel_release()
        held, self._held = self._held, {}
        deadline = asyncio.get_running_loop().time() + RELEASE_RETRY_SECONDS
        while held:
            # Deepest first: a placeholder may sit inside another one.
            for path, fd in sorted(held.items(), key=lambda item: -item[0].count("/")):
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue
                if _same_file(fd, path):
                    _remove_if_empty(path)
                os.close(held.pop(path))
            if asyncio.get_running_loop().time() > deadline:
                break
            if held:
                await asyncio.sleep(0.02)
        # Still in use by a sandbox: its helper removes it when that sandbox ends.
        for fd in held.values():
            os.close(fd)


def _give_to_parents_owner(fd: int, path: str) -> None:
    """A root daemon's placeholder in someone else's workspace belongs to that someone (who
    may want to fill it, e.g. `git init` over a `.git` placeholder)."""
    if os.geteuid() != 0:
        return
    parent = os.stat(os.path.dirname(path))
    if (parent.st_uid, parent.st_gid) != (0, 0):
        os.fchown(fd, parent.st_uid, parent.st_gid)


def _remove_if_empty(path: str) -> None:
    with contextlib.suppress(OSError):
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        elif os.path.getsize(path) == 0:
            os.unlink(path)
