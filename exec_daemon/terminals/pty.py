"""PTY terminals the daemon keeps alive for people and for the agent.

A `Terminal` is one child process on a real pseudo-terminal (`ptyprocess`). Its master fd is
non-blocking and driven by the event loop (`loop.add_reader` / `add_writer`), so neither a flood
of output nor a large paste ever blocks the loop. Output goes to:

- a bounded `Scrollback` ring addressed by absolute byte offsets, from which every attached
  client reads at its own pace (`Attachment`);
- an append-only file `terminal-<id>.log` in the terminals folder, so the agent's Read and Grep
  tools see what a terminal printed.

A terminal outlives its clients; output written while nobody listens stays in the ring and the
file. Flow control works like a real terminal's: when an attached client lags by more than
PAUSE_LAG_BYTES the PTY is not read (the program blocks on its writes) until every client is
back under RESUME_LAG_BYTES, so a client that is merely slower than the program loses nothing.
A client that keeps the terminal paused for SLOW_CLIENT_GRACE_SECONDS stops counting: the others
go on at full speed, and once the ring drops bytes it has not read it is told so
(`ClientTooSlow`). Memory stays bounded by the ring either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pwd
import secrets
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptyprocess import PtyProcess

from exec_daemon.kernel.call_marks import with_daemon_mark
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.metering import Meter, Metric
from exec_daemon.kernel.secrets import without_secrets
from exec_daemon.kernel.state import Daemon

log = logging.getLogger(__name__)

SCROLLBACK_BYTES = 1 << 20
PAUSE_LAG_BYTES = 512 * 1024
RESUME_LAG_BYTES = 128 * 1024
SLOW_CLIENT_GRACE_SECONDS = 2.0
# One wakeup of the reader drains at most this much, so other connections get their turn;
# PAUSE_LAG_BYTES + this stays under SCROLLBACK_BYTES, so flow control loses no byte.
MAX_READ_PER_WAKEUP = 256 * 1024
READ_CHUNK = 1 << 16
# Input beyond this much not yet taken by the PTY makes writers wait (`drain`).
WRITE_HIGH_WATER = 1 << 20
# Terminal output not yet on disk beyond this much is dropped (and the file says so).
FILE_BACKLOG_LIMIT = 16 << 20
MAX_COLS = 1000
MAX_ROWS = 500
# Exited terminals stay listed (with their scrollback) until this many newer ones exited.
KEEP_EXITED = 32
KILL_GRACE_SECONDS = 1.0
MAX_NAME_CHARS = 200

SIGNALS = {
    name: getattr(signal, name)
    for name in (
        "SIGINT",
        "SIGTERM",
        "SIGKILL",
        "SIGHUP",
        "SIGQUIT",
        "SIGTSTP",
        "SIGCONT",
        "SIGUSR1",
        "SIGUSR2",
        "SIGWINCH",
    )
}
# Environment the daemon gives the agent's pipes but that makes no sense on a real terminal.
NOT_FOR_TERMINALS = ("NO_COLOR", "FORCE_COLOR")


def new_terminal_id() -> str:
    return secrets.token_hex(4)


class ClientTooSlow(Exception):
    """The client fell so far behind that the scrollback no longer holds its next bytes."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"client fell behind the scrollback at offset {offset}")
        self.offset = offset


def validate_size(cols: int, rows: int) -> None:
    if not (1 <= cols <= MAX_COLS and 1 <= rows <= MAX_ROWS):
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT,
            f"terminal size must be 1..{MAX_COLS} cols by 1..{MAX_ROWS} rows, got {cols}x{rows}",
        )


def signal_number(name: str) -> int:
    canonical = name.upper() if name.upper().startswith("SIG") else f"SIG{name.upper()}"
    number = SIGNALS.get(canonical)
    if number is None:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT, f"unknown signal {name!r}; one of {', '.join(SIGNALS)}"
        )
    return number


def login_shell() -> str:
    """The user's login shell from the password database, else bash."""
    with contextlib.suppress(KeyError):
        shell = pwd.getpwuid(os.getuid()).pw_shell
        if shell and os.access(shell, os.X_OK):
            return shell
    return shutil.which("bash") or "/bin/sh"


def exit_code_of(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128 + the signal number."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _restore_signals() -> None:
    # Python ignores SIGPIPE and SIGXFSZ, and a daemon started in the background by a script
    # inherits SIGINT and SIGQUIT ignored; a forked child would keep that through exec (and
    # Ctrl-C would not reach the terminal's job).
    for signum in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_DFL)


def session_pids(session_id: int) -> list[int]:
    """Every live process whose session is `session_id` (the terminal leader's pid)."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # After "pid (comm)": state ppid pgrp session ...; a zombie (Z) is already dead.
        if int(fields[3]) == session_id and fields[0] != b"Z":
            pids.append(int(entry.name))
    return pids


class Scrollback:
    """The last `limit` bytes of output, addressed by absolute offsets since the start."""

    def __init__(self, limit: int = SCROLLBACK_BYTES) -> None:
        self.limit = limit
        self._data = bytearray()
        self._start = 0

    @property
    def start(self) -> int:
        """Absolute offset of the oldest byte still held."""
        return self._start

    @property
    def end(self) -> int:
        """Absolute offset of the next byte to be appended."""
        return self._start + len(self._data)

    def append(self, data: bytes) -> None:
        self._data += data
        # Trim only once a quarter over the limit: one memmove per many appends, not per chunk.
        if len(self._data) > self.limit + self.limit // 4:
            excess = len(self._data) - self.limit
            del self._data[:excess]
            self._start += excess

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Bytes from absolute `offset` (which must be within [start, end]), at most max_bytes."""
        begin = offset - self._start
        with memoryview(self._data) as view:  # one copy, not two
            return bytes(view[begin : begin + max_bytes])


class OutputFile:
    """Appends a terminal's output to its file off the event loop, in batches."""

    def __init__(self, path: Path, header: str) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
        )
        self._pending = bytearray(header.encode())
        self._dropped = 0
        self._flusher: asyncio.Task[None] | None = None
        self._flush_soon()

    def append(self, data: bytes) -> None:
        if len(self._pending) > FILE_BACKLOG_LIMIT:
            self._dropped += len(data)
            return
        self._pending += data
        self._flush_soon()

    def _flush_soon(self) -> None:
        if self._flusher is None and self._fd >= 0:
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        try:
            while self._pending or self._dropped:
                chunk = bytes(self._pending)
                self._pending.clear()
                if self._dropped:
                    chunk += (
                        f"\n[... {self._dropped} bytes not written: disk too slow ...]\n".encode()
                    )
                    self._dropped = 0
                await asyncio.to_thread(_write_all, self._fd, chunk)
        except OSError:
            log.exception("writing %s failed; its further output is not saved", self.path)
            self._pending.clear()
            self._dropped = 0
        finally:
            self._flusher = None

    async def aclose(self) -> None:
        while self._flusher is not None:
            await self._flusher
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Attachment:
    """One client's position in a terminal's output."""

    def __init__(self, terminal: Terminal, offset: int) -> None:
        self.terminal = terminal
        self.offset = offset
        self.overrun = False
        # Released: too slow for too long, so it no longer holds the terminal back.
        self.released = False
        self._wakeup = asyncio.Event()
        self.on_overrun: Callable[[], None] | None = None
        # The size this client's window offers (None: it takes whatever size the terminal has).
        self.size: tuple[int, int] | None = None
        # Told the terminal's size whenever it changes (size arbitration, a resize RPC).
        self.on_size: Callable[[int, int], None] | None = None

    def _notify(self) -> None:
        if self.offset < self.terminal.scrollback.start and not self.overrun:
            self.overrun = True
            if self.on_overrun is not None:
                self.on_overrun()
        self._wakeup.set()

    async def read(self, max_bytes: int) -> bytes:
        """The next output bytes; b"" once the terminal exited and everything was read.

        Raises ClientTooSlow when the bytes at this client's offset already left the ring.
        """
        scrollback = self.terminal.scrollback
        while True:
            if self.offset < scrollback.start:
                self.overrun = True
                raise ClientTooSlow(self.offset)
            if self.offset < scrollback.end:
                chunk = scrollback.read(self.offset, max_bytes)
                self.offset += len(chunk)
                if self.offset == scrollback.end:
                    self.released = False
                self.terminal._maybe_resume()
                return chunk
            if self.terminal.exit_code is not None:
                return b""
            self._wakeup.clear()
            await self._wakeup.wait()

    def _tell_size(self) -> None:
        if self.on_size is not None:
            self.on_size(self.terminal.cols, self.terminal.rows)

    def lag(self) -> int:
        return self.terminal.scrollback.end - self.offset

    def detach(self) -> None:
        self.terminal.attachments.discard(self)
        self.terminal._maybe_resume()
        self.terminal._arbitrate_size()


@dataclass(frozen=True)
class TerminalSpec:
    command: str | None
    cwd: str
    env: dict[str, str]
    cols: int
    rows: int
    name: str
    description: str = ""
    # False: the output is not written to terminal-<id>.log here (a shared terminal's tmux
    # client: its tmux session's raw output goes to that file instead).
    record: bool = True


class Terminal:
    """One process on a PTY, its scrollback, its file and its attached clients."""

    def __init__(self, terminal_id: str, spec: TerminalSpec, folder: Path) -> None:
        validate_size(spec.cols, spec.rows)
        self.id = terminal_id
        self.name = spec.name or terminal_id
        # Named by a person (rename): the page shows this name rather than the program's title.
        self.renamed = False
        self.description = spec.description
        self.command = spec.command or ""
        self.cwd = spec.cwd
        self.cols, self.rows = spec.cols, spec.rows
        self.log_path = folder / f"terminal-{terminal_id}.log"
        # A shared terminal's tmux session: how the agent reads and types into it.
        self.shared: dict[str, str] | None = None
        # Where the signals sent to this terminal go when it is not the PTY's foreground job
        # (a shared terminal's program runs in tmux, behind the client on this PTY).
        self.foreground_group: Callable[[], int | None] | None = None
        self.scrollback = Scrollback()
        # Told every chunk of output (the session record: exec_daemon/telemetry/session_record.py).
        self.on_output: Callable[[str, bytes], None] | None = None
        self.attachments: set[Attachment] = set()
        self.exit_code: int | None = None
        self.started_at = time.time()
        self._exited = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._pending_input = bytearray()
        self._input_drained = asyncio.Event()
        self._input_drained.set()
        self._writer_registered = False
        self._reading = False
        self._grace_timer: asyncio.TimerHandle | None = None

        shell = login_shell()
        argv = [shell, "-c", spec.command] if spec.command else [shell]
        try:
            self.process = PtyProcess.spawn(
                argv,
                cwd=spec.cwd,
                env=with_daemon_mark(spec.env),
                dimensions=(spec.rows, spec.cols),
                preexec_fn=_restore_signals,
            )
        except OSError as exc:
            raise CodedError(ErrorCode.SPAWN_FAILED, f"could not start {argv[0]}: {exc}") from exc
        self.pid: int = self.process.pid
        self.fd: int = self.process.fd
        try:
            os.set_blocking(self.fd, False)
            self.file: OutputFile | None = None
            if spec.record:
                self.file = OutputFile(self.log_path, self._file_header(spec.command or shell))
            self._pidfd = os.pidfd_open(self.pid)
        except OSError as exc:
            log.error("terminal %s: set-up failed: %s", terminal_id, exc)
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)  # SIGKILL: gone in a moment
            self.process.fileobj.close()
            self.process.closed = self.process.terminated = True
            raise CodedError(
                ErrorCode.IO_ERROR,
                f"could not set up the terminal file in {folder}: {exc.strerror}",
            ) from exc
        self._fd_open = True
        self._loop.add_reader(self._pidfd, self._on_process_exit)
        self._resume_reading()

    def _file_header(self, command: str) -> str:
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.started_at))
        return (
            f"# terminal {self.id} {self.name!r}: pid {self.pid}, cwd {self.cwd}, "
            f"started {started}\n# command: {command}\n"
        )

    # -- output ---------------------------------------------------------------------------------

    def _on_readable(self) -> None:
        received = bytearray()
        eof = False
        while len(received) < MAX_READ_PER_WAKEUP:
            try:
                chunk = os.read(self.fd, READ_CHUNK)
            except BlockingIOError:
                break
            except OSError:
                # EIO: every process holding the PTY's other side is gone.
                eof = True
                break
            if not chunk:
                eof = True
                break
            received += chunk
        if received:
            self._publish(bytes(received))
        if eof:
            self._close_fd()

    def _publish(self, data: bytes) -> None:
        self.scrollback.append(data)
        if self.on_output is not None:
            self.on_output(self.id, data)
        if self.file is not None:
            self.file.append(data)
        for attachment in list(self.attachments):
            attachment._notify()
        if self._reading and any(
            a.lag() > PAUSE_LAG_BYTES for a in self.attachments if not a.released
        ):
            self._pause_reading()

    # -- flow control ---------------------------------------------------------------------------

    def _pause_reading(self) -> None:
        self._loop.remove_reader(self.fd)
        self._reading = False
        self._grace_timer = self._loop.call_later(
            SLOW_CLIENT_GRACE_SECONDS, self._release_slow_clients
        )

    def _resume_reading(self) -> None:
        if self._grace_timer is not None:
            self._grace_timer.cancel()
            self._grace_timer = None
        if self._fd_open and not self._reading:
            self._loop.add_reader(self.fd, self._on_readable)
            self._reading = True

    def _maybe_resume(self) -> None:
        if self._reading or not self._fd_open:
            return
        if all(a.lag() <= RESUME_LAG_BYTES for a in self.attachments if not a.released):
            self._resume_reading()

    def _release_slow_clients(self) -> None:
        self._grace_timer = None
        for attachment in self.attachments:
            if not attachment.released and attachment.lag() > RESUME_LAG_BYTES:
                attachment.released = True
                log.info("terminal %s: a client lags too long; not waiting for it", self.id)
        self._maybe_resume()

    def _close_fd(self) -> None:
        if not self._fd_open:
            return
        self._fd_open = False
        if self._grace_timer is not None:
            self._grace_timer.cancel()
            self._grace_timer = None
        self._loop.remove_reader(self.fd)
        self._reading = False
        if self._writer_registered:
            self._loop.remove_writer(self.fd)
            self._writer_registered = False
        self._pending_input.clear()
        self._input_drained.set()
        # The fd belongs to ptyprocess' file object; close it there (never its blocking close()).
        self.process.fileobj.close()
        self.process.closed = True

    def _close_pidfd(self) -> None:
        if self._pidfd >= 0:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1

    def _on_process_exit(self) -> None:
        self._close_pidfd()
        try:
            _, status = os.waitpid(self.pid, os.WNOHANG)
            code = exit_code_of(status)
        except ChildProcessError:
            log.warning("terminal %s: pid %d was reaped by someone else", self.id, self.pid)
            code = -1
        self.process.terminated = True
        # Output the process wrote just before exiting comes before the exit notice.
        if self._fd_open:
            self._on_readable()
        self.exit_code = code
        if self.file is not None:
            self.file.append(f"\n# exited with code {code}\n".encode())
        self._exited.set()
        for attachment in list(self.attachments):
            attachment._notify()
        log.info("terminal %s (%s) exited with code %d", self.id, self.name, code)

    async def wait_exit(self) -> int:
        await self._exited.wait()
        assert self.exit_code is not None
        return self.exit_code

    def attach(self, since: int | None = None) -> tuple[Attachment, bool]:
        """A new client reading from `since` (default: all the scrollback still held).

        Returns the attachment and whether the asked-for bytes had already left the ring.
        """
        start, end = self.scrollback.start, self.scrollback.end
        wanted = start if since is None else since
        truncated = wanted < start
        attachment = Attachment(self, min(max(wanted, start), end))
        self.attachments.add(attachment)
        return attachment, truncated

    # -- input and control ---------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Queues input for the process; never blocks (see `drain` for backpressure)."""
        if not self._fd_open or self.exit_code is not None:
            raise CodedError(ErrorCode.EXITED, f"terminal {self.id} has exited")
        self._pending_input += data
        if not self._writer_registered:
            self._flush_input()

    async def drain(self) -> None:
        """Waits until the queued input is below the high-water mark."""
        while len(self._pending_input) > WRITE_HIGH_WATER:
            self._input_drained.clear()
            await self._input_drained.wait()

    def _flush_input(self) -> None:
        while self._pending_input:
            try:
                written = os.write(self.fd, self._pending_input[:READ_CHUNK])
            except BlockingIOError:
                break
            except OSError:
                self._pending_input.clear()
                break
            del self._pending_input[:written]
        if self._pending_input and not self._writer_registered:
            self._loop.add_writer(self.fd, self._flush_input)
            self._writer_registered = True
        elif not self._pending_input and self._writer_registered:
            self._loop.remove_writer(self.fd)
            self._writer_registered = False
        if len(self._pending_input) <= WRITE_HIGH_WATER:
            self._input_drained.set()

    def resize(self, cols: int, rows: int) -> None:
        validate_size(cols, rows)
        if self._fd_open:
            self.process.setwinsize(rows, cols)
        changed = (cols, rows) != (self.cols, self.rows)
        self.cols, self.rows = cols, rows
        if changed:
            for attachment in list(self.attachments):
                attachment._tell_size()

    def offer_size(self, attachment: Attachment, cols: int, rows: int) -> None:
        """A viewer's window fits cols x rows: the terminal takes the smallest size any attached
        viewer offers (tmux's `window-size smallest`), so every viewer sees all of it."""
        validate_size(cols, rows)
        attachment.size = (cols, rows)
        before = (self.cols, self.rows)
        self._arbitrate_size()
        if (self.cols, self.rows) == before:
            attachment._tell_size()

    def _arbitrate_size(self) -> None:
        offers = [a.size for a in self.attachments if a.size is not None]
        if offers and self.exit_code is None:
            self.resize(min(c for c, _ in offers), min(r for _, r in offers))

    def rename(self, name: str) -> None:
        name = name.strip()
        if not 1 <= len(name) <= MAX_NAME_CHARS or not name.isprintable():
            raise CodedError(
                ErrorCode.INVALID_ARGUMENT,
                f"a terminal name is 1..{MAX_NAME_CHARS} printable characters",
            )
        self.name = name
        self.renamed = True

    def send_signal(self, name: str) -> None:
        """Delivers a signal to the terminal's foreground job, as the key would (Ctrl-C...)."""
        number = signal_number(name)
        if self.exit_code is not None:
            raise CodedError(ErrorCode.EXITED, f"terminal {self.id} has exited")
        group = self.pid
        if self.foreground_group is not None:
            group = self.foreground_group() or group
        elif self._fd_open:
            with contextlib.suppress(OSError):
                group = os.tcgetpgrp(self.fd)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, number)

    async def kill(self, grace: float = 0.0) -> None:
        """Ends every process of the terminal's session: SIGHUP, then SIGKILL after `grace`."""
        if self.exit_code is None and grace > 0:
            await self._signal_session(signal.SIGHUP)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exited.wait(), grace)
        await self._signal_session(signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._exited.wait(), 1.0)

    async def _signal_session(self, number: int) -> None:
        for pid in await asyncio.to_thread(session_pids, self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, number)

    async def aclose(self) -> None:
        await self.kill(KILL_GRACE_SECONDS)
        self._close_fd()
        self._close_pidfd()
        if self.file is not None:
            await self.file.aclose()

    def info(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "command": self.command,
            "pid": self.pid,
            "cols": self.cols,
            "rows": self.rows,
            "exited": self.exit_code is not None,
            "exit_code": self.exit_code,
            "clients": len(self.attachments),
            "offset": self.scrollback.end,
            "log_path": str(self.log_path),
            "shared": self.shared,
            "renamed": self.renamed,
        }


class PtyManager:
    """The daemon's terminals (a `daemon.service`): created here, killed on shutdown."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        self._terminals: dict[str, Terminal] = {}
        # Given to every terminal made from now on (Terminal.on_output).
        self.on_output: Callable[[str, bytes], None] | None = None
        daemon.service(Meter).watch(Metric.LIVE_TERMINALS, self._live_terminals)
        self._closing: set[asyncio.Task[None]] = set()

    def _live_terminals(self) -> int:
        # On the exporter's thread: a tuple of the values is taken at once, under the GIL.
        return sum(terminal.exit_code is None for terminal in tuple(self._terminals.values()))

    @property
    def folder(self) -> Path:
        return self._daemon.config.terminals_folder

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = self._daemon.env.snapshot()
        for name in NOT_FOR_TERMINALS:
            env.pop(name, None)
        env.update({"TERM": "xterm-256color", "COLORTERM": "truecolor"})
        env.update(extra or {})
        return without_secrets(env)

    def resolve_cwd(self, cwd: str | None) -> str:
        path = Path(self._daemon.workspace, cwd or "")
        if not path.is_dir():
            raise CodedError(ErrorCode.INVALID_ARGUMENT, f"cwd {cwd!r} is not a directory")
        return str(path)

    def create(
        self,
        *,
        command: str | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        cols: int = 80,
        rows: int = 24,
        name: str = "",
        description: str = "",
        terminal_id: str | None = None,
        record: bool = True,
    ) -> Terminal:
        spec = TerminalSpec(
            command=command or None,
            cwd=self.resolve_cwd(cwd),
            env=self.environment(env),
            cols=cols,
            rows=rows,
            name=name,
            description=description,
            record=record,
        )
        terminal_id = terminal_id or new_terminal_id()
        terminal = Terminal(terminal_id, spec, self.folder)
        terminal.on_output = self.on_output
        self._terminals[terminal_id] = terminal
        self._forget_old_exited()
        log.info("terminal %s (%s) started: pid %d", terminal_id, terminal.name, terminal.pid)
        return terminal

    def _forget_old_exited(self) -> None:
        exited = [t for t in self._terminals.values() if t.exit_code is not None]
        for terminal in exited[: max(0, len(exited) - KEEP_EXITED)]:
            del self._terminals[terminal.id]
            task = asyncio.get_running_loop().create_task(terminal.aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    def get(self, terminal_id: str) -> Terminal:
        terminal = self._terminals.get(terminal_id)
        if terminal is None:
            raise CodedError(ErrorCode.NOT_FOUND, f"unknown terminal id {terminal_id!r}")
        return terminal

    def list(self) -> list[Terminal]:
        return list(self._terminals.values())

    def resize(self, terminal_id: str, cols: int, rows: int) -> None:
        self.get(terminal_id).resize(cols, rows)

    def write(self, terminal_id: str, data: bytes) -> None:
        self.get(terminal_id).write(data)

    def signal(self, terminal_id: str, name: str) -> None:
        self.get(terminal_id).send_signal(name)

    async def kill(self, terminal_id: str) -> int:
        terminal = self.get(terminal_id)
        await terminal.kill()
        return terminal.exit_code if terminal.exit_code is not None else -1

    async def close(self, terminal_id: str) -> None:
        """Ends a terminal and forgets it (a person closed its tab)."""
        terminal = self.forget(terminal_id)
        if terminal is not None:
            await terminal.aclose()

    def forget(self, terminal_id: str) -> Terminal | None:
        """No longer lists a terminal; the caller ends it."""
        return self._terminals.pop(terminal_id, None)

    async def aclose(self) -> None:
        terminals = list(self._terminals.values())
        self._terminals.clear()
        await asyncio.gather(*(t.aclose() for t in terminals), return_exceptions=True)
