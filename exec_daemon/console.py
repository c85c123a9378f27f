"""The client side of `exec-daemon run` and `exec-daemon attach`: a command's output streamed to
this console, and a daemon terminal (the PTY port) driven from it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import termios
import tty
from collections.abc import Iterator, Mapping
from typing import Any

from exec_daemon.sdk import AsyncSandbox, AsyncTerminal, ExecDaemonError, Timeout

# Exit codes of `run` besides the command's own: as timeout(1) and `docker run` use them.
TIMED_OUT = 124
DAEMON_FAILED = 125
INTERRUPTED = 130
# Ctrl-]: detaches `attach` from the terminal, which keeps running (as telnet's escape).
DETACH_BYTE = b"\x1d"


def _write(stream: Any, text: str) -> None:
    stream.write(text)
    stream.flush()


async def run_command(
    sandbox: AsyncSandbox,
    command: str,
    *,
    cwd: str | None,
    timeout_seconds: float,
    env: Mapping[str, str],
    run_mode: str | None,
) -> int:
    """Runs `command`, its stdout and stderr streamed to ours; the command's exit code, or
    TIMED_OUT / DAEMON_FAILED after saying why on stderr."""
    try:
        result = await sandbox.shell.run(
            command,
            cwd=cwd,
            timeout=timeout_seconds,
            env=env,
            run_mode=run_mode,
            on_stdout=lambda text: _write(sys.stdout, text),
            on_stderr=lambda text: _write(sys.stderr, text),
        )
    except Timeout as exc:
        _write(sys.stderr, f"exec-daemon run: {exc.message}\n")
        return TIMED_OUT
    except ExecDaemonError as exc:
        _write(sys.stderr, f"exec-daemon run: {exc.code}: {exc.message}\n")
        return DAEMON_FAILED
    if result.spill:
        _write(sys.stderr, f"exec-daemon run: the whole output is in {result.spill}\n")
    return result.exit_code


def console_size(fd: int) -> tuple[int, int]:
    """(columns, rows) of the terminal on `fd`, else 80x24."""
    try:
        size = os.get_terminal_size(fd)
    except OSError:
        return 80, 24
    return size.columns or 80, size.lines or 24


@contextlib.contextmanager
def raw_mode(fd: int) -> Iterator[bool]:
    """`fd`'s terminal in raw mode (every key, Ctrl-C included, goes to the remote terminal),
    restored after; yields False when `fd` is no terminal (then it is left alone)."""
    if not os.isatty(fd):
        yield False
        return
    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def attach_console(
    terminal: AsyncTerminal, stdin_fd: int, stdout_fd: int
) -> tuple[bool, int | None]:
    """Relays this console to `terminal` until its process exits, the connection ends, or
    Ctrl-] detaches: (detached, the process's exit code when it exited)."""
    loop = asyncio.get_running_loop()
    detached = asyncio.Event()
    # What goes to the terminal, in order: typed bytes, and new sizes (columns, rows).
    typed: asyncio.Queue[bytes | tuple[int, int]] = asyncio.Queue()
    size = console_size(stdout_fd)  # the size the terminal was opened with

    def send_size_if_changed() -> None:
        # Also before each input: the loop may read keys typed after a resize before it runs
        # the resize's SIGWINCH handler, and they must not reach the terminal at the old size.
        nonlocal size
        if (now := console_size(stdout_fd)) != size:
            size = now
            typed.put_nowait(now)

    def on_input() -> None:
        try:
            data = os.read(stdin_fd, 65536)
        except BlockingIOError:
            return
        if not data:
            loop.remove_reader(stdin_fd)  # our input ended: the terminal's output goes on
            return
        if DETACH_BYTE in data:
            data = data.split(DETACH_BYTE, 1)[0]
            detached.set()
        if data:
            send_size_if_changed()
            typed.put_nowait(data)

    async def send_typed() -> None:
        while True:
            item = await typed.get()
            if isinstance(item, bytes):
                await terminal.send(item)
            else:
                await terminal.resize(*item)

    async def show_output() -> None:
        async for chunk in terminal:
            await asyncio.to_thread(os.write, stdout_fd, chunk)

    loop.add_reader(stdin_fd, on_input)
    loop.add_signal_handler(signal.SIGWINCH, send_size_if_changed)
    tasks = [
        asyncio.create_task(send_typed()),
        asyncio.create_task(show_output()),
        asyncio.create_task(detached.wait()),
    ]
    try:
        await asyncio.wait(tasks[1:], return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_reader(stdin_fd)
        loop.remove_signal_handler(signal.SIGWINCH)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return detached.is_set(), terminal.exit_code
