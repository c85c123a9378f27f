"""The CLI's client subcommands against the real daemon: `ping`, `run` and `attach` find the token
as `./scripts/serve` keeps it; `run` streams and exits with the command's code; `attach` drives
a daemon terminal from a real pty (raw mode, size, Ctrl-C, exit code, detach)."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon_process import RunningDaemon
from tests.interop import daemon_for_module
from tests.polling import generous

CLI = [sys.executable, "-m", "exec_daemon"]
PROMPT = b"ready> "
SHELL = f"env PS1='{PROMPT.decode()}' bash --norc --noprofile"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with daemon_for_module(tmp_path_factory) as running:
        yield running


@pytest.fixture
def token_folder(daemon: RunningDaemon, tmp_path: Path) -> Path:
    """A folder holding the token as ./scripts/serve keeps it."""
    kept = tmp_path / ".exec-daemon-token"
    kept.write_text(daemon.token + "\n")
    kept.chmod(0o600)
    return tmp_path


def cli_env() -> dict[str, str]:
    """The environment without a token variable: the file must be what is found."""
    return {name: value for name, value in os.environ.items() if name != "EXEC_DAEMON_AUTH_TOKEN"}


def cli(daemon: RunningDaemon, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args[:1], "--url", f"127.0.0.1:{daemon.port}", *args[1:]],
        capture_output=True,
        text=True,
        cwd=folder,
        env=cli_env(),
        timeout=generous(60),
    )


def test_ping_finds_the_token_file_and_says_when_there_is_none(
    daemon: RunningDaemon, token_folder: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    found = cli(daemon, token_folder, "ping")
    assert found.returncode == 0, found.stderr
    assert str(daemon.workspace) in found.stdout
    nowhere = cli(daemon, tmp_path_factory.mktemp("no-token"), "ping")
    assert nowhere.returncode == 1
    assert "no token" in nowhere.stderr and "Traceback" not in nowhere.stderr


def test_run_exits_with_the_commands_code_and_keeps_its_streams_apart(
    daemon: RunningDaemon, token_folder: Path
) -> None:
    ran = cli(daemon, token_folder, "run", "echo out; echo err >&2; exit 7")
    assert (ran.returncode, ran.stdout, ran.stderr) == (7, "out\n", "err\n")
    with_env = cli(daemon, token_folder, "run", "--env", "WHO=env", "--cwd", ".", 'echo "$WHO"')
    assert (with_env.returncode, with_env.stdout) == (0, "env\n")
    words = cli(daemon, token_folder, "run", "echo", "two", "words")
    assert words.stdout == "two words\n"


def test_run_says_why_when_the_call_does_not_run_to_its_end(
    daemon: RunningDaemon, token_folder: Path
) -> None:
    timed_out = cli(daemon, token_folder, "run", "--timeout", "1", "echo begun; sleep 30")
    assert timed_out.returncode == 124 and timed_out.stdout == "begun\n"
    assert "timed out" in timed_out.stderr
    refused = cli(daemon, token_folder, "run", "--run-mode", "allowlist", "touch x")
    assert refused.returncode == 125
    assert "needs_approval" in refused.stderr and "terminalAllowlist" in refused.stderr
    assert not (daemon.workspace / "x").exists()
    bad = cli(daemon, token_folder, "run", "--env", "NOEQUALS", "true")
    assert bad.returncode == 2 and "NAME=VALUE" in bad.stderr


def test_run_streams_the_output_while_the_command_runs(
    daemon: RunningDaemon, token_folder: Path
) -> None:
    marker = daemon.workspace / "go-on"
    script = f"echo first; until [ -e {marker} ]; do sleep 0.05; done; echo second"
    process = subprocess.Popen(
        [*CLI, "run", "--url", daemon.url, script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=token_folder,
        env=cli_env(),
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == b"first\n"
        assert process.poll() is None  # the command waits for the marker: still running
        marker.touch()
        assert process.wait(generous(60)) == 0
        assert process.stdout.read() == b"second\n"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


# -- attach, in a real pty ---------------------------------------------------------------------


def set_size(fd: int, rows: int, columns: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


class Console:
    """`exec-daemon attach` running in a pty of its own, read and typed into like a person."""

    def __init__(self, daemon: RunningDaemon, folder: Path, *args: str) -> None:
        self.master, slave = os.openpty()
        set_size(slave, 33, 111)
        self.modes = termios.tcgetattr(slave)
        pty_url = f"ws://127.0.0.1:{daemon.pty_port}"
        self.process = subprocess.Popen(
            [*CLI, "attach", "--url", daemon.url, "--pty-url", pty_url, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=folder,
            env=cli_env(),
            start_new_session=True,
        )
        os.close(slave)
        self.seen = b""

    def expect(self, wanted: bytes, seconds: float = 30.0) -> None:
        deadline = time.monotonic() + generous(seconds)
        while wanted not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{wanted!r} not shown; the console shows {self.seen[-2000:]!r}"
                )
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # EIO: the console's process ended
                    chunk = b""
                if not chunk:
                    raise AssertionError(
                        f"{wanted!r} not shown before the end: {self.seen[-2000:]!r}"
                    )
                self.seen += chunk

    def type(self, text: bytes) -> None:
        os.write(self.master, text)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        os.close(self.master)


@pytest.fixture
def console(daemon: RunningDaemon, token_folder: Path) -> Iterator[Console]:
    opened = Console(daemon, token_folder, "--command", SHELL)
    opened.expect(PROMPT)  # typed before bash reads, a line may be flushed (as for a person)
    yield opened
    opened.close()


def test_attach_is_a_terminal_in_this_console(console: Console) -> None:
    console.type(b"stty size; echo $((6 * 7))\r")
    console.expect(b"33 111\r\n")
    console.expect(b"42\r\n")
    # The console's size follows the local terminal's: on SIGWINCH, and before any key typed
    # after a resize whose SIGWINCH `attach` has not handled yet (here: never sent).
    set_size(console.master, 40, 120)
    console.type(b"stty size\r")
    console.expect(b"40 120\r\n")
    set_size(console.master, 50, 100)
    console.process.send_signal(signal.SIGWINCH)
    console.type(b"stty size\r")
    console.expect(b"50 100\r\n")
    # Raw mode: Ctrl-C reaches the remote command, not `attach`.
    console.type(
        b'python3 -c \'import signal; print("wait" + "ing", flush=True); signal.pause()\'\r'
    )
    console.expect(b"waiting\r\n")
    console.type(b"\x03")
    console.expect(b"KeyboardInterrupt")
    console.type(b"echo alive-$((1 + 1))\r")
    console.expect(b"alive-2\r\n")
    assert console.process.poll() is None
    console.type(b"exit 3\r")
    assert console.process.wait(generous(30)) == 3
    # The local terminal is as it was (raw mode undone).
    assert termios.tcgetattr(console.master)[3] == console.modes[3]


def test_ctrl_close_bracket_detaches_and_the_terminal_keeps_running(
    daemon: RunningDaemon, token_folder: Path
) -> None:
    first = Console(daemon, token_folder, "--command", SHELL)
    try:
        first.expect(PROMPT)
        first.type(b"echo kept-$((2 * 21))\r")
        first.expect(b"kept-42\r\n")
        first.type(b"\x1d")
        first.expect(b"keeps running")
        assert first.process.wait(generous(30)) == 0
        terminal_id = first.seen.split(b"--terminal ", 1)[1].split(b")", 1)[0].decode()
    finally:
        first.close()
    again = Console(daemon, token_folder, "--terminal", terminal_id)
    try:
        again.expect(b"kept-42")  # the replay of its output
        again.type(b"exit 4\r")
        assert again.process.wait(generous(30)) == 4
    finally:
        again.close()
