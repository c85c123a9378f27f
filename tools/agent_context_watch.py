"""Watches the agent-context files (tools/agent_context.py) and the MCP config for changes.

One inotify watch (watchfiles, https://watchfiles.helpmanual.io/api/watch/) per daemon, running
while at least one WatchAgentContext stream listens: the workspace (recursively; watchfiles'
default filter skips .git, node_modules, virtualenvs and caches) and the home's `.cursor` and
`.claude` folders that exist when the watch starts. Changes are debounced (DEBOUNCE_MS: a burst of
edits is one message) and filtered to the files the context is made of; each subscriber gets
one `ContextChange` per batch saying which files changed and what they are. An mcp.json change
also names the MCP servers it added, removed or changed (the config read again, as
tools/mcp_config.py reads it; ListMcpTools reloads on its own, tools/mcp_catalog.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath

from watchfiles import Change, DefaultFilter, awatch

from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.state import Daemon
from tools.mcp_config import ServerSpec, load_settings

log = logging.getLogger(__name__)

DEBOUNCE_MS = 400
STEP_MS = 50
# The watcher wakes this often without events; its first wake-up says the watch is in place.
TICK_MS = 500
MAX_PATHS_PER_CHANGE = 100
QUEUE_SIZE = 100
# How much of a folder created under the watch is looked through for context files.
MAX_SCANNED_ENTRIES = 2000

_CURSOR_KINDS = {
    "rules": "rules",
    "cloud-rules": "rules",
    "skills": "skills",
    "agents": "subagents",
}
_CLAUDE_KINDS = {"skills": "skills", "agents": "subagents", "rules": "claude_md"}


def change_kind(path: str, extra_mcp_files: frozenset[str] = frozenset()) -> str | None:
    """What a changed path is to the agent's context, or None when nothing."""
    parts = PurePath(path).parts
    name = parts[-1] if parts else ""
    if path in extra_mcp_files or (name == "mcp.json" and parts[-2:-1] == (".cursor",)):
        return "mcp"
    if name == ".cursorrules":
        return "rules"
    if name == "AGENTS.md":
        return "agents_md"
    if name in ("CLAUDE.md", "CLAUDE.local.md"):
        return "claude_md"
    for folder, kinds in ((".cursor", _CURSOR_KINDS), (".claude", _CLAUDE_KINDS)):
        if folder in parts:
            index = len(parts) - 1 - parts[::-1].index(folder)
            if index + 1 < len(parts) and parts[index + 1] in kinds:
                return kinds[parts[index + 1]]
    return None


@dataclass
class ContextChange:
    paths: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    mcp_added: list[str] = field(default_factory=list)
    mcp_removed: list[str] = field(default_factory=list)
    mcp_changed: list[str] = field(default_factory=list)
    sequence: int = 0


class ContextWatcher:
    """Per-daemon service (`daemon.service(ContextWatcher)`): `subscribe()` gives a queue of
    ContextChange; the watch runs while someone is subscribed."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        self._subscribers: set[asyncio.Queue[ContextChange | None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._ready = asyncio.Event()
        self._sequence = 0
        self._mcp_servers: Mapping[str, ServerSpec] = {}
        self.roots: list[str] = []
        # Why the watch ended on its own (subscribers then get None from their queue).
        self.failure = ""

    def _roots(self) -> list[str]:
        workspace = os.path.realpath(self._daemon.workspace)
        roots = [workspace]
        home = self._daemon.env.get("HOME") or ""
        for folder in (".cursor", ".claude"):
            path = os.path.realpath(os.path.join(home, folder)) if home else ""
            inside = path == workspace or path.startswith(workspace + "/")
            if path and os.path.isdir(path) and not inside:
                roots.append(path)
        return roots

    def _load_mcp_servers(self) -> Mapping[str, ServerSpec]:
        return load_settings(self._daemon.config, self._daemon.env.snapshot()).servers

    def _extra_mcp_files(self) -> frozenset[str]:
        tools_file = self._daemon.config.http_mcp_tools_file
        return frozenset({os.path.realpath(tools_file)} if tools_file else ())

    async def subscribe(self) -> asyncio.Queue[ContextChange | None]:
        """A queue of changes once the watch is in place; None in it: the watch ended (see
        `failure`). Raises CodedError (unavailable) when the watch cannot start."""
        if self._task is not None and not self._task.done() and self._stop.is_set():
            # The last subscriber just left: let that watch end, then start a new one.
            await asyncio.wait([self._task], timeout=5.0)
        queue: asyncio.Queue[ContextChange | None] = asyncio.Queue(QUEUE_SIZE)
        self._subscribers.add(queue)
        if self._task is None or self._task.done():
            self._stop = asyncio.Event()
            self._ready = asyncio.Event()
            self.failure = ""
            self.roots = await asyncio.to_thread(self._roots)
            self._mcp_servers = await asyncio.to_thread(self._load_mcp_servers)
            self._task = asyncio.create_task(self._watch(), name="agent-context-watch")
        ready = asyncio.create_task(self._ready.wait())
        await asyncio.wait([ready, self._task], return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if self.failure:
            self.unsubscribe(queue)
            raise CodedError(ErrorCode.UNAVAILABLE, self.failure)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[ContextChange | None]) -> None:
        self._subscribers.discard(queue)
        if not self._subscribers:
            self._stop.set()

    async def _watch(self) -> None:
        default = DefaultFilter()
        extra = self._extra_mcp_files()

        def wanted(change: Change, path: str) -> bool:
            if not default(change, path):
                return False
            return change_kind(path, extra) is not None or _new_folder(change, path)

        try:
            async for changes in awatch(
                *self.roots,
                watch_filter=wanted,
                debounce=DEBOUNCE_MS,
                step=STEP_MS,
                stop_event=self._stop,
                rust_timeout=TICK_MS,
                yield_on_timeout=True,
                ignore_permission_denied=True,
            ):
                self._ready.set()
                if changes:
                    paths = await asyncio.to_thread(_context_paths, changes, extra, default)
                    if paths:
                        await self._publish(paths, extra)
        except Exception as exc:
            # e.g. OSError "OS file watch limit reached" on a huge tree (fs.inotify limits).
            self.failure = f"the agent-context watch stopped: {exc}"
            log.warning("%s", self.failure)
            log.debug("the agent-context watch stopped", exc_info=True)
        finally:
            self._ready.set()
            for queue in list(self._subscribers):
                _put_latest(queue, None)

    async def _publish(self, paths: list[str], extra: frozenset[str]) -> None:
        kinds = sorted({kind for path in paths if (kind := change_kind(path, extra))})
        self._sequence += 1
        change = ContextChange(paths[:MAX_PATHS_PER_CHANGE], kinds, sequence=self._sequence)
        if "mcp" in kinds:
            old, new = self._mcp_servers, await asyncio.to_thread(self._load_mcp_servers)
            self._mcp_servers = new
            change.mcp_added = sorted(set(new) - set(old))
            change.mcp_removed = sorted(set(old) - set(new))
            change.mcp_changed = sorted(n for n in set(old) & set(new) if old[n] != new[n])
        for queue in list(self._subscribers):
            _put_latest(queue, change)

    async def aclose(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, 5.0)


def _context_paths(
    changes: set[tuple[Change, str]], extra: frozenset[str], default: DefaultFilter
) -> list[str]:
    """The changed context files; a folder created since the last batch is looked into, as
    what was made in it before the watch reached it (`mkdir -p .cursor/rules && echo > ...`, a
    checkout) gives no event of its own."""
    found: set[str] = set()
    for change, path in changes:
        if _new_folder(change, path):
            found.update(_context_files_under(path, extra, default))
        elif change_kind(path, extra) is not None:
            found.add(path)
    return sorted(found)


def _new_folder(change: Change, path: str) -> bool:
    """A folder just made in the workspace; not a symlink, which may lead anywhere (a symlink
    to `/` would have the watch list the machine's files)."""
    return change == Change.added and os.path.isdir(path) and not os.path.islink(path)


def _context_files_under(folder: str, extra: frozenset[str], default: DefaultFilter) -> list[str]:
    found, looked_at = [], 0
    for parent, dirs, files in os.walk(folder):
        dirs[:] = [name for name in dirs if default(Change.added, os.path.join(parent, name))]
        for name in files:
            path = os.path.join(parent, name)
            if change_kind(path, extra) is not None:
                found.append(path)
        looked_at += len(dirs) + len(files)
        if looked_at > MAX_SCANNED_ENTRIES:
            break
    return found


def _put_latest(queue: asyncio.Queue[ContextChange | None], item: ContextChange | None) -> None:
    """Queues `item`; a subscriber QUEUE_SIZE changes behind loses its oldest one."""
    if queue.full():
        queue.get_nowait()
    queue.put_nowait(item)
