"""User configuration files (permissions.json, hooks.json, .claude/settings.json), re-read when they change.

Every tool call consults them, so each file is parsed once and only re-parsed when its stat
(mtime, ctime, size, inode, device) changes: a call costs one `stat` per file. ctime is in the
stamp because nobody can set it back (`touch -d` restores an mtime, not a ctime); and since file
times tick coarsely (a few ms), a file changed that recently is read again at every call. A file
that does not parse is logged once per change and treated as absent.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from exec_daemon.kernel.paths import read_config_text
from exec_daemon.kernel.state import Daemon

log = logging.getLogger(__name__)

T = TypeVar("T")
_Stamp = tuple[int, int, int, int, int]
# A file whose ctime is this recent may change again without its stamp changing.
_SETTLE_NS = 100_000_000


class WatchedJson:
    """One JSON (with comments and trailing commas) file; `value()` is its parsed content or None."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._name = str(path)
        self._stamp: _Stamp | None = None
        self._value: Any = None

    def value(self) -> Any:
        # Most of these files do not exist: access() says so without raising an exception,
        # which halves the cost of the common case (every tool call asks). A file that was
        # there last time is most likely still there: one stat() says both.
        if self._stamp is None and not os.access(self._name, os.F_OK):
            self._value = None
            return None
        try:
            stat = os.stat(self._name)
        except OSError:
            self._stamp, self._value = None, None
            return None
        stamp = (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino, stat.st_dev)
        changed = stamp != self._stamp
        if changed or time.time_ns() - stat.st_ctime_ns < _SETTLE_NS:
            self._stamp = stamp
            self._value = self._load(report_errors=changed)
        return self._value

    def _load(self, report_errors: bool) -> Any:
        import json5  # ~10 ms to import: when a config file is first read, not at start

        try:
            return json5.loads(read_config_text(self.path))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            if report_errors:
                log.warning("ignoring %s: it is not valid JSON (%s)", self.path, exc)
            return None


def home_dir(daemon: Daemon) -> Path:
    """The agent's home: HOME of the environment the daemon gives its processes."""
    home = daemon.env.get("HOME")
    return Path(home) if home else Path.home()


class WatchedConfig(Generic[T]):
    """A value built from several watched files; rebuilt only when one of them changed.

    `paths(daemon)` lists the files (they may depend on HOME, so they are listed again when
    HOME changes); `build` gets (path, parsed document or None) pairs in that order.
    """

    def __init__(
        self,
        daemon: Daemon,
        paths: Callable[[Daemon], Sequence[Path]],
        build: Callable[[list[tuple[Path, Any]]], T],
    ) -> None:
        self._daemon = daemon
        self._paths = paths
        self._build = build
        self._home: str | None = None
        self._files: list[WatchedJson] = []
        self._documents: list[Any] | None = None
        self._value: T | None = None

    def get(self) -> T:
        home = self._daemon.env.get("HOME")
        if home != self._home or not self._files:
            unique = dict.fromkeys(self._paths(self._daemon))
            self._files = [WatchedJson(path) for path in unique]
            self._home = home
            self._documents = None
        documents = [watched.value() for watched in self._files]
        if self._documents is None or any(
            old is not new for old, new in zip(self._documents, documents, strict=True)
        ):
            self._documents = documents
            self._value = self._build(
                [(watched.path, doc) for watched, doc in zip(self._files, documents, strict=True)]
            )
        return self._value  # type: ignore[return-value]
