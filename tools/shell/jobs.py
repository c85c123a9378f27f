"""One-shot shells: a second call while the session is busy, interactive calls, background jobs.

Each is `bash -c` started from the session's state (exported variables, functions, aliases,
working directory), in its own process session. A background job writes its output straight to
`<terminals_folder>/shell-<id>.log` (so nothing is lost while nobody listens), described by
`shell-<id>.json` (command, pid, cwd, start, and the exit code once it ended); its stdin stays
open for write_shell_stdin_tool_call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from exec_daemon.kernel.call_marks import CALL_MARK_VARIABLE, marked, new_call_mark
from exec_daemon.kernel.processes import (
    DEFAULT_GRACE_SECONDS,
    Child,
    Confinement,
    SpawnSpec,
    close_fds,
    open_pipe,
    spawn,
    terminate_selected,
    terminate_sessions,
)
from tools.shell.bash_scripts import ONE_SHOT_MAIN
from tools.shell.pipes import PipeReader
from tools.shell.session import ExitStatus, Sink, status_from_returncode

log = logging.getLogger(__name__)

# Commands longer than this are passed in a file, not in argv (Linux caps one argument).
ARGV_COMMAND_BYTES = 64 * 1024


def _discard(_stream: str, _data: bytes) -> None:
    return None


@dataclass
class ShellJob:
    shell_id: int
    agent_id: str
    command: str
    cwd: str
    child: Child
    background: bool
    stdin_fd: int | None = None
    log_path: Path | None = None
    meta_path: Path | None = None
    started_at: float = field(default_factory=time.time)
    status: ExitStatus | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    readers: list[PipeReader] = field(default_factory=list)
    temp_files: list[Path] = field(default_factory=list)
    sink: Sink = _discard
    done: asyncio.Future[ExitStatus] | None = None
    # A foreground interactive shell copies its output here, for await_tool_call.
    log_fd: int | None = None
    # In the environment of everything it starts (exec_daemon/kernel/call_marks.py).
    mark: str = ""

    @property
    def pid(self) -> int:
        return self.child.pid

    @property
    def running(self) -> bool:
        return self.status is None

    # -- stdin --------------------------------------------------------------------------------

    def close_stdin(self) -> None:
        close_fds(self.stdin_fd)
        self.stdin_fd = None

    # -- foreground output ----------------------------------------------------------------------

    def pause_output(self) -> None:
        for reader in self.readers:
            reader.pause()

    def resume_output(self) -> None:
        for reader in self.readers:
            reader.resume()

    def _route(self, stream: str, data: bytes) -> None:
        self.sink(stream, data)
        if self.log_fd is not None:
            try:
                os.write(self.log_fd, data)
            except OSError:
                log.warning("shell %d: cannot append to %s", self.shell_id, self.log_path)
                self._close_log()

    def _close_log(self) -> None:
        close_fds(self.log_fd)
        self.log_fd = None

    # -- ending -------------------------------------------------------------------------------

    async def watch(self) -> None:
        """Waits for the shell to exit and records how."""
        returncode = await self.child.wait()
        for reader in self.readers:
            reader.drain()
        # Output that grandchildren (`cmd &`) write later belongs to no call; their pipes are
        # read (and dropped) until they close, so they never block on a full pipe.
        self.sink = _discard
        self._close_log()
        self.status = status_from_returncode(returncode, self.cwd)
        self.close_stdin()
        self.ended.set()
        if self.done is not None and not self.done.done():
            self.done.set_result(self.status)
        self.write_meta()
        for path in self.temp_files:
            with contextlib.suppress(OSError):
                path.unlink()

    async def interrupt(self, grace: float = DEFAULT_GRACE_SECONDS) -> None:
        """Ends the shell, everything in its process session and what left the session (setsid,
        double fork) but carries its mark."""
        await terminate_sessions({self.child.pid}, grace)
        if self.mark:
            await terminate_selected(marked(self.mark, since_ticks=self.child.started_ticks), grace)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.ended.wait(), 2.0)

    def close_readers(self) -> None:
        for reader in self.readers:
            reader.close()

    def write_meta(self) -> None:
        if self.meta_path is None:
            return
        meta = {
            "shell_id": self.shell_id,
            "pid": self.pid,
            "command": self.command,
            "cwd": self.cwd,
            "agent_id": self.agent_id,
            "started_at": self.started_at,
            "output_file": str(self.log_path or ""),
            "running": self.running,
            "exit_code": None if self.status is None else self.status.exit_code,
            "signal": "" if self.status is None else self.status.signal,
        }
        try:
            self.meta_path.write_text(json.dumps(meta, indent=1) + "\n")
        except OSError:
            log.warning("shell %d: cannot write %s", self.shell_id, self.meta_path)


@dataclass(frozen=True)
class OneShotSpec:
    shell_id: int
    agent_id: str
    command: str
    cwd: str
    env: Mapping[str, str]
    state_file: Path | None
    scratch_dir: Path
    confinement: Confinement
    background: bool = False
    interactive: bool = False
    log_path: Path | None = None
    meta_path: Path | None = None
    # bash code run after the state is restored (ShellService.pinned_script).
    pinned: str = ""


async def start_one_shot(spec: OneShotSpec, sink: Sink) -> ShellJob:
    """Starts a one-shot shell. Foreground ones stream to `sink`; background ones write to
    `spec.log_path`. Raises OSError when it cannot be started."""
    temp_files: list[Path] = []
    command_arg, command_file = spec.command, ""
    if len(spec.command.encode()) > ARGV_COMMAND_BYTES:
        path = spec.scratch_dir / f"command-{spec.shell_id}"
        await asyncio.to_thread(path.write_bytes, spec.command.encode() + b"\0")
        temp_files.append(path)
        command_arg, command_file = "", str(path)
    mark = new_call_mark()
    parent_fds: list[int] = []
    child_fds: list[int] = []
    stdin_w: int | None = None
    stdin_r: int | None = None
    if spec.background or spec.interactive:
        stdin_r, stdin_w = open_pipe(64 * 1024)
        child_fds.append(stdin_r)
    if spec.background:
        assert spec.log_path is not None
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        out_fd = os.open(
            spec.log_path,
            # A fresh file: never an earlier daemon's log appended to, nor a planted link.
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
        )
        stdout_w = stderr_w = out_fd
        child_fds.append(out_fd)
    else:
        stdout_r, stdout_w = open_pipe()
        stderr_r, stderr_w = open_pipe()
        parent_fds += [stdout_r, stderr_r]
        child_fds += [stdout_w, stderr_w]
    process_spec = SpawnSpec(
        argv=(
            "bash", "--noprofile", "--norc", "-c", ONE_SHOT_MAIN, "bash",
            str(spec.state_file or ""), spec.cwd, command_arg, command_file, spec.pinned,
        ),
        cwd=spec.cwd,
        env={**spec.env, CALL_MARK_VARIABLE: mark},
        stdin=stdin_r,
        stdout=stdout_w,
        stderr=stderr_w,
    )  # fmt: skip
    try:
        child = await spawn(process_spec, spec.confinement)
    except BaseException:
        close_fds(*parent_fds, stdin_w)
        for path in temp_files:
            path.unlink(missing_ok=True)
        raise
    finally:
        close_fds(*child_fds)
    if stdin_w is not None:
        os.set_blocking(stdin_w, False)
    job = ShellJob(
        shell_id=spec.shell_id,
        agent_id=spec.agent_id,
        command=spec.command,
        cwd=spec.cwd,
        child=child,
        background=spec.background,
        stdin_fd=stdin_w,
        log_path=spec.log_path,
        meta_path=spec.meta_path,
        temp_files=temp_files,
        sink=sink,
        mark=mark,
    )
    if not spec.background:
        if spec.log_path is not None:
            with contextlib.suppress(OSError):
                job.log_fd = os.open(
                    spec.log_path,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o644,
                )
        job.done = asyncio.get_running_loop().create_future()
        job.readers = [
            PipeReader(parent_fds[0], lambda data: job._route("stdout", data)),
            PipeReader(parent_fds[1], lambda data: job._route("stderr", data)),
        ]
    job.write_meta()
    return job
