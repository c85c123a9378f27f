"""tools/shell/foreground.py: how a call's output is batched into deltas, with real bash.

Each test runs a real command in a session bash or a one-shot bash (the two ways a shell call
runs) and collects what the call emits. The batch interval is raised to HOLD_SECONDS, so a
delta held for the interval instead of going out at once shows as a deadline missed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent.v1.tool_call_pb2 import ToolCallDelta
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.processes import UNCONFINED
from exec_daemon.kernel.state import Daemon
from tests.polling import eventually
from tools.shell import foreground
from tools.shell.bash_scripts import SESSION_LOOP, SESSION_LOOP_NAME
from tools.shell.foreground import DELTA_BYTES, ForegroundCall
from tools.shell.jobs import OneShotSpec, start_one_shot
from tools.shell.output import OutputCapture
from tools.shell.results import Ending
from tools.shell.session import ExitStatus, ShellSession

HOLD_SECONDS = 30.0
DEADLINE_SECONDS = 10.0


def gate(name: str) -> str:
    """bash that waits until the test creates the file `name` in the working directory."""
    return f"until [ -e {name} ]; do sleep 0.01; done"


@dataclass
class Streamed:
    """What one call emitted, as (stream, text) deltas in order."""

    deltas: list[tuple[str, str]] = field(default_factory=list)

    async def emit(self, delta: ToolCallDelta) -> None:
        shell = delta.shell_tool_call_delta
        stream = str(shell.WhichOneof("delta"))
        self.deltas.append((stream, getattr(shell, stream)))

    def text(self, stream: str = "stdout") -> str:
        return "".join(text for name, text in self.deltas if name == stream)


Run = Callable[[str, float], Coroutine[Any, Any, tuple[Ending, ExitStatus | None]]]


@dataclass
class Harness:
    workspace: Path
    streamed: Streamed
    call: ForegroundCall
    run: Run

    def open_gate(self, name: str) -> None:
        (self.workspace / name).touch()


@pytest.fixture(autouse=True)
def long_batch_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(foreground, "FLUSH_SECONDS", HOLD_SECONDS)


def spawn_task(coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    return asyncio.get_running_loop().create_task(coro)


@asynccontextmanager
async def in_session(workspace: Path, call: ForegroundCall) -> AsyncIterator[Run]:
    runtime = workspace / ".runtime"
    runtime.mkdir()
    (runtime / SESSION_LOOP_NAME).write_text(SESSION_LOOP)
    session = ShellSession(1, "agent", runtime / "session-1", UNCONFINED)
    await session.start(str(workspace), str(workspace), dict(os.environ), "", None)

    async def run(command: str, timeout_s: float) -> tuple[Ending, ExitStatus | None]:
        done = await session.submit(command, "", call.sink, "")
        return await call.run(session, done, timeout_s)

    try:
        yield run
    finally:
        await session.close(grace=0.2)


@asynccontextmanager
async def in_one_shot(workspace: Path, call: ForegroundCall) -> AsyncIterator[Run]:
    watchers: list[asyncio.Task[None]] = []

    async def run(command: str, timeout_s: float) -> tuple[Ending, ExitStatus | None]:
        spec = OneShotSpec(1, "agent", command, str(workspace), dict(os.environ), None,
                           workspace, UNCONFINED)  # fmt: skip
        job = await start_one_shot(spec, call.sink)
        watchers.append(spawn_task(job.watch()))
        assert job.done is not None
        return await call.run(job, job.done, timeout_s)

    try:
        yield run
    finally:
        await asyncio.gather(*watchers)


@pytest.fixture(params=["session", "one_shot"])
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    streamed = Streamed()
    ctx = CallContext(daemon=Daemon(DaemonConfig(auth_token="t", workspace=tmp_path)))
    capture = OutputCapture(0, lambda: tmp_path / "spill.txt")
    call = ForegroundCall(ctx.with_emit(streamed.emit), capture, spawn_task)
    runner = in_session if request.param == "session" else in_one_shot
    async with runner(tmp_path, call) as run:
        yield Harness(tmp_path, streamed, call, run)


async def test_the_first_output_goes_out_at_once(harness: Harness) -> None:
    running = spawn_task(harness.run(f"echo first; {gate('go')}", HOLD_SECONDS * 2))
    await eventually(lambda: harness.streamed.deltas, DEADLINE_SECONDS, "the first delta")
    assert not running.done()
    harness.open_gate("go")
    ending, status = await asyncio.wait_for(running, DEADLINE_SECONDS)
    assert (ending, status and status.exit_code) == ("exited", 0)
    assert harness.streamed.deltas == [("stdout", "first\n")]


async def test_the_first_output_on_stderr_goes_out_at_once(harness: Harness) -> None:
    running = spawn_task(harness.run(f"echo oops >&2; {gate('go')}", HOLD_SECONDS * 2))
    await eventually(lambda: harness.streamed.deltas, DEADLINE_SECONDS, "the first delta")
    harness.open_gate("go")
    await asyncio.wait_for(running, DEADLINE_SECONDS)
    assert harness.streamed.deltas == [("stderr", "oops\n")]


async def test_held_output_goes_out_when_the_command_ends(harness: Harness) -> None:
    """Later output is batched (one delta for two reads), but never held past the end."""
    command = f"echo first; {gate('go')}; echo second; sleep 0.05; echo third"
    running = spawn_task(harness.run(command, HOLD_SECONDS * 2))
    await eventually(lambda: harness.streamed.deltas, DEADLINE_SECONDS, "the first delta")
    harness.open_gate("go")
    ending, status = await asyncio.wait_for(running, DEADLINE_SECONDS)
    assert (ending, status and status.exit_code) == ("exited", 0)
    assert harness.streamed.deltas == [("stdout", "first\n"), ("stdout", "second\nthird\n")]
    assert harness.call.capture.finish().stdout == "first\nsecond\nthird\n"


async def test_a_full_delta_goes_out_while_the_command_runs(harness: Harness) -> None:
    size = DELTA_BYTES + 100_000
    command = (
        f"echo first; {gate('go')}; head -c {size} /dev/zero | tr '\\0' x; "
        f"{gate('end')}; echo; echo last"
    )
    running = spawn_task(harness.run(command, HOLD_SECONDS * 2))
    await eventually(lambda: harness.streamed.deltas, DEADLINE_SECONDS, "the first delta")
    harness.open_gate("go")
    await eventually(
        lambda: len(harness.streamed.text()) >= len("first\n") + DELTA_BYTES,
        DEADLINE_SECONDS,
        "a full delta while the command still runs",
    )
    assert not running.done()
    harness.open_gate("end")
    await asyncio.wait_for(running, DEADLINE_SECONDS)
    assert harness.streamed.text() == "first\n" + "x" * size + "\nlast\n"
    assert all(len(text) <= DELTA_BYTES for _stream, text in harness.streamed.deltas)


async def test_output_held_when_the_call_times_out_is_still_sent(harness: Harness) -> None:
    command = f"echo first; {gate('go')}; echo second; touch printed; sleep 100"
    running = spawn_task(harness.run(command, 3.0))
    await eventually(lambda: harness.streamed.deltas, DEADLINE_SECONDS, "the first delta")
    harness.open_gate("go")
    await eventually(lambda: (harness.workspace / "printed").exists(), DEADLINE_SECONDS)
    ending, _status = await asyncio.wait_for(running, DEADLINE_SECONDS)
    assert ending == "timeout"
    assert harness.streamed.text() == "first\nsecond\n"
