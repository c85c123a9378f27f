"""The writable set: where the agent may write without anyone's approval, one definition for
every way it writes.

The sandbox (sandbox/plan.py) grants a confined shell exactly these areas, and the file tools
(tools/workspace.py's `write_rules`, the permissions guard) allow a write whose real path lies
in them; a write elsewhere needs approval outside run_everything. Inside the set, the protected
paths (exec_daemon/kernel/protected.py, DeclaredPaths) stay refused: they are the inner fence.

The areas: the workspace; the temp folders (/tmp, /var/tmp, /dev/shm, $TMPDIR) unless
sandbox.json's `disableTmpWrite`; the build caches (sandbox/caches.py); sandbox.json's
additional read-write paths. A home folder is never writable through a broader area (a HOME
under /tmp, or an additional path naming home or its parent): its start-up files and
configuration are not the agent's. Areas strictly inside a home (a cache folder, an additional
path such as `~/data`) stay writable, and the workspace is writable wherever it lies, even when
it is a home or holds one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from exec_daemon.kernel.protected import home_folders

TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
_AREAS = "the workspace, temp folders, build caches, sandbox.json's additional read-write paths"


def under(path: str, root: str) -> bool:
    """`path` is `root` or inside it (both absolute and normalised)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def temp_dirs(env: Mapping[str, str]) -> list[str]:
    """The real paths of the temp folders that exist: the usual ones and $TMPDIR."""
    found: dict[str, None] = {}
    for candidate in [*TEMP_DIRS, env.get("TMPDIR", "")]:
        if candidate and os.path.isdir(candidate):
            found[os.path.realpath(candidate)] = None
    return list(found)


@dataclass(frozen=True)
class WritableSet:
    """Real paths: the workspace (None: not writable, a read-only sandbox), the other areas, and
    the homes carved out of them."""

    workspace: str | None
    areas: tuple[str, ...]
    carved: tuple[str, ...] = ()

    @property
    def all_areas(self) -> tuple[str, ...]:
        """Every area, the workspace first (what Landlock grants)."""
        return tuple(dict.fromkeys([*filter(None, [self.workspace]), *self.areas]))

    def contains(self, real: str) -> bool:
        """Whether the real path `real` may be written without approval (the protected paths
        are judged apart)."""
        if self.workspace is not None and under(real, self.workspace):
            return True
        return any(
            under(real, area)
            and not any(under(real, home) and under(home, area) for home in self.carved)
            for area in self.areas
        )

    def outside_reason(self, real: str) -> str | None:
        """Why writing `real` needs approval; None when it lies in the set."""
        if self.contains(real):
            return None
        home = next((home for home in self.carved if under(real, home)), None)
        if home is not None:
            return f"{real} is in home folder {home}, which is not in the writable set ({_AREAS})"
        return f"{real} is outside the writable set ({_AREAS})"

    def inner_areas(self) -> list[str]:
        """The areas lying strictly inside a carved home: writable exceptions in it."""
        return [
            area
            for area in self.all_areas
            if any(under(area, home) and area != home for home in self.carved)
        ]


def writable_set(
    workspace: str | None,
    extra: Iterable[str],
    *,
    temp: bool,
    env: Mapping[str, str],
    homes: Iterable[str],
) -> WritableSet:
    """The writable set from its parts: `workspace` (a real path, or None), `extra` areas
    (additional read-write paths, cache folders: missing ones are left out, the rest resolved),
    the temp folders when `temp`, minus the `homes` (real paths) lying in or equal to an area
    other than the workspace."""
    areas: dict[str, None] = {}
    for path in extra:
        if path and os.path.exists(path):
            areas[os.path.realpath(path)] = None
    if temp:
        areas.update(dict.fromkeys(temp_dirs(env)))
    if workspace is not None:
        areas.pop(workspace, None)
    carved = tuple(
        home
        for home in dict.fromkeys(homes)
        if not (workspace is not None and under(home, workspace))
        and any(under(home, area) for area in areas)
    )
    return WritableSet(workspace, tuple(areas), carved)


@dataclass(frozen=True)
class WritableGrant:
    """What the sandbox's configuration adds to the workspace for a `workspace_readwrite`
    command: areas (additional read-write paths, cache folders) and whether temp folders are
    writable."""

    areas: tuple[str, ...] = ()
    temp: bool = True


class WritableAreas:
    """The writable set of the file tools: the workspace, and what the sandbox would grant a
    `workspace_readwrite` command (its `grant`, set by the composition root; without one, the
    temp folders). One per daemon: `daemon.service(WritableAreas)`."""

    def __init__(self, daemon: object = None) -> None:
        self._workspace = os.path.realpath(str(getattr(daemon, "workspace", "/")))
        self._env: Mapping[str, str] = getattr(daemon, "env", None) or os.environ
        self._grant: Callable[[], WritableGrant] = WritableGrant
        self._homes: tuple[str, ...] | None = None
        self._cached: tuple[WritableGrant, WritableSet] | None = None

    def set_grant(self, grant: Callable[[], WritableGrant]) -> None:
        """`grant()` is asked on every check (it should cache what it reads)."""
        self._grant = grant
        self._cached = None

    def homes(self) -> tuple[str, ...]:
        """The real home folders (the daemon's, its HOME, /root, /home/*), listed once."""
        if self._homes is None:
            found = home_folders([self._env.get("HOME") or ""])
            self._homes = tuple(dict.fromkeys(os.path.realpath(home) for home in found))
        return self._homes

    def current(self) -> WritableSet:
        grant = self._grant()
        cached = self._cached
        if cached is not None and cached[0] == grant:
            return cached[1]
        found = writable_set(
            self._workspace, grant.areas, temp=grant.temp, env=self._env, homes=self.homes()
        )
        self._cached = (grant, found)
        return found

    def outside_reason(self, real: str) -> str | None:
        """Why a file tool's write of the real path `real` needs approval, or None."""
        return self.current().outside_reason(real)
