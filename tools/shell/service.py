"""The daemon-wide shell state: one session per (agent, confinement), one-shot shells, jobs."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import re
import secrets
import shlex
import shutil
import tempfile
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from exec_daemon.kernel.call_marks import marked_by_this_daemon
from exec_daemon.kernel.git import agent_git_environment
from exec_daemon.kernel.metering import Meter, Metric
from exec_daemon.kernel.paths import ensure_daemon_folder
from exec_daemon.kernel.processes import (
    Confinement,
    all_processes,
    terminate_selected,
    terminate_sessions,
)
from exec_daemon.kernel.sandboxing import Sandboxing
from exec_daemon.kernel.secrets import without_secrets
from exec_daemon.kernel.state import Daemon
from exec_daemon.kernel.state_root import state_folder
from tools.shell.bash_scripts import SESSION_LOOP, SESSION_LOOP_NAME
from tools.shell.jobs import OneShotSpec, ShellJob, start_one_shot
from tools.shell.session import SessionStartError, ShellSession, Sink, env_diff_script

log = logging.getLogger(__name__)

# Ended jobs stay addressable (exit code, output file) until this many newer ones ended.
KEEP_ENDED_JOBS = 256
# Spill files of past calls kept in <terminals_folder>/shell-output.
KEEP_SPILL_FILES = 64
SHUTDOWN_GRACE_SECONDS = 1.0
# An rc file that kept bash from starting this many times in a row is no longer sourced.
RC_FILE_ATTEMPTS = 3
# Live session shells (one per agent); the least recently used idle ones are closed beyond it.
MAX_LIVE_SESSIONS = 32
# Shells starting at once (bash and the rc file it sources, mostly CPU); more wait their turn,
# so that many agents at once do not make every start slow enough to time out
# (session.STARTUP_SECONDS, counted from the spawn) and go on without the rc file.
MAX_STARTING_SHELLS = max(2, os.cpu_count() or 1)
MAX_KNOWN_SESSIONS = 512
SHELL_FILE = re.compile(r"shell-(\d+)\.(?:log|json)")
SPILL_FILE = re.compile(r"shell-(\d+)-")


class ShellService:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        # In the daemon's private root (sandboxes read it, only a session's own folder is
        # writable to that session): a fresh folder per service.
        self.runtime_dir = Path(
            tempfile.mkdtemp(prefix="shell-", dir=state_folder(daemon.config.state_root, "shell"))
        )
        (self.runtime_dir / SESSION_LOOP_NAME).write_text(SESSION_LOOP)
        # Unconfined shells source files here (the loop, saved states): sandboxes only read it.
        daemon.service(Sandboxing).keep_private(self.runtime_dir)
        self._sessions: dict[tuple[str, str], ShellSession] = {}
        daemon.service(Meter).watch(Metric.LIVE_SHELL_SESSIONS, self._live_sessions)
        self.jobs: dict[int, ShellJob] = {}
        self._ended_jobs: list[int] = []
        self._spawned_sids: set[int] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._spill_count = itertools.count(1)
        self._env_version = 0
        self._session_env_version: dict[int, int] = {}
        self._rc_file_failures = 0
        self._starting: set[tuple[str, str]] = set()
        self._start_slots = asyncio.Semaphore(MAX_STARTING_SHELLS)
        self.closing = False
        self.pinned_script = _pinned_script(daemon.env.snapshot())
        self._terminals_folder = Path(daemon.config.terminals_folder)
        # Created now (not on first use), so the sandbox mounts it read-only from the start.
        ensure_daemon_folder(self._terminals_folder / "shell-output")
        ensure_daemon_folder(self._terminals_folder)
        self.terminals_path = str(self._terminals_folder)
        # Above every id whose files a folder kept from an earlier daemon holds: a log is never
        # reused (nor appended to), and an id names one shell only.
        self._ids = itertools.count(_highest_shell_id(self._terminals_folder) + 1)
        daemon.env.subscribe(self._env_changed)

    # -- ids, paths, tasks --------------------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    @property
    def terminals_folder(self) -> Path:
        return self._terminals_folder

    def spill_path(self, shell_id: int) -> Path:
        folder = self.terminals_folder / "shell-output"
        return folder / f"shell-{shell_id}-{next(self._spill_count)}-{secrets.token_hex(4)}.txt"

    def prune_spill_files(self) -> None:
        """Removes all but the newest spill files: in the folder itself, never through a link
        (the folder opened without following one, its entries removed relative to it)."""
        folder = self.terminals_folder / "shell-output"
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                files = [
                    (entry.stat(follow_symlinks=False).st_mtime, entry.name)
                    for entry in os.scandir(fd)
                    if entry.is_file(follow_symlinks=False)
                ]
                for _mtime, name in sorted(files)[:-KEEP_SPILL_FILES]:
                    os.unlink(name, dir_fd=fd)
            finally:
                os.close(fd)

    def spawn_task(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A task the service owns: shutdown waits for it (or cancels it)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- environment --------------------------------------------------------------------------

    def _env_changed(self, env: dict[str, str]) -> None:
        self._env_version += 1
        self.pinned_script = _pinned_script(env)

    def agent_env(self) -> dict[str, str]:
        """The environment of the agent's shells: the daemon's, without its secrets, with the
        git configuration every git they run gets (exec_daemon/kernel/git.py)."""
        env = without_secrets(self.daemon.env.snapshot())
        return env | agent_git_environment(env)

    def env_script(self, session: ShellSession) -> str:
        """bash code that brings the session up to the daemon's current environment."""
        if self._session_env_version.get(session.shell_id, 0) == self._env_version:
            return ""
        # spawn() drops the daemon's secrets; so does this script, whatever the update named.
        current = self.agent_env()
        script = env_diff_script(session.exported, current)
        session.exported = current
        self._session_env_version[session.shell_id] = self._env_version
        return script

    # -- sessions -----------------------------------------------------------------------------

    async def acquire_session(self, agent_id: str, confinement: Confinement) -> ShellSession | None:
        """The agent's session, started if needed and marked busy; None while it is busy (or
        being started by another call): the caller then runs a shell beside it."""
        key = (agent_id, confinement.key)
        session = self._sessions.get(key)
        if session is not None and not session.ended:
            if session.busy:
                return None
            session.busy = True
            session.last_used = time.monotonic()
            return session
        if key in self._starting:
            return None
        self._starting.add(key)
        try:
            fresh = await self._start_session(agent_id, confinement, previous=session)
        finally:
            self._starting.discard(key)
        fresh.busy = True
        self._sessions[key] = fresh
        self._spawned_sids.add(fresh.pid)
        self._session_env_version[fresh.shell_id] = self._env_version
        if session is not None:
            self.spawn_task(asyncio.to_thread(shutil.rmtree, session.directory, True))
        self._limit_sessions()
        return fresh

    def _live_sessions(self) -> int:
        # On the exporter's thread: a tuple of the values is taken at once, under the GIL.
        return sum(not session.ended for session in tuple(self._sessions.values()))

    def _limit_sessions(self) -> None:
        """Closes the least recently used idle sessions beyond MAX_LIVE_SESSIONS (their state
        is kept: their next call restarts where they were), and forgets the oldest ended ones
        beyond MAX_KNOWN_SESSIONS."""
        live = [session for session in self._sessions.values() if not session.ended]
        idle = sorted((s for s in live if not s.busy), key=lambda session: session.last_used)
        for session in idle[: max(0, len(live) - MAX_LIVE_SESSIONS)]:
            session.ended = True
            self.spawn_task(session.close())
        if len(self._sessions) > MAX_KNOWN_SESSIONS:
            ended = sorted(
                ((key, s) for key, s in self._sessions.items() if s.ended),
                key=lambda item: item[1].last_used,
            )
            for key, session in ended[: len(self._sessions) - MAX_KNOWN_SESSIONS]:
                del self._sessions[key]
                self.spawn_task(asyncio.to_thread(shutil.rmtree, session.directory, True))

    async def _start_session(
        self, agent_id: str, confinement: Confinement, previous: ShellSession | None
    ) -> ShellSession:
        """A new session, where `previous` (ended) was and with its state, else in the
        workspace. An rc file that keeps bash from starting is skipped (and, after repeated
        failures, no longer tried)."""
        cwd = self.daemon.workspace
        restore = None
        if previous is not None:
            cwd = _existing_directory(previous.cwd) or cwd
            restore = previous.latest_state()
        env = self.agent_env()
        rc_file = _rc_file(env)
        degraded = ""
        if rc_file and self._rc_file_failures >= RC_FILE_ATTEMPTS:
            degraded = (
                f"this shell started without {rc_file}: it kept bash from starting "
                f"{self._rc_file_failures} times in a row, so it is no longer sourced"
            )
            rc_file = ""
        while True:
            shell_id = self.next_id()
            session = ShellSession(
                shell_id, agent_id, self.runtime_dir / f"session-{shell_id}", confinement
            )
            try:
                async with self._start_slots:
                    await session.start(cwd, self.daemon.workspace, env, rc_file, restore)
            except SessionStartError as exc:
                if not rc_file:
                    raise
                self._rc_file_failures += 1
                log.warning("the shell did not start with %s; starting it without", rc_file)
                degraded = f"this shell started without {rc_file}: with it, {exc}"
                rc_file = ""
                continue
            if rc_file:
                self._rc_file_failures = 0
            session.degraded_note = degraded
            return session

    def release_session(self, session: ShellSession) -> None:
        session.busy = False

    def session_of(self, agent_id: str, confinement: Confinement) -> ShellSession | None:
        return self._sessions.get((agent_id, confinement.key))

    def find_session(self, shell_id: int) -> ShellSession | None:
        for session in self._sessions.values():
            if session.shell_id == shell_id:
                return session
        return None

    # -- one-shot shells ----------------------------------------------------------------------

    async def start_one_shot(
        self,
        *,
        agent_id: str,
        command: str,
        working_directory: str,
        confinement: Confinement,
        sink: Sink,
        background: bool = False,
        interactive: bool = False,
        command_env: str = "",
    ) -> ShellJob:
        """Starts a shell beside the agent's session, from the session's state; `command_env`
        (bash code: the call's own variables) runs after the pinned variables."""
        shell_id = self.next_id()
        session = self.session_of(agent_id, confinement)
        state_copy = await self._copy_state(session, shell_id)
        cwd = (
            working_directory
            or (session.cwd if session is not None else "")
            or self.daemon.workspace
        )
        env = self.agent_env()
        if state_copy is not None:
            # The state re-exports every variable the session had (and not those it unset).
            env = {name: env[name] for name in ("PATH", "HOME") if name in env}
        log_path = meta_path = None
        if background or interactive:
            log_path = self.terminals_folder / f"shell-{shell_id}.log"
            meta_path = self.terminals_folder / f"shell-{shell_id}.json"
            self.terminals_folder.mkdir(parents=True, exist_ok=True)
        spec = OneShotSpec(
            shell_id=shell_id,
            agent_id=agent_id,
            command=command,
            cwd=cwd,
            env=env,
            state_file=state_copy,
            scratch_dir=self.runtime_dir,
            confinement=confinement,
            background=background,
            interactive=interactive,
            log_path=log_path,
            meta_path=meta_path if background else None,
            pinned=self.pinned_script + command_env,
        )
        try:
            job = await start_one_shot(spec, sink)
        except BaseException:
            if state_copy is not None:
                state_copy.unlink(missing_ok=True)
            raise
        if state_copy is not None:
            job.temp_files.append(state_copy)
        self.jobs[shell_id] = job
        self._spawned_sids.add(job.pid)
        self.spawn_task(self._watch(job))
        return job

    async def _copy_state(self, session: ShellSession | None, shell_id: int) -> Path | None:
        """A private copy of the session's latest state (the session rewrites its own)."""
        source = await session.settled_state() if session is not None else None
        if source is None:
            return None
        target = self.runtime_dir / f"state-{shell_id}"
        try:
            target.write_bytes(source.read_bytes())
        except OSError:
            return None
        return target

    async def _watch(self, job: ShellJob) -> None:
        await job.watch()
        self._ended_jobs.append(job.shell_id)
        while len(self._ended_jobs) > KEEP_ENDED_JOBS:
            old = self.jobs.pop(self._ended_jobs.pop(0), None)
            if old is not None:
                old.close_readers()
        if len(self._spawned_sids) > 4 * KEEP_ENDED_JOBS:
            self._forget_dead_sessions()

    def _forget_dead_sessions(self) -> None:
        alive = {info.sid for info in all_processes() if info.alive}
        self._spawned_sids &= alive

    # -- shutdown -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Ends every shell, job and process they started (SIGTERM, then SIGKILL)."""
        self.closing = True
        sids = set(self._spawned_sids)
        sids |= {session.pid for session in self._sessions.values() if session.pid}
        sids |= {job.pid for job in self.jobs.values()}
        await terminate_sessions(sids, SHUTDOWN_GRACE_SECONDS)
        # What left its session (setsid, double fork), background calls' included.
        await terminate_selected(marked_by_this_daemon(), SHUTDOWN_GRACE_SECONDS)
        for session in self._sessions.values():
            await session.close(grace=0)
        for job in self.jobs.values():
            job.close_stdin()
            job.close_readers()
        tasks = list(self._tasks)
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=0.5)
            for task in pending:
                task.cancel()
        shutil.rmtree(self.runtime_dir, ignore_errors=True)


def _pinned_script(env: dict[str, str]) -> str:
    """bash code that sets the agent shells' git configuration again before every command: an
    earlier command (one a person approved, or one in run_everything) may have unset or
    changed it, or exported git's own `-c` variable, which is read after it."""
    exports = "".join(
        f"builtin export {name}={shlex.quote(value)};"
        for name, value in agent_git_environment(without_secrets(env)).items()
    )
    return f"builtin unset GIT_CONFIG_PARAMETERS;{exports}"


def _highest_shell_id(folder: Path) -> int:
    highest = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            match = SHELL_FILE.fullmatch(entry.name)
            if match is not None:
                highest = max(highest, int(match.group(1)))
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder / "shell-output"):
            match = SPILL_FILE.match(entry.name)
            if match is not None:
                highest = max(highest, int(match.group(1)))
    return highest


def _rc_file(env: dict[str, str]) -> str:
    home = env.get("HOME", "")
    candidate = os.path.join(home, ".bashrc") if home else ""
    return candidate if candidate and os.path.isfile(candidate) else ""


def _existing_directory(path: str) -> str:
    return path if path and os.path.isdir(path) else ""
