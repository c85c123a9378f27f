"""Shared terminals: tmux sessions on the daemon's own tmux server, seen by people and the agent.

environment.json's `terminals` and the shells a person opens from the web page run as tmux
sessions on one tmux server that the daemon starts (`tmux -D`, a helper it keeps) with its own
configuration file (never `~/.tmux.conf` or `/etc/tmux.conf`, which a `run-shell` line would turn
into unconfined commands). Each one is seen through a PTY terminal that runs a tmux client
attached to the session, so every web viewer of that terminal watches the same screen; the
session's raw output goes to `terminal-<id>.log` (`pipe-pane`), as every terminal's does.

The agent reads and types into them with tmux from an unsandboxed shell (the commands are in the
log file's header and in `GET /terminals`):

    tmux -S <socket> capture-pane -p -t =<session>          # the screen as text
    tmux -S <socket> send-keys -t =<session> 'make test' Enter

A sandboxed shell cannot reach the tmux server (below); it reads a shared terminal through the
terminals folder instead, which every sandbox sees read-only: `terminal-<id>.log` (the raw
output) and `terminal-<id>.screen.txt`, the pane's history and screen as text (what
`capture-pane -p -J -S -` prints), rewritten (atomically) within SCREEN_REFRESH_SECONDS of any
output. Neither can type: only the tmux socket can, and a sandbox has no way to it.

The socket lives in the daemon's private state root (`<state root>/sockets/tmux/`, see
exec_daemon/kernel/state_root.py), one server per daemon instance: every sandbox masks that
folder with an empty mount (sandbox/README.md), so a sandboxed shell cannot reach the server
that would run anything it asks unconfined, whenever the socket was bound. The daemon ends the
server, and every session's processes, when it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import re
import shlex
import shutil
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.runner import Helper, HelperFailed, run_helper, start_helper
from exec_daemon.kernel.state import Daemon
from exec_daemon.kernel.state_root import SOCKETS, sockets_folder, state_folder
from exec_daemon.terminals.accounts import Account
from exec_daemon.terminals.pty import (
    PtyManager,
    Terminal,
    login_shell,
    new_terminal_id,
    validate_size,
)

log = logging.getLogger(__name__)

TMUX_COMMAND_SECONDS = 10.0
# How often a shared terminal's screen file is brought up to date (when it had output).
SCREEN_REFRESH_SECONDS = 0.5
SERVER_START_SECONDS = 10.0
# How often the new server's socket is tried while it starts (a connect, no tmux client started).
LISTEN_POLL_SECONDS = 0.005
# A unix socket's path holds at most 107 bytes (sun_path).
MAX_SOCKET_PATH = 100
# What a tmux session may be called without quoting trouble (tmux forbids ':' and '.').
UNSAFE_SESSION_CHARS = re.compile(r"[^A-Za-z0-9_-]+")

# status off + no alternate screen for the outer terminal: lines that scroll off the session's
# screen land in the web terminal's own scrollback. set-titles passes a program's OSC 0/2 title
# on to the page's tab.
CONFIG = """\
set -g default-shell {shell}
set -g status off
set -g escape-time 0
set -g history-limit 20000
set -g set-titles on
set -g set-titles-string '#T'
set -g default-terminal screen-256color
set -ga terminal-overrides ',xterm*:smcup@:rmcup@'
set -g remain-on-exit off
"""


@dataclass(frozen=True)
class SharedSession:
    """How the agent reaches one shared terminal."""

    socket: str
    session: str
    screen_file: str = ""

    @property
    def target(self) -> str:
        """The session as a tmux target, matched exactly (not as a prefix)."""
        return f"={self.session}"

    @property
    def pane(self) -> str:
        """The session's (only) pane as a tmux target, matched exactly."""
        return f"={self.session}:"

    def tmux(self, *args: str) -> str:
        return shlex.join(["tmux", "-S", self.socket, *args])

    def describe(self) -> dict[str, str]:
        target = self.pane
        return {
            "tmux_socket": self.socket,
            "tmux_session": self.session,
            "read_screen": self.tmux("capture-pane", "-p", "-t", target),
            "type_keys": self.tmux("send-keys", "-t", target, "echo hello", "Enter"),
            "screen_file": self.screen_file,
        }


class SharedTerminals:
    """The daemon's tmux server (a `daemon.service`) and the sessions it holds."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        self._server: Helper | None = None
        self._folder: Path | None = None
        self.socket: Path | None = None
        self.sessions: dict[str, SharedSession] = {}
        self._screen_keepers: dict[str, asyncio.Task[None]] = {}

    @property
    def available(self) -> bool:
        return self._server is not None and self._server.process.returncode is None

    async def start(self) -> None:
        """Starts the tmux server; without tmux, terminals stay plain PTY terminals."""
        if shutil.which("tmux") is None:
            log.warning("tmux is not installed: terminals are not shared with the agent")
            return
        try:
            folder = await asyncio.to_thread(self._make_folder)
            config = folder / "tmux.conf"
            await asyncio.to_thread(
                config.write_text, CONFIG.format(shell=shlex.quote(login_shell()))
            )
            socket_path = folder / "server.sock"
            environment = self._daemon.service(PtyManager).environment()
            server = await start_helper(
                ["tmux", "-D", "-f", str(config), "-S", str(socket_path)], env=environment
            )
        except (OSError, HelperFailed) as exc:
            log.error("the tmux server did not start (terminals are not shared): %s", exc)
            return
        self._server, self._folder, self.socket = server, folder, socket_path
        if not await self._wait_listening():
            log.error("the tmux server did not listen on %s; terminals are not shared", socket_path)
            await self.aclose()
            return
        log.info("shared terminals: tmux server on %s", socket_path)

    def _make_folder(self) -> Path:
        """This daemon's own tmux folder, in the state root's sockets folder (masked in every
        sandbox); never shared with another daemon. Raises OSError."""
        folder = sockets_folder(self._daemon.config.state_root) / "tmux"
        if len(str(folder / "server.sock")) > MAX_SOCKET_PATH:
            raise OSError(errno.ENAMETOOLONG, f"{folder} is too long a path for a unix socket")
        state_folder(self._daemon.config.state_root, f"{SOCKETS}/tmux")
        return folder

    async def _wait_listening(self) -> bool:
        """Whether the server came to answer (tmux itself says so) within SERVER_START_SECONDS.
        Its socket is tried every few ms first: a tmux client per try, 50 ms apart, held up
        the daemon's start by ~50 ms."""
        assert self.socket is not None
        deadline = time.monotonic() + SERVER_START_SECONDS
        while time.monotonic() < deadline and self.available:
            if _accepts(self.socket):
                if await self._tmux("show-options", "-g", "status", check=False) is not None:
                    return True
            await asyncio.sleep(LISTEN_POLL_SECONDS)
        return False

    async def _tmux(self, *args: str, check: bool = True) -> str | None:
        """Runs a tmux command list on the server; its output, or None when it failed and not
        `check` (else CodedError)."""
        assert self.socket is not None
        argv = ["tmux", "-S", str(self.socket), *args]
        environment = self._daemon.service(PtyManager).environment()
        try:
            completed = await run_helper(argv, env=environment, time_limit=TMUX_COMMAND_SECONDS)
        except HelperFailed as exc:
            if check:
                raise CodedError(ErrorCode.UNAVAILABLE, f"tmux failed: {exc.message}") from exc
            return None
        if completed.returncode == 0:
            return completed.stdout.text()
        if check:
            detail = completed.stderr.text().strip()[:300]
            raise CodedError(ErrorCode.SPAWN_FAILED, f"tmux {args[0]} failed: {detail}")
        return None

    def _session_name(self, name: str, terminal_id: str) -> str:
        base = UNSAFE_SESSION_CHARS.sub("-", name).strip("-")[:40] or "terminal"
        taken = {shared.session for shared in self.sessions.values()}
        return base if base not in taken else f"{base}-{terminal_id}"

    async def create(
        self,
        *,
        command: str | None = None,
        cwd: str | None = None,
        cols: int = 80,
        rows: int = 24,
        name: str = "",
        description: str = "",
        shell_after: bool = False,
        account: Account | None = None,
    ) -> Terminal:
        """A new tmux session running `command` (default: a login shell) and the PTY terminal
        attached to it. `shell_after`: once the command ends (done, failed or interrupted with
        Ctrl-C), a shell takes its place in the pane, below its output, so the person and the
        agent keep a terminal there rather than a dead pane. `account`: all of it runs as that
        account (environment.json's `user`)."""
        manager = self._daemon.service(PtyManager)
        if not self.available or self.socket is None:
            if account is not None:
                command = shlex.join(account.argv(command or account.shell))
            return manager.create(
                command=command, cwd=cwd, cols=cols, rows=rows, name=name, description=description
            )
        validate_size(cols, rows)
        workdir = manager.resolve_cwd(cwd)
        terminal_id = new_terminal_id()
        log_path = manager.folder / f"terminal-{terminal_id}.log"
        screen_path = manager.folder / f"terminal-{terminal_id}.screen.txt"
        shared = SharedSession(
            str(self.socket),
            self._session_name(name or terminal_id, terminal_id),
            str(screen_path),
        )
        exit_file = shlex.quote(str(self.socket.parent / f"exit-{terminal_id}"))
        go = f"go-{terminal_id}"
        await asyncio.to_thread(_write_header, log_path, terminal_id, name, command, shared)
        # Listed with the terminal, so there from the start (the first capture comes later).
        await asyncio.to_thread(_replace_file, screen_path, "")
        # The program waits until its output is piped to the log and the daemon's client is
        # attached (so even a command that ends at once is seen); its exit code goes to a file,
        # from which the client's terminal reports it.
        program = _pane_program(command, shell_after, account.shell if account else login_shell())
        if account is not None:
            # The pane's program is POSIX shell (trap, $?), whatever the account's shell is.
            program = shlex.join([*account.prefix(), "/bin/sh", "-c", program])
        wrapped = f"{shared.tmux('wait-for', go)}; {program}; printf %s $? > {exit_file}"
        new_session = ["new-session", "-d", "-s", shared.session, "-x", str(cols), "-y", str(rows)]
        new_session += ["-c", workdir]
        for key, value in manager.environment().items():
            if key != "TERM":  # inside tmux it is tmux's default-terminal
                new_session += ["-e", f"{key}={value}"]
        setup = _session_setup(shared, log_path, title=name or shared.session)
        pane_pid = await self._tmux(*new_session, wrapped, *setup)
        attach = shared.tmux("wait-for", "-S", go, ";", "attach-session", "-t", shared.target)
        report_exit = (
            f'code=$(cat {exit_file} 2>/dev/null || echo 0); rm -f {exit_file}; exit "$code"'
        )
        try:
            terminal = manager.create(
                command=f"{attach}; {report_exit}",
                cwd=cwd,
                cols=cols,
                rows=rows,
                name=name or shared.session,
                description=description,
                terminal_id=terminal_id,
                record=False,
            )
        except CodedError:
            await self._tmux("kill-session", "-t", shared.target, check=False)
            raise
        terminal.shared = shared.describe()
        if pane_pid and pane_pid.strip().isdigit():
            pid = int(pane_pid)
            # Ctrl-C from the page or a signal RPC reaches the program, not the tmux client.
            terminal.foreground_group = lambda: foreground_group_of(pid)
        self.sessions[terminal_id] = shared
        self._screen_keepers[terminal_id] = asyncio.create_task(
            self._keep_screen_file(shared, log_path, screen_path)
        )
        return terminal

    async def _keep_screen_file(self, shared: SharedSession, log_path: Path, screen: Path) -> None:
        """Rewrites `screen` with the pane's history and screen as text whenever its log grew,
        until the session is gone (the file then keeps its last screen)."""
        written_at_size = -1
        while self.available:
            try:
                size = (await asyncio.to_thread(os.stat, log_path)).st_size
            except OSError:
                size = written_at_size + 1
            if size != written_at_size:
                text = await self._tmux(
                    "capture-pane", "-p", "-J", "-S", "-", "-t", shared.pane, check=False
                )
                if text is None:
                    return
                try:
                    await asyncio.to_thread(_replace_file, screen, text)
                except OSError as exc:
                    log.warning("cannot write %s: %s", screen, exc.strerror)
                    return
                written_at_size = size
            await asyncio.sleep(SCREEN_REFRESH_SECONDS)

    async def _stop_screen_file(self, terminal_id: str) -> None:
        task = self._screen_keepers.pop(terminal_id, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self, terminal: Terminal) -> None:
        """Ends a terminal: its tmux session too if it is shared. It is no longer listed, and its
        session is gone, when its viewers see their connection close (the session's end ends
        the client, which closes them)."""
        shared = self.sessions.pop(terminal.id, None)
        await self._stop_screen_file(terminal.id)
        forgotten = self._daemon.service(PtyManager).forget(terminal.id)
        if shared is not None and self.available:
            await self._tmux("kill-session", "-t", shared.target, check=False)
        if forgotten is not None:
            await forgotten.aclose()

    async def aclose(self) -> None:
        for terminal_id in list(self._screen_keepers):
            await self._stop_screen_file(terminal_id)
        server, self._server = self._server, None
        if server is not None:
            await server.stop()
            if self.socket is not None:
                with contextlib.suppress(OSError):
                    await asyncio.to_thread(self.socket.unlink)


def _pane_program(command: str | None, shell_after: bool, shell: str) -> str:
    """What the pane runs: `command` (or `shell`), then, with `shell_after`, a line saying how
    it ended and `shell`. The pane's own shell traps SIGINT and SIGQUIT (a handler, which its
    children do not inherit), so Ctrl-C ends the command and not what follows it."""
    if not command:
        return shlex.quote(shell)
    program = shlex.join([shell, "-c", command])
    if not shell_after:
        return program
    said = shlex.quote("\\n[the command ended with code %s; a shell takes its place]\\n")
    return (
        f"trap : INT QUIT; {program}; code=$?; trap - INT QUIT; "
        f'printf {said} "$code"; {shlex.quote(shell)}'
    )


def _session_setup(shared: SharedSession, log_path: Path, title: str) -> list[str]:
    """The tmux commands that follow a new session's, in the same command list (so before the
    server reads anything from its program): the log pipe, the pane's title (the page's tab
    shows it until the program sets one), and the pane's pid printed."""
    pane = shared.pane
    return [
        *(";", "pipe-pane", "-t", pane, f"exec cat >> {shlex.quote(str(log_path))}"),
        *(";", "select-pane", "-t", pane, "-T", title),
        *(";", "display-message", "-p", "-t", pane, "#{pane_pid}"),
    ]


def foreground_group_of(pid: int) -> int | None:
    """The foreground process group of `pid`'s controlling terminal (tpgid in its stat)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    # After "pid (comm)": state ppid pgrp session tty_nr tpgid ...
    group = int(fields[5])
    return group if group > 0 else None


def _replace_file(path: Path, text: str) -> None:
    """Writes `path` whole, atomically: a reader sees the old text or the new, never half."""
    temporary = path.with_name(f".{path.name}.new")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o644)
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    finally:
        os.close(fd)
    os.replace(temporary, path)


def _write_header(
    path: Path, terminal_id: str, name: str, command: str | None, shared: SharedSession
) -> None:
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    target = shared.pane
    header = (
        f"# terminal {terminal_id} {name!r}: tmux session {shared.session!r}, started {started}\n"
        f"# command: {command or 'a login shell'}\n"
        f"# read its screen: {shared.tmux('capture-pane', '-p', '-t', target)}\n"
        f"# type into it: {shared.tmux('send-keys', '-t', target, 'make test', 'Enter')}\n"
        f"# its history and screen as text, kept up to date (a sandbox can read it): "
        f"{shared.screen_file}\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, header.encode())
    finally:
        os.close(fd)


@contextlib.asynccontextmanager
async def running(daemon: Daemon) -> AsyncIterator[SharedTerminals]:
    """The tmux server for the duration of the block."""
    shared = daemon.service(SharedTerminals)
    await shared.start()
    try:
        yield shared
    finally:
        await shared.aclose()


def _accepts(path: Path) -> bool:
    """Whether a server listens on the unix socket `path` (never blocks: a full backlog is no)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.setblocking(False)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True
