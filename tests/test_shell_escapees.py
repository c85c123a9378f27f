"""Without the sandbox, processes that leave their call's session (setsid, setsid -f, a double
fork, nohup + disown) still end with the call's timeout or abort and with the daemon's SIGTERM
(exec_daemon/kernel/call_marks.py); background calls outlive their call but not the daemon."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.v1.shell_pb2 import ShellArgs, ShellToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon, running_daemon
from tests.polling import generous
from tests.sandbox_harness import processes_with_argument
from tests.shell_calls import shell

_serial = itertools.count(1)

# Each leaves the call's session or process group in its own way; {m} is a unique sleep length.
ESCAPES = {
    "setsid &": "setsid sleep {m} </dev/null >/dev/null 2>&1 &",
    "setsid -f": "setsid -f sleep {m} </dev/null >/dev/null 2>&1",
    "nohup & disown": "nohup sleep {m} </dev/null >/dev/null 2>&1 & disown",
    "double fork": "(setsid bash -c 'sleep {m} & exit' </dev/null >/dev/null 2>&1 &)",
}


def unique_length() -> str:
    """A sleep length no other process uses: how the test finds the escapee."""
    return f"{9000 + os.getpid() % 1000}.{next(_serial)}{time.monotonic_ns() % 1000}"


async def until_gone(marker: str, seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + generous(seconds)
    while (left := processes_with_argument(marker)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return left


async def until_started(marker: str, seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + generous(seconds)
    while not (found := processes_with_argument(marker)) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return found


@pytest.fixture(scope="module")
def plain_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("escapees")
    (root / "workspace").mkdir()
    with running_daemon(root / "workspace", root / "state") as daemon:
        yield daemon


@pytest.fixture
async def client(plain_daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with plain_daemon.client() as connected:
        yield connected


@pytest.mark.parametrize("one_shot", [False, True], ids=["session", "one-shot"])
@pytest.mark.parametrize("escape", list(ESCAPES))
async def test_a_timeout_ends_what_left_the_session(
    client: ExecDaemonClient, escape: str, one_shot: bool
) -> None:
    marker = unique_length()
    command = ESCAPES[escape].format(m=marker) + "\nsleep 1000"
    kwargs: dict[str, Any] = {"is_interactive": True} if one_shot else {}
    agent = f"timeout-{escape}-{one_shot}"
    call = asyncio.create_task(shell(client, command, agent, timeout=1500, **kwargs))
    # Seen running: its absence afterwards is the timeout's doing, not a start that never came.
    started = await until_started(marker)
    result = await call
    assert started, f"{escape}: the escapee never started"
    assert result.WhichOneof("result") == "timeout", result
    assert await until_gone(marker) == [], escape


async def test_an_abort_ends_what_left_the_session(client: ExecDaemonClient) -> None:
    marker = unique_length()
    command = ESCAPES["setsid -f"].format(m=marker) + "\nsleep 1000"
    call = ToolCall(shell_tool_call=ShellToolCall(args=ShellArgs(command=command)))
    async with client.exec_stream() as stream:
        handle = await stream.start(call, agent_id="abort")
        assert await until_started(marker)
        await stream.abort(handle.id)
        await handle.wait()
    assert await until_gone(marker) == []


async def test_an_ended_call_leaves_its_background_processes(client: ExecDaemonClient) -> None:
    """The contract of `cmd &`: a call that ended normally does not take them along."""
    marker = unique_length()
    result = await shell(client, ESCAPES["setsid -f"].format(m=marker), "keeps")
    assert result.WhichOneof("result") == "success", result
    left = await until_started(marker)
    assert left
    for pid in left:
        os.kill(pid, 9)


async def test_sigterm_ends_every_escapee_and_background_call(
    workspace: Path, tmp_path: Path
) -> None:
    markers: dict[str, str] = {}
    with running_daemon(workspace, tmp_path / "state") as daemon:
        async with daemon.client() as client:
            for escape, template in ESCAPES.items():
                markers[escape] = marker = unique_length()
                result = await shell(client, template.format(m=marker), f"term-{escape}")
                assert result.WhichOneof("result") == "success", result
            markers["background call"] = marker = unique_length()
            background = await shell(
                client, f"sleep {marker}", "term-background", is_background=True
            )
            assert background.is_background and background.shell_id, background
            for escape, marker in markers.items():
                # Alive after their call ended: only the daemon's end may take them.
                assert await until_started(marker), escape
        assert daemon.stop() == 0
    for escape, marker in markers.items():
        assert await until_gone(marker) == [], escape
