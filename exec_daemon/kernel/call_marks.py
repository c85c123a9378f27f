"""Every process an agent call starts carries the call's mark in its environment, so the call's
timeout or abort, and the daemon's shutdown, reach it wherever it went: a `setsid` child, a
`setsid -f` or double-forked daemon leaves the call's session and process group, and its parent
may be gone, but the environment it was started with (`/proc/<pid>/environ`) still names the call.

Why a mark rather than the alternatives: a cgroup per call needs a delegated cgroup tree, which a
VM or container rarely gives; a child subreaper (orphans re-parent to the daemon) loses which call
an orphan came from once its parent is gone, and the daemon would have to reap processes asyncio
does not know of, racing asyncio's own waits. The mark needs no privilege and survives any
re-parenting. Its limit: a process that deliberately starts children without it (`env -u`)
escapes; the sandbox's PID namespace is the confinement for commands that must not.

Marks are `<daemon instance>.<serial>`; the daemon's shutdown ends every process marked with its
instance. What the daemon starts outside any call (shells, terminals, helpers) carries its mark
too (`<daemon instance>.0`, `with_daemon_mark`), so a daemon killed with SIGKILL leaves nothing
unmarked for its successor to find (exec_daemon/kernel/leftovers.py). Reading environs is only
done when ending processes, and only for processes started since the call (or the daemon) began,
or at start for what a killed daemon left.
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Mapping

from exec_daemon.kernel.processes import ProcInfo, Selector

CALL_MARK_VARIABLE = "EXEC_DAEMON_CALL"
_INSTANCE = f"{os.getpid()}-{secrets.token_hex(4)}"
_serial = itertools.count(1)
_ENTRY = CALL_MARK_VARIABLE.encode() + b"="


def new_call_mark() -> str:
    """A mark no other call of any daemon uses."""
    return f"{_INSTANCE}.{next(_serial)}"


def daemon_mark_prefix() -> str:
    """The beginning every mark of this daemon shares."""
    return f"{_INSTANCE}."


def with_daemon_mark(env: Mapping[str, str]) -> dict[str, str]:
    """`env` marked as this daemon's: a call's own mark is kept, any other (e.g. the mark of the
    daemon this one was started under) is replaced by this daemon's."""
    if env.get(CALL_MARK_VARIABLE, "").startswith(daemon_mark_prefix()):
        return dict(env)
    return {**env, CALL_MARK_VARIABLE: _daemon_mark()}


def _daemon_mark() -> str:
    """The mark of what the daemon starts outside calls (no call's serial is 0)."""
    return f"{daemon_mark_prefix()}0"


def mark_of(pid: int) -> str | None:
    """The call mark `pid` was started with, or None (gone, unreadable or unmarked)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            data = environ.read()
    except OSError:
        return None
    for entry in data.split(b"\0"):
        if entry.startswith(_ENTRY):
            return entry[len(_ENTRY) :].decode(errors="replace")
    return None


def marked(
    mark: str, *, since_ticks: int = 0, prefix: bool = False, unless: str | None = None
) -> Selector:
    """Selects live processes started (since `since_ticks`) with `mark`, or with any mark
    beginning with it when `prefix`, except those marked `unless`."""
    own = os.getpid()

    def select(info: ProcInfo) -> bool:
        if not info.alive or info.start_ticks < since_ticks or info.pid == own:
            return False
        found = mark_of(info.pid)
        if found is None or found == unless:
            return False
        return found.startswith(mark) if prefix else found == mark

    return select


def marked_by_this_daemon(since_ticks: int = 0) -> Selector:
    """What this daemon's calls and helpers started; not its shells and terminals (and what a
    person typed in them), which their owners end (several daemons may share a process in
    tests)."""
    return marked(daemon_mark_prefix(), since_ticks=since_ticks, prefix=True, unless=_daemon_mark())
