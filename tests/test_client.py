"""The Python client (exec_daemon/client.py) against a real daemon that goes away."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from connectrpc.errors import ConnectError

from exec_daemon.client import StreamEndedError
from tests.daemon_process import running_daemon
from tests.guards_support import shell

# Bounds a hang: the daemon's own shutdown takes a few seconds at most.
ANSWER_DEADLINE = 20


async def wait_until_running(marker: Path) -> None:
    """The `sleep 30` call is pending once its shell has written the marker."""
    deadline = asyncio.get_running_loop().time() + ANSWER_DEADLINE
    while not await asyncio.to_thread(marker.exists):
        assert asyncio.get_running_loop().time() < deadline, "the call never started"
        await asyncio.sleep(0.05)


async def test_pending_calls_fail_clearly_when_the_daemon_stops(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    on_stream, on_exec = tmp_path / "stream-started", tmp_path / "exec-started"
    with running_daemon(workspace, tmp_path / "state") as daemon:
        async with daemon.client() as client, client.exec_stream() as stream:
            pending = await stream.start(shell(f"touch {on_stream}; sleep 30"), agent_id="a")
            # The same over ControlService.Exec, a server stream per call.
            exec_call = asyncio.create_task(
                client.run(shell(f"touch {on_exec}; sleep 30"), agent_id="b")
            )
            await wait_until_running(on_stream)
            await wait_until_running(on_exec)
            assert await asyncio.to_thread(daemon.stop, signal.SIGTERM) == 0
            with pytest.raises(StreamEndedError, match="call 1 answered: the daemon is shutting"):
                await asyncio.wait_for(pending.wait(), ANSWER_DEADLINE)
            # Asking again fails the same way instead of waiting for ever.
            with pytest.raises(StreamEndedError):
                await asyncio.wait_for(pending.wait(), ANSWER_DEADLINE)
            with pytest.raises(ConnectError, match="shutting down"):
                await asyncio.wait_for(exec_call, ANSWER_DEADLINE)
            # A call started on the ended stream fails at once.
            late = await stream.start(shell("true"))
            with pytest.raises(StreamEndedError, match="had ended"):
                await asyncio.wait_for(late.wait(), ANSWER_DEADLINE)
