"""The daemon's X display: its own Xvfb (at boot with the flags) or $DISPLAY; none without them.

Shells and terminals must see the display in DISPLAY; the daemon's own Xvfb ends with it, a
display it was given is left alone; an Xvfb that died is replaced on the next call.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets
from PIL import Image

from agent.v1.computer_pb2 import (
    ComputerUseAction,
    Coordinate,
    CursorPositionAction,
    MouseMoveAction,
    ScreenshotAction,
)
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.state import Daemon
from tests.daemon_process import RunningDaemon, running_daemon
from tests.x11_support import computer_use, pid_alive, wait_until, x_server, xvfb_of
from tools.display import DisplayService, _wait_answering, x_lock, x_socket

pytestmark = pytest.mark.timeout(60)

COMPUTER_USE = ("--computer-use-enabled", "--screenshot-delay-ms", "0")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


async def terminal_output(daemon: RunningDaemon, command: str) -> str:
    """What a new PTY terminal running `command` printed."""
    url = f"ws://127.0.0.1:{daemon.pty_port}/terminals/new?command={command}&token={daemon.token}"
    output = b""
    async with websockets.connect(url) as ws:
        try:
            while True:
                message = await asyncio.wait_for(ws.recv(), 10)
                if isinstance(message, bytes):
                    output += message
        except websockets.ConnectionClosed:
            pass
    return output.decode(errors="replace")


def lock_exists(number: str) -> bool:
    return x_lock(int(number)).exists()


def remove_lock(number: int) -> None:
    x_lock(number).unlink(missing_ok=True)
    x_socket(number).unlink(missing_ok=True)


def display_facts(name: str) -> str:
    return subprocess.run(
        ["xdpyinfo", "-display", name], capture_output=True, text=True, check=True, timeout=10
    ).stdout


def pointer_on(name: str) -> tuple[int, int]:
    # xdotool rather than python-xlib in this process: python-xlib's per-process extension
    # tables break when one process talks to servers with different extensions (Xvfb, then
    # Xtigervnc).
    shown = subprocess.run(
        ["xdotool", "getmouselocation", "--shell"],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
        env={**os.environ, "DISPLAY": name},
    ).stdout
    values = dict(line.split("=", 1) for line in shown.split())
    return int(values["X"]), int(values["Y"])


def move_and_look(x: int, y: int) -> tuple[ComputerUseAction, ...]:
    return (
        ComputerUseAction(mouse_move=MouseMoveAction(coordinate=Coordinate(x=x, y=y))),
        ComputerUseAction(cursor_position=CursorPositionAction()),
        ComputerUseAction(screenshot=ScreenshotAction()),
    )


async def test_with_computer_use_enabled_the_daemon_starts_xvfb_and_ends_it(
    workspace: Path, tmp_path: Path
) -> None:
    with running_daemon(workspace, tmp_path / "state", "--computer-use-enabled") as daemon:
        found = xvfb_of(daemon)  # there before any call
        assert found, daemon.log()
        name, pid = found
        number = name[1:]
        assert lock_exists(number) and name != ":0"
        facts = display_facts(name)
        assert "dimensions:    1920x1200 pixels" in facts
        assert "resolution:    96x96 dots per inch" in facts
        assert "depth of root window:    24 planes" in facts
        assert f"DISPLAY={name}\r\n" in await terminal_output(daemon, "echo+DISPLAY=$DISPLAY")
        assert daemon.stop() == 0
    assert not pid_alive(pid)
    wait_until(lambda: not lock_exists(number), 5, "the lock file to go")


async def test_without_the_flag_computer_use_says_so_and_starts_no_display(
    workspace: Path, tmp_path: Path
) -> None:
    with running_daemon(workspace, tmp_path / "state", "--screenshot-delay-ms", "0") as daemon:
        async with daemon.client() as client:
            result = await computer_use(client, *move_and_look(200, 100))
        assert result.WhichOneof("result") == "error", result
        assert result.error.code == "unavailable"
        assert "without --computer-use-enabled" in result.error.message
        assert xvfb_of(daemon) is None


# X servers a test starts itself, at 1280x800 (no scaling). Xtigervnc is the VM image's display;
# it lists depth 24 twice, which mss's XCB grabber refuses (tools/x11.py falls back to Xlib).
OWN_SERVERS = {
    "Xvfb": ["Xvfb", "-screen", "0", "1280x800x24"],
    "Xtigervnc": ["Xtigervnc", "-geometry", "1280x800", "-depth", "24", "-rfbport", "-1"],
}


@pytest.fixture(params=sorted(OWN_SERVERS))
def own_xvfb(request: pytest.FixtureRequest) -> Iterator[str]:
    """An X server the test starts, given to the daemon as $DISPLAY."""
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        [*OWN_SERVERS[request.param], "-displayfd", str(write_end), "-nolisten", "tcp"],
        pass_fds=(write_end,),
        stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    with os.fdopen(read_end) as reader:
        number = reader.readline().strip()
    try:
        assert number, f"the test's {request.param} did not start"
        yield f":{number}"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(5)


async def test_a_reachable_display_is_used_as_is_and_left_running(
    workspace: Path, tmp_path: Path, own_xvfb: str
) -> None:
    env = {"DISPLAY": own_xvfb}
    with running_daemon(workspace, tmp_path / "state", *COMPUTER_USE, env=env) as daemon:
        async with daemon.client() as client:
            result = await computer_use(client, *move_and_look(100, 700))
        assert result.WhichOneof("result") == "success", result
        assert xvfb_of(daemon) is None
        # 1280x800 in API space is 1280x800 on this display: no scaling either way.
        assert pointer_on(own_xvfb) == (100, 700)
        position = result.success.cursor_position
        assert (position.x, position.y) == (100, 700)
        assert Image.open(io.BytesIO(result.success.screenshot)).size == (1280, 800)
        assert daemon.stop() == 0
    assert "1280x800 pixels" in display_facts(own_xvfb)  # still there


async def test_an_unreachable_display_is_replaced_by_an_own_xvfb(
    workspace: Path, tmp_path: Path
) -> None:
    env = {"DISPLAY": ":4095"}  # nothing listens there
    with running_daemon(workspace, tmp_path / "state", *COMPUTER_USE, env=env) as daemon:
        async with daemon.client() as client:
            result = await computer_use(client, *move_and_look(10, 10))
        assert result.WhichOneof("result") == "success", result
        found = xvfb_of(daemon)
        assert found is not None and found[0] != ":4095"
        assert f"DISPLAY={found[0]}\r\n" in await terminal_output(daemon, "echo+DISPLAY=$DISPLAY")


async def test_an_xvfb_that_died_is_replaced_on_the_next_call(
    workspace: Path, tmp_path: Path
) -> None:
    with running_daemon(workspace, tmp_path / "state", *COMPUTER_USE) as daemon:
        async with daemon.client() as client:
            assert (await computer_use(client, *move_and_look(1, 1))).WhichOneof("result") == (
                "success"
            )
            found = xvfb_of(daemon)
            assert found is not None
            os.kill(found[1], signal.SIGKILL)
            wait_until(lambda: xvfb_of(daemon) is None, 5, "Xvfb to die")
            # The call that meets the dead display may fail (typed); the next one works again.
            first = await computer_use(client, *move_and_look(2, 2))
            if first.WhichOneof("result") == "error":
                assert first.error.code == "display_error", first
            again = await computer_use(client, *move_and_look(3, 3))
            assert again.WhichOneof("result") == "success", again
            replaced = xvfb_of(daemon)
            assert replaced is not None and replaced[1] != found[1]
            # The killed one's lock went with it (it could not remove it itself).
            assert not lock_exists(found[0][1:]) or replaced[0] == found[0]


async def test_an_xvfb_that_loses_its_number_to_another_server_is_not_taken_for_it(
    tmp_path: Path,
) -> None:
    """Two daemons choosing a number at once both start an Xvfb on it; the loser's exits
    ("already active") while the winner answers on that display. The loser must move on to
    another number, not take the winner's server for its own (once it did, and its calls failed
    with "lost the connection" when the other daemon ended)."""
    daemon = Daemon(DaemonConfig(auth_token="t", workspace=tmp_path))
    displays = daemon.service(DisplayService)
    xvfb = shutil.which("Xvfb")
    assert xvfb is not None
    with x_server(lambda n: ["Xvfb", f":{n}", "-nolisten", "tcp"], range(300, 400)) as taken:
        try:
            started = await displays._launch_xvfb(xvfb, taken)
            assert started is None, f"took the other server on :{taken} for its own: {started}"
        finally:
            await daemon.aclose()


async def test_a_display_answering_for_another_servers_lock_is_not_ours(tmp_path: Path) -> None:
    """The same, without the timing: while an Xvfb of ours (here any live process) does not hold
    the number's lock, the server answering there is somebody else's."""
    with x_server(lambda n: ["Xvfb", f":{n}", "-nolisten", "tcp"], range(300, 400)) as taken:
        ours = await asyncio.create_subprocess_exec("sleep", "30")
        asyncio.get_running_loop().call_later(1.0, ours.kill)
        try:
            assert await _wait_answering(ours, taken) is None
        finally:
            await ours.wait()


async def test_a_server_that_takes_a_dead_xvfbs_number_is_not_used_as_the_daemons(
    workspace: Path, tmp_path: Path
) -> None:
    with running_daemon(workspace, tmp_path / "state", *COMPUTER_USE) as daemon:
        async with daemon.client() as client:
            first = await computer_use(client, *move_and_look(1, 1))
            assert first.WhichOneof("result") == "success", first
            found = xvfb_of(daemon)
            assert found is not None
            name, pid = found
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not pid_alive(pid), 5, "Xvfb to die")
            number = int(name[1:])
            remove_lock(number)  # killed, it left it: another X server may take the number
            other = ["Xvfb", f":{number}", "-nolisten", "tcp"]
            with x_server(lambda _n: other, range(number, number + 1)):
                results = [await computer_use(client, *move_and_look(3, 3)) for _ in range(2)]
                # The call that meets the dead display may fail (typed); the next one works.
                assert results[-1].WhichOneof("result") == "success", results
                replaced = xvfb_of(daemon)
                assert replaced is not None and replaced[0] != name, replaced
