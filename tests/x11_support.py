"""Helpers for the tests that drive a real X display through the daemon (computer use, recording)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent.v1.computer_pb2 import (
    ComputerUseAction,
    ComputerUseArgs,
    ComputerUseResult,
    ComputerUseToolCall,
    RecordingMode,
    RecordScreenArgs,
    RecordScreenResult,
    RecordScreenToolCall,
)
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon
from tests.polling import WAIT_SECONDS, wait_until
from tools.display import display_number_taken, x_lock_holder, x_socket

APP = Path(__file__).with_name("x11_app.py")
Event = dict[str, Any]


def parent_pid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def xvfb_of(daemon: RunningDaemon) -> tuple[str, int] | None:
    """(display name, pid) of the Xvfb the daemon started, found through its /tmp/.X<n>-lock."""
    for lock in Path("/tmp").glob(".X*-lock"):
        try:
            pid = int(lock.read_text().strip())
        except (OSError, ValueError):
            continue
        if parent_pid(pid) == daemon.process.pid:
            return f":{lock.name[2:-5]}", pid
    return None


@contextmanager
def x_server(command: Callable[[int], list[str]], numbers: range) -> Iterator[int]:
    """An X server a test starts, `command(number)`, on the first display number in `numbers` it
    wins; ends with the block.

    Looking for a number without a /tmp/.X<n>-lock and starting the server there races with
    every other test process doing the same (pytest-xdist's workers, another checkout's suite):
    the loser exits ("server already active") while the winner's socket appears, so the server
    is only ours once the lock holds its pid; the loser tries the next number.
    """
    for number in numbers:
        if display_number_taken(number):
            continue
        server = subprocess.Popen(
            command(number), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            if _serves(server, number):
                yield number
                return
        finally:
            server.terminate()
            server.wait(10)
    raise AssertionError(f"no X server started on any of the displays {numbers}")


def _serves(server: subprocess.Popen[bytes], number: int) -> bool:
    """Whether `server` took display `number` (False: it exited, the number was another's)."""
    wait_until(
        lambda: (
            server.poll() is not None
            or (x_lock_holder(number) == server.pid and x_socket(number).is_socket())
        ),
        WAIT_SECONDS,
        f"X server :{number} up or gone",
    )
    return server.poll() is None


def pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def computer_use_call(*actions: ComputerUseAction) -> ToolCall:
    return ToolCall(
        computer_use_tool_call=ComputerUseToolCall(args=ComputerUseArgs(actions=actions))
    )


async def computer_use(client: ExecDaemonClient, *actions: ComputerUseAction) -> ComputerUseResult:
    outcome = await client.run(computer_use_call(*actions))
    assert outcome.error is None and outcome.result is not None, outcome.error
    return outcome.result.computer_use_tool_call.result


async def record_screen(
    client: ExecDaemonClient, mode: RecordingMode.ValueType, save_as: str = ""
) -> RecordScreenResult:
    call = ToolCall(
        record_screen_tool_call=RecordScreenToolCall(
            args=RecordScreenArgs(mode=mode, save_as_filename=save_as)
        )
    )
    outcome = await client.run(call)
    assert outcome.error is None and outcome.result is not None, outcome.error
    return outcome.result.record_screen_tool_call.result


class X11App:
    """tests/x11_app.py running on a display; its events read back from its file."""

    def __init__(self, process: subprocess.Popen[bytes], events_path: Path) -> None:
        self.process = process
        self.events_path = events_path

    def events(self, kind: str | None = None) -> list[Event]:
        lines = self.events_path.read_text().splitlines()
        events = [json.loads(line) for line in lines if line.endswith("}")]
        return [event for event in events if kind is None or event["event"] == kind]

    def clear(self) -> None:
        self.events_path.write_text("")

    def wait_for(self, kind: str, count: int = 1, timeout: float = WAIT_SECONDS) -> list[Event]:
        found: list[Event] = wait_until(
            lambda: len(self.events(kind)) >= count and self.events(kind),
            timeout,
            f"{count} {kind} event(s); got {self.events()}",
        )
        return found

    def last_text(self) -> str:
        texts = self.events("text")
        return str(texts[-1]["value"]) if texts else ""


@contextmanager
def x11_app(display: str, folder: Path, app: Path = APP) -> Iterator[X11App]:
    events_path = folder / f"events-{time.monotonic_ns()}.jsonl"
    events_path.touch()
    process = subprocess.Popen(
        [sys.executable, str(app), str(events_path)],
        env={**os.environ, "DISPLAY": display},
        stderr=subprocess.PIPE,
    )
    app = X11App(process, events_path)
    try:
        try:
            app.wait_for("ready", timeout=15)
        except AssertionError:
            process.kill()
            raise AssertionError(process.communicate()[1].decode(errors="replace")) from None
        app.clear()
        yield app
    finally:
        process.kill()
        process.wait()
