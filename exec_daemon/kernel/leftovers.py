"""What a daemon that ended without stopping (kill -9, OOM kill, a crash) left running, found and
ended by the next daemon started on the same base (exec_daemon/kernel/state_root.py).

A daemon stopping ends its world itself (exec_daemon/server.py); killed, it cannot: its tmux
server and the sessions on it, the agent's shells, background jobs and whatever they started
live on, re-parented to init. Every process a daemon starts carries its mark in its environment
(exec_daemon/kernel/call_marks.py), children inherit it, and the daemon writes the marks' common
prefix (`<pid>-<random>.`) into its state root at start (MARK_FILE). A daemon starting later
claims each instance whose lock is free (its daemon ended), and before it removes its folder,
ends every live process carrying that prefix, and every process of a session or process group
led by one (a command that dropped the mark with `env -u` but stayed in its shell's session):
SIGTERM, then SIGKILL after a grace period, through pidfds checked against the start time.

Why this is safe: a live daemon's lock is held, so its instance is never claimed; the prefix
holds a random part, so a process whose pid was recycled never carries it; and the starting
daemon spares itself, its ancestors and its descendants (it may have been started from a shell
of the ended daemon, whose mark it then inherited). Its limit is the mark's: a process that
deliberately dropped it (`env -u`) escapes once it left its session, or once its session's
leader ended (an agent shell ends with the daemon that fed it commands).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from exec_daemon.kernel.call_marks import daemon_mark_prefix, mark_of
from exec_daemon.kernel.processes import (
    DEFAULT_GRACE_SECONDS,
    ProcInfo,
    all_processes,
    proc_info,
    terminate_selected,
)

MARK_FILE = "processes.mark"
_MARK_PREFIX = re.compile(r"\A[0-9]+-[0-9a-f]{8}\.\Z")


def record_mark(root: Path) -> None:
    """Writes this daemon's mark prefix into its state root `root` (which exists)."""
    staging = root / f".{MARK_FILE}"
    staging.write_text(daemon_mark_prefix())
    os.replace(staging, root / MARK_FILE)


def recorded_mark(root: Path) -> str | None:
    """The mark prefix the daemon of `root` recorded; None when it recorded none."""
    try:
        text = (root / MARK_FILE).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    return text if _MARK_PREFIX.match(text) else None


@dataclass(frozen=True)
class Ended:
    """What was ended of one instance's world: process names (/proc/<pid>/comm) by count."""

    instance: Path
    names: Counter[str]

    @property
    def count(self) -> int:
        return sum(self.names.values())

    def summary(self) -> str:
        return ", ".join(f"{name} ({count})" for name, count in sorted(self.names.items()))


class _LeftBy:
    """Selects the live processes of the ended instances (mark prefix -> instance root)."""

    def __init__(self, prefixes: Mapping[str, Path]) -> None:
        self.prefixes = dict(prefixes)
        self.spared = _ancestors(os.getpid())
        # (pid, start time) -> instance: once chosen, a process stays chosen, e.g. one found
        # by its session's leader after the leader ended.
        self.chosen: dict[tuple[int, int], Path] = {}

    def __call__(self, info: ProcInfo) -> bool:
        return self.owner(info) is not None

    def owner(self, info: ProcInfo) -> Path | None:
        if not info.alive or info.pid in self.spared:
            return None
        identity = (info.pid, info.start_ticks)
        if identity in self.chosen:
            return self.chosen[identity]
        instance = self._by_mark(info.pid)
        if instance is None:
            instance = self._by_leader(info)
        if instance is None or os.getpid() in _ancestors(info.ppid):
            return None
        self.chosen[identity] = instance
        return instance

    def _by_mark(self, pid: int) -> Path | None:
        mark = mark_of(pid)
        if mark is None:
            return None
        for prefix, instance in self.prefixes.items():
            if mark.startswith(prefix):
                return instance
        return None

    def _by_leader(self, info: ProcInfo) -> Path | None:
        """The instance of the marked leader of `info`'s session or group, when alive: a pid
        in use as a session or group id is never given to another process."""
        for leader in {info.sid, info.pgid} - {info.pid}:
            lead = proc_info(leader)
            if lead is not None and lead.alive and lead.start_ticks <= info.start_ticks:
                if (instance := self._by_mark(leader)) is not None:
                    return instance
        return None


def _ancestors(pid: int) -> set[int]:
    """`pid` and its ancestors."""
    found: set[int] = set()
    while pid > 0 and pid not in found:
        found.add(pid)
        info = proc_info(pid)
        if info is None:
            break
        pid = info.ppid
    return found


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip() or "?"
    except OSError:
        return "?"


async def end_left_running(
    instances: Iterable[Path], grace: float = DEFAULT_GRACE_SECONDS
) -> list[Ended]:
    """Ends what the ended daemons of `instances` (claimed state roots) left running; what was
    ended, for the instances that had anything left."""
    prefixes = {mark: root for root in instances if (mark := recorded_mark(root)) is not None}
    if not prefixes:
        return []
    select = _LeftBy(prefixes)
    # Reading every process's environment takes a while on a busy machine: off the loop.
    names = await asyncio.to_thread(_names_by_instance, select)
    if names:
        await terminate_selected(select, grace)
    return [Ended(instance, found) for instance, found in names.items()]


def _names_by_instance(select: _LeftBy) -> dict[Path, Counter[str]]:
    names: dict[Path, Counter[str]] = {}
    for info in all_processes():
        if (instance := select.owner(info)) is not None:
            names.setdefault(instance, Counter())[_comm(info.pid)] += 1
    return names
