"""A persistent bash session per agent: the daemon side of the protocol in bash_scripts.py."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import re
import shlex
import signal
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exec_daemon.kernel.call_marks import (
    CALL_MARK_VARIABLE,
    marked,
    new_call_mark,
    with_daemon_mark,
)
from exec_daemon.kernel.processes import (
    DEFAULT_GRACE_SECONDS,
    Child,
    Confinement,
    ProcInfo,
    Selector,
    SpawnSpec,
    boot_ticks_now,
    close_fds,
    in_sessions,
    open_pipe,
    signal_selected,
    spawn,
    terminate_sessions,
)
from tools.shell.bash_scripts import SESSION_MAIN
from tools.shell.pipes import PipeReader, write_all

log = logging.getLogger(__name__)

Sink = Callable[[str, bytes], None]

# Commands longer than this go through a file (bash reads a pipe one byte at a time).
INLINE_COMMAND_BYTES = 4096
STARTUP_SECONDS = 10.0
_ENV_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


class SessionStartError(Exception):
    """The session bash could not be started (the reason is safe to show)."""


@dataclass(frozen=True)
class ExitStatus:
    """How a command ended."""

    exit_code: int
    signal: str = ""
    cwd: str = ""
    # The shell itself ended (exit, set -e, killed): its next call starts a fresh one.
    shell_ended: bool = False


def status_from_returncode(returncode: int, cwd: str = "", shell_ended: bool = False) -> ExitStatus:
    """asyncio's returncode (negative = killed by that signal) as an ExitStatus."""
    if returncode < 0:
        return ExitStatus(128 - returncode, signal_name(-returncode), cwd, shell_ended)
    return ExitStatus(returncode, "", cwd, shell_ended)


def status_from_shell(code: int, cwd: str) -> ExitStatus:
    """A shell's `$?`: above 128 means the command was killed by signal `code - 128`."""
    name = signal_name(code - 128) if 128 < code < 128 + 65 else ""
    return ExitStatus(code, name, cwd)


def os_reason(exc: OSError) -> str:
    """What went wrong, for a user (e.g. "No such file or directory" or the sandbox's reason)."""
    return exc.strerror or str(exc)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def _either(first: Selector, second: Selector) -> Selector:
    def select(info: ProcInfo) -> bool:
        return first(info) or second(info)

    return select


_detached: set[asyncio.Task[Any]] = set()


def _detach(coro: Coroutine[Any, Any, Any]) -> None:
    """Runs `coro` to its end without an owner (the loop itself only keeps weak references)."""
    task = asyncio.get_running_loop().create_task(coro)
    _detached.add(task)
    task.add_done_callback(_detached.discard)


def _high_fds(pipe: tuple[int, int], read_end: bool) -> tuple[int, int]:
    """The pipe, with the end bash gets moved to an fd >= 100: bash dups it onto COMMAND_FD /
    STATUS_FD and closes the original, which must therefore never be one of those."""
    read_fd, write_fd = pipe
    low = read_fd if read_end else write_fd
    high = fcntl.fcntl(low, fcntl.F_DUPFD_CLOEXEC, 100)
    os.close(low)
    return (high, write_fd) if read_end else (read_fd, high)


# What a sibling shell inherits (exported variables, functions, aliases, the directory) can only
# change through these shell words, an assignment or a function definition; commands naming
# none of them (`git status`, `pytest -q`, `true`) skip saving the state (~0.15 ms of bash).
_STATE_CHANGING = re.compile(
    r"\b(export|declare|typeset|readonly|local|unset|alias|unalias|source|eval|exec|cd|pushd"
    r"|popd|set|shopt|read|readarray|mapfile|printf|getopts|function|enable|hash|trap|umask"
    r"|builtin|command)\b|=|\(\s*\)|(^|[\s;&|(])\.\s"
)


def may_change_state(command: str) -> bool:
    return _STATE_CHANGING.search(command) is not None


def valid_env_name(name: str) -> bool:
    return bool(name) and not name[0].isdigit() and set(name) <= _ENV_NAME_CHARS


def command_env_script(env: Mapping[str, str]) -> str:
    """bash code exporting a call's own variables (names already checked: valid_env_name)."""
    return "".join(f"builtin export {name}={shlex.quote(value)};" for name, value in env.items())


def env_diff_script(old: Mapping[str, str], new: Mapping[str, str]) -> str:
    """bash code that turns the exported environment `old` into `new`."""
    lines = [
        f"builtin export {name}={shlex.quote(value)};"
        for name, value in new.items()
        if old.get(name) != value and valid_env_name(name)
    ]
    lines += [f"builtin unset {name};" for name in old if name not in new and valid_env_name(name)]
    return "".join(lines)


@dataclass
class _Running:
    seq: int
    sink: Sink
    done: asyncio.Future[ExitStatus]
    started_ticks: int
    mark: str


class ShellSession:
    """One long-lived `bash` that runs an agent's commands one at a time, keeping its state."""

    def __init__(
        self,
        shell_id: int,
        agent_id: str,
        directory: Path,
        confinement: Confinement,
    ) -> None:
        self.shell_id = shell_id
        self.agent_id = agent_id
        self.directory = directory
        self._confinement = confinement
        self.child: Child | None = None
        self.cwd = ""
        self.exported: dict[str, str] = {}
        self._seq = 0
        # The state is saved after commands that may change it (see may_change_state).
        self._awaited_dump_seq = 0
        self._dumped_seq = -1
        self._state_file: Path | None = None
        self._dumped = asyncio.Event()
        self._running: _Running | None = None
        self._command_fd: int | None = None
        self._readers: list[PipeReader] = []
        self._status_reader: PipeReader | None = None
        self._status_buffer = b""
        self._ready: asyncio.Future[None] | None = None
        self._startup_output = bytearray()
        self.ended = False
        # Set while a call holds the session (including the time its command is being sent).
        self.busy = False
        self.last_used = time.monotonic()
        # Why this shell is not the one configured (e.g. started without the rc file), or "".
        self.degraded_note = ""

    @property
    def pid(self) -> int:
        return self.child.pid if self.child is not None else 0

    # -- start and stop -----------------------------------------------------------------------

    async def start(
        self, cwd: str, home: str, env: Mapping[str, str], rc_file: str, restore: Path | None
    ) -> None:
        """Starts bash in `cwd` (`home` if that directory vanishes later), after `rc_file`
        and the state in `restore`. The loop file SESSION_LOOP must be in directory/.."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            (self.directory / "state.exit").unlink()
        command_r, command_w = _high_fds(open_pipe(64 * 1024), read_end=True)
        status_r, status_w = _high_fds(open_pipe(64 * 1024), read_end=False)
        stdout_r, stdout_w = open_pipe()
        stderr_r, stderr_w = open_pipe()
        spec = SpawnSpec(
            argv=(
                "bash", "--noprofile", "--norc", "-c", SESSION_MAIN, "bash",
                str(command_r), str(status_w), str(self.directory), home,
                rc_file, str(restore or ""),
            ),
            cwd=cwd,
            # Found by the next daemon should this one be killed (exec_daemon/kernel/leftovers.py).
            env=with_daemon_mark(env),
            stdout=stdout_w,
            stderr=stderr_w,
            pass_fds=(command_r, status_w),
            writable=(str(self.directory),),
        )  # fmt: skip
        try:
            self.child = await spawn(spec, self._confinement)
        except BaseException as exc:
            close_fds(command_w, status_r, stdout_r, stderr_r)
            if isinstance(exc, OSError):
                raise SessionStartError(f"bash could not be started: {os_reason(exc)}") from exc
            raise
        finally:
            close_fds(command_r, status_w, stdout_w, stderr_w)
        self.cwd = cwd
        self.exported = dict(env)
        self._command_fd = command_w
        os.set_blocking(command_w, False)
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._readers = [
            PipeReader(stdout_r, lambda data: self._route("stdout", data)),
            PipeReader(stderr_r, lambda data: self._route("stderr", data)),
        ]
        self._status_reader = PipeReader(status_r, self._on_status, self._on_status_eof)
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), STARTUP_SECONDS)
        except (TimeoutError, SessionStartError) as exc:
            await self.close(grace=0.2)
            log.warning(
                "shell %d did not start (%s); its output: %r",
                self.shell_id,
                "timed out" if isinstance(exc, TimeoutError) else exc,
                bytes(self._startup_output[-2000:]),
            )
            if isinstance(exc, TimeoutError):
                raise SessionStartError(
                    f"bash did not start within {STARTUP_SECONDS:g} s (its rc file may hang, or "
                    "the machine is loaded)"
                ) from None
            raise SessionStartError(f"{exc} (its rc file may exit)") from None
        except BaseException:
            # Cancelled (the call was aborted) while bash started: nobody will own this shell.
            _detach(self.close(grace=0.2))
            raise
        self._startup_output.clear()

    async def close(self, grace: float = DEFAULT_GRACE_SECONDS) -> None:
        """Ends the session bash and everything it started."""
        if self.child is not None:
            await terminate_sessions({self.child.pid}, grace)
            with contextlib.suppress(ProcessLookupError, TimeoutError):
                await asyncio.wait_for(self.child.wait(), 1.0)
        self._mark_ended()
        self._close_pipes()

    def _close_pipes(self) -> None:
        close_fds(self._command_fd)
        self._command_fd = None
        for reader in self._readers:
            reader.close()
        if self._status_reader is not None:
            self._status_reader.close()

    # -- running a command --------------------------------------------------------------------

    async def submit(
        self,
        command: str,
        working_directory: str,
        sink: Sink,
        env_script: str,
        pinned: str = "",
        command_env: str = "",
    ) -> asyncio.Future[ExitStatus]:
        """Sends `command` to the session; the future resolves once it ended and its output
        went to `sink` (stream name, bytes). `pinned`: bash code run before every command
        (variables the daemon sets again whatever an earlier command did to them).
        `command_env`: bash code setting the call's own variables (command_env_script); the
        command then runs in a subshell holding them, so the session never sees them."""
        assert self._command_fd is not None and self._running is None and not self.ended
        self._seq += 1
        mark = new_call_mark()
        header = f"__ed_seq={self._seq};builtin export {CALL_MARK_VARIABLE}={mark};{env_script}"
        if env_script or may_change_state(command):
            self._awaited_dump_seq = self._seq
            self._dumped.clear()
        else:
            header += "__ed_nodump=1;"
        header += pinned
        if working_directory:
            header += f"__ed_wd={shlex.quote(working_directory)};"
        if command_env:
            header += f"__ed_env={shlex.quote(command_env)};"
        body = command.encode()
        if len(body) > INLINE_COMMAND_BYTES:
            command_file = self.directory / f"command.{self._seq % 2}"
            await asyncio.to_thread(command_file.write_bytes, body + b"\0")
            header += f"__ed_file={shlex.quote(str(command_file))};"
            body = b""
        done: asyncio.Future[ExitStatus] = asyncio.get_running_loop().create_future()
        self._running = _Running(self._seq, sink, done, boot_ticks_now(), mark)
        request = header.encode() + b"\0" + body + b"\0"
        try:
            sent = await write_all(self._command_fd, request, STARTUP_SECONDS)
        except OSError:
            sent = -1
        except BaseException:
            # Cancelled half-way through the request: the shell is out of step, end it.
            _detach(self.close(grace=0.2))
            raise
        if sent != len(request):
            # The shell is gone or stuck; the status pipe's end tells how it ended.
            log.warning("shell %d did not take its command; ending it", self.shell_id)
            _detach(self.close(grace=0.2))
        return done

    def _route(self, stream: str, data: bytes) -> None:
        running = self._running
        if running is not None:
            running.sink(stream, data)
        elif self._ready is not None and not self._ready.done():
            # Kept to explain a start that fails (bash's own error messages).
            self._startup_output += data[:4096]
        # Output of a command's own background jobs between calls belongs to no call.

    def pause_output(self) -> None:
        for reader in self._readers:
            reader.pause()

    def resume_output(self) -> None:
        for reader in self._readers:
            reader.resume()

    def _finish(self, status: ExitStatus) -> None:
        running = self._running
        if running is None:
            return
        # The command's output is in the pipes before its status record: collect it first.
        for reader in self._readers:
            reader.drain()
        self._running = None
        if not running.done.done():
            running.done.set_result(status)

    # -- the status pipe ----------------------------------------------------------------------

    def _on_status(self, data: bytes) -> None:
        self._status_buffer += data
        fields = self._status_buffer.split(b"\0")
        self._status_buffer = fields.pop()
        index = 0
        while index < len(fields):
            kind = fields[index]
            width = {b"R": 1, b"S": 4, b"D": 3}.get(kind)
            if width is None:
                log.error("shell %d: unexpected status record %r", self.shell_id, kind[:40])
                index += 1
                continue
            record = fields[index : index + width]
            if len(record) < width:
                # Incomplete record: keep it for the next read.
                self._status_buffer = b"\0".join([*record, self._status_buffer])
                return
            self._on_record(record)
            index += width

    def _on_record(self, record: list[bytes]) -> None:
        kind = record[0]
        if kind == b"R":
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(None)
        elif kind == b"S":
            seq, code, cwd = int(record[1]), int(record[2]), os.fsdecode(record[3])
            self.cwd = cwd or self.cwd
            if self._running is not None and self._running.seq == seq:
                self._finish(status_from_shell(code, self.cwd))
        elif kind == b"D":
            self._dumped_seq = int(record[1])
            self._state_file = Path(os.fsdecode(record[2]))
            if self._dumped_seq >= self._awaited_dump_seq:
                self._dumped.set()

    def _on_status_eof(self) -> None:
        """The session bash ended (exit, set -e, a signal, or we closed it)."""
        _detach(self._after_end())

    async def _after_end(self) -> None:
        returncode = 0
        if self.child is not None:
            # `exec cmd` replaces the shell and closes the status pipe: cmd then runs until it
            # ends, under the running call's timeout; with no call running it gets 5 s.
            limit = None if self._running is not None else 5.0
            try:
                returncode = await asyncio.wait_for(self.child.wait(), limit)
            except TimeoutError:
                await terminate_sessions({self.child.pid}, 0.2)
                returncode = await self.child.wait()
        self._mark_ended()
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(
                SessionStartError(f"bash ended while starting (exit status {returncode})")
            )
            self._ready.exception()
        self._finish(status_from_returncode(returncode, self.cwd, shell_ended=True))
        self._close_pipes()

    def _mark_ended(self) -> None:
        self.ended = True

    # -- interrupting -------------------------------------------------------------------------

    async def interrupt(self, grace: float = DEFAULT_GRACE_SECONDS) -> None:
        """Ends the running command, not the session: its processes get SIGTERM (SIGKILL after
        `grace`) and the shell abandons the rest of the command. A shell that does not come
        back (it ignores the signal) is ended; its next call starts a fresh one."""
        running = self._running
        if running is None or self.child is None:
            return
        pid = self.child.pid
        # The command's processes: those of the session started since it began (to the clock
        # tick, 10 ms), so what earlier calls left running (`server &`) is spared.
        select = in_sessions({pid}, spare={pid}, since_ticks=running.started_ticks)
        # And what left the session (setsid, double fork) but still carries the call's mark.
        select = _either(select, marked(running.mark, since_ticks=running.started_ticks))
        escaped = self._confinement.command_processes(pid, running.started_ticks)
        if escaped is not None:
            # In a sandbox: also what left the session with setsid (its own PID namespace).
            select = _either(select, escaped)
        start = time.monotonic()
        terminated: set[tuple[int, int]] = set()
        while not running.done.done():
            elapsed = time.monotonic() - start
            if elapsed > grace + 1.0:
                log.warning("shell %d ignored the interrupt; ending it", self.shell_id)
                await self.close(grace=0.2)
                break
            # First the shell (the trap runs as soon as its foreground child is gone), then
            # the processes, again each round: the shell may have started new ones meanwhile.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)
            if elapsed > grace:
                signal_selected(select, signal.SIGKILL)
            else:
                signal_selected(select, signal.SIGTERM, terminated)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(running.done), 0.05)
        # Processes the command started and left behind (e.g. `sleep 100 &`) end with it.
        if signal_selected(select, signal.SIGTERM):
            await asyncio.sleep(0.05)
            signal_selected(select, signal.SIGKILL)

    # -- state for sibling shells -------------------------------------------------------------

    async def settled_state(self, wait_seconds: float = 2.0) -> Path | None:
        """The latest state, once the shell wrote it (right after its last status record)."""
        if not self.ended and self._dumped_seq < self._awaited_dump_seq:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._dumped.wait(), wait_seconds)
        return self.latest_state()

    def latest_state(self) -> Path | None:
        """The file holding the session's state after its latest complete save."""
        exit_state = self.directory / "state.exit"
        if self.ended and exit_state.exists():
            return exit_state
        return self._state_file
