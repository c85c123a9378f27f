"""PtyManager: real PTYs, the scrollback ring, terminal files, input, signals, kill."""

from __future__ import annotations

import asyncio
import signal
import termios
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.state import Daemon
from exec_daemon.terminals.pty import (
    SCROLLBACK_BYTES,
    Attachment,
    ClientTooSlow,
    PtyManager,
    Scrollback,
    Terminal,
    session_pids,
)
from tests.polling import WAIT_SECONDS, eventually
from tests.sandbox_harness import processes_with_argument

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[PtyManager]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    config = DaemonConfig(
        auth_token="t", workspace=workspace, terminals_folder=tmp_path / "terminals"
    )
    daemon = Daemon(config)
    yield daemon.service(PtyManager)
    await daemon.aclose()


async def read_until(attachment: Attachment, needle: bytes, timeout: float = WAIT_SECONDS) -> bytes:
    received = b""

    async def collect() -> None:
        nonlocal received
        while needle not in received:
            chunk = await attachment.read(1 << 20)
            if not chunk:
                raise AssertionError(f"terminal ended before {needle!r}: {received[-300:]!r}")
            received += chunk

    await asyncio.wait_for(collect(), timeout)
    return received


async def read_all(attachment: Attachment, timeout: float = 20.0) -> bytes:
    received = bytearray()

    async def collect() -> None:
        while chunk := await attachment.read(1 << 20):
            received.extend(chunk)

    await asyncio.wait_for(collect(), timeout)
    return bytes(received)


def test_scrollback_keeps_absolute_offsets_while_it_drops_old_bytes() -> None:
    ring = Scrollback(limit=100)
    ring.append(b"a" * 60)
    ring.append(b"b" * 60)
    assert (ring.start, ring.end) == (0, 120)
    ring.append(b"c" * 20)  # 140 > 125: trimmed back to the last 100 bytes
    assert (ring.start, ring.end) == (40, 140)
    assert ring.read(40, 1000) == b"a" * 20 + b"b" * 60 + b"c" * 20
    assert ring.read(110, 5) == b"bbbbb"
    assert ring.read(140, 10) == b""


async def test_command_output_reaches_clients_and_the_terminal_file(
    manager: PtyManager,
) -> None:
    terminal = manager.create(command="printf 'hello\\n'; printf '\\377\\376'; exit 5", name="demo")
    attachment, truncated = terminal.attach()
    assert not truncated
    output = await read_all(attachment)
    assert output == b"hello\r\n\xff\xfe"  # the PTY turns \n into \r\n; bytes stay bytes
    assert await terminal.wait_exit() == 5
    assert terminal.file is not None
    await terminal.file.aclose()
    log_bytes = terminal.file.path.read_bytes()
    assert terminal.file.path.name == f"terminal-{terminal.id}.log"
    assert b"hello\r\n\xff\xfe" in log_bytes
    assert log_bytes.rstrip().endswith(b"# exited with code 5")
    info = terminal.info()
    assert (info["name"], info["exited"], info["exit_code"]) == ("demo", True, 5)


async def test_a_shell_echoes_typed_input(manager: PtyManager) -> None:
    terminal = manager.create(cols=90, rows=20)
    attachment, _ = terminal.attach()
    terminal.write(b"echo typed-$((40+2))\r")
    await read_until(attachment, b"typed-42\r\n")
    terminal.write(b"stty size\r")
    await read_until(attachment, b"20 90\r\n")


async def test_resize_is_seen_by_the_program_and_bad_sizes_are_refused(
    manager: PtyManager,
) -> None:
    terminal = manager.create()
    attachment, _ = terminal.attach()
    terminal.resize(132, 43)
    terminal.write(b"stty size\r")
    await read_until(attachment, b"43 132\r\n")
    for cols, rows in [(0, 0), (10000, 10000), (80, 0), (-1, 24)]:
        with pytest.raises(CodedError, match="terminal size must be"):
            terminal.resize(cols, rows)
    with pytest.raises(CodedError, match="terminal size must be"):
        manager.create(cols=0, rows=0)
    terminal.write(b"echo still-$((1+1))\r")
    await read_until(attachment, b"still-2\r\n")
    assert (terminal.cols, terminal.rows) == (132, 43)


async def test_a_large_paste_is_delivered_whole_without_blocking_the_loop(
    manager: PtyManager, tmp_path: Path
) -> None:
    target = tmp_path / "pasted"
    # Raw mode: the line discipline would otherwise cap one line at 4 KiB.
    terminal = manager.create(command=f"stty raw -echo; head -c 4000000 > {target}; echo got-it")
    attachment, _ = terminal.attach()
    await eventually(lambda: not termios.tcgetattr(terminal.fd)[3] & termios.ICANON, what="raw")
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    for _ in range(40):
        terminal.write(b"p" * 100_000)
        await terminal.drain()
    await read_until(attachment, b"got-it", timeout=30)
    ticking.cancel()
    assert target.stat().st_size == 4_000_000
    assert max(gaps) < 0.5, f"the event loop stalled for {max(gaps):.3f}s"


async def test_sigint_reaches_the_foreground_job(manager: PtyManager) -> None:
    marker = f"30.{time.monotonic_ns() % 10**6:06d}"  # seconds, and unique
    # As when the daemon was started in the background by a script: SIGINT ignored, which a
    # child keeps through exec unless the terminal restores it.
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        terminal = manager.create(command=f"sleep {marker}")
    finally:
        signal.signal(signal.SIGINT, ignored)
    await eventually(lambda: processes_with_argument(marker), what="the sleep to run")
    terminal.send_signal("SIGINT")
    assert await asyncio.wait_for(terminal.wait_exit(), 5) == 130
    with pytest.raises(CodedError, match="unknown signal"):
        manager.create().send_signal("SIGBOGUS")


async def test_kill_ends_the_whole_session_grandchildren_included(manager: PtyManager) -> None:
    terminal = manager.create(command="sleep 300 & sleep 301 & wait")
    deadline = time.monotonic() + 5
    while len(session_pids(terminal.pid)) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    members = session_pids(terminal.pid)
    assert len(members) >= 3
    code = await manager.kill(terminal.id)
    assert code == 128 + 9
    await eventually(lambda: session_pids(terminal.pid) == [], what="the session to end")
    for pid in members:
        assert process_state(pid) in ("gone", "Z")


def process_state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return "gone"
    return stat.rsplit(b")", 1)[1].split()[0].decode()


async def test_output_written_while_nobody_listens_is_replayed_on_attach(
    manager: PtyManager,
) -> None:
    terminal = manager.create(command="for i in 1 2 3; do echo line-$i; done; sleep 30")
    first, _ = terminal.attach()
    await read_until(first, b"line-3")
    first.detach()
    assert terminal.exit_code is None  # the terminal outlives its client
    late, truncated = terminal.attach()
    assert not truncated and late.offset == 0
    assert b"line-1\r\nline-2\r\nline-3\r\n" in await read_until(late, b"line-3")


async def test_reattach_since_an_offset_has_no_gap_and_no_duplicate(manager: PtyManager) -> None:
    terminal = manager.create(command="seq 1 20000")
    whole = await read_all(terminal.attach()[0])
    middle = 54321
    resumed, truncated = terminal.attach(since=middle)
    assert not truncated
    assert whole[:middle] + await read_all(resumed) == whole
    beyond, truncated = terminal.attach(since=10**9)
    assert not truncated and beyond.offset == terminal.scrollback.end


async def test_asking_for_bytes_the_ring_dropped_says_truncated(manager: PtyManager) -> None:
    size = SCROLLBACK_BYTES * 3
    terminal = manager.create(command=f"head -c {size} /dev/zero | tr '\\0' x")
    await terminal.wait_exit()
    await eventually(lambda: terminal.scrollback.end == size, what="all the output")
    assert terminal.scrollback.start > 0
    attachment, truncated = terminal.attach(since=0)
    assert truncated
    assert attachment.offset == terminal.scrollback.start
    assert len(await read_all(attachment)) == size - terminal.scrollback.start


async def test_a_client_slower_than_the_program_still_gets_every_byte(
    manager: PtyManager,
) -> None:
    size = SCROLLBACK_BYTES * 4
    terminal = manager.create(command=f"head -c {size} /dev/zero | tr '\\0' s")
    attachment, _ = terminal.attach()
    overruns: list[int] = []
    attachment.on_overrun = lambda: overruns.append(attachment.offset)
    received = 0

    async def sip() -> None:
        nonlocal received
        while chunk := await attachment.read(16 * 1024):
            received += len(chunk)
            await asyncio.sleep(0.002)

    await asyncio.wait_for(sip(), 30)
    assert (received, overruns) == (size, [])


async def test_a_slow_client_is_overrun_without_stalling_a_fast_one(manager: PtyManager) -> None:
    size = SCROLLBACK_BYTES * 4
    terminal = manager.create(command=f"sleep 0.3; head -c {size} /dev/zero | tr '\\0' y")
    slow, _ = terminal.attach()
    overruns: list[int] = []
    slow.on_overrun = lambda: overruns.append(slow.offset)
    fast, _ = terminal.attach()
    assert len(await read_all(fast)) == size
    assert overruns == [0]
    with pytest.raises(ClientTooSlow):
        await slow.read(1024)


async def test_children_get_default_sigpipe(manager: PtyManager) -> None:
    # Python ignores SIGPIPE; the terminal's programs must not inherit that.
    terminal = manager.create(command="yes | head -n 1; echo status=${PIPESTATUS[0]}")
    output = await read_all(terminal.attach()[0])
    assert b"status=141" in output
    assert b"Broken pipe" not in output


async def test_unknown_ids_and_bad_cwd_are_clear_errors(manager: PtyManager) -> None:
    with pytest.raises(CodedError, match="unknown terminal id 'nope'") as caught:
        manager.get("nope")
    assert caught.value.code == "not_found"
    with pytest.raises(CodedError, match="is not a directory"):
        manager.create(cwd="does/not/exist")


async def test_terminal_gets_a_real_terminal_environment(manager: PtyManager) -> None:
    terminal: Terminal = manager.create(command='echo "term=$TERM nocolor=${NO_COLOR-unset}"; tty')
    output = await read_all(terminal.attach()[0])
    assert b"term=xterm-256color nocolor=unset" in output
    assert b"/dev/pts/" in output


async def test_an_unusable_terminals_folder_is_a_clear_error(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    config = DaemonConfig(auth_token="t", workspace=tmp_path, terminals_folder=not_a_folder)
    daemon = Daemon(config)
    manager = daemon.service(PtyManager)
    with pytest.raises(CodedError, match="could not set up the terminal file") as caught:
        manager.create(command="sleep 30")
    assert caught.value.code == "io_error"
    assert manager.list() == []
    await daemon.aclose()
