"""After the VM is restored from a snapshot (SIGUSR2, sent by scripts/image/pod-daemon's
Resumed): the daemon's own randomness is seeded again (exec_daemon/kernel/reseed.py), and every
client connection, RPC and PTY, is closed so that clients reconnect (server.py's `Restored`)."""

from __future__ import annotations

import asyncio
import json
import random
import re
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from exec_daemon.client import StreamEndedError
from exec_daemon.kernel.reseed import reseed_process_randomness
from tests.daemon_process import RunningDaemon, running_daemon
from tests.guards_support import shell
from tests.polling import generous, wait_until

# Bounds a hang: closing takes a moment, a client's end of it a little more.
ENDED_WITHIN = 20
DRAW = re.compile(r"random reseeded \(a draw: ([0-9a-f]{16})\)")

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("restored")
    (root / "workspace").mkdir()
    with running_daemon(root / "workspace", root / "state") as running:
        yield running


def draws_after_restores(reseed: bool) -> tuple[list[int], list[str]]:
    """Two "restores" of one memory image (the same `random` and temp-name state), each drawing
    what a span id and a temp file's name would."""
    snapshot = random.getstate()
    names = tempfile._get_candidate_names()  # type: ignore[attr-defined]
    names_snapshot = names.rng.getstate()
    ids, temp_names = [], []
    for _restore in range(2):
        random.setstate(snapshot)
        tempfile._name_sequence = names  # type: ignore[attr-defined]
        names.rng.setstate(names_snapshot)
        if reseed:
            reseed_process_randomness()
        ids.append(random.getrandbits(64))
        temp_names.append(next(tempfile._get_candidate_names()))  # type: ignore[attr-defined]
    return ids, temp_names


def test_two_restores_of_one_state_draw_apart_once_reseeded() -> None:
    ids, temp_names = draws_after_restores(reseed=False)
    # The control: the same memory draws the same ids and names.
    assert ids[0] == ids[1] and temp_names[0] == temp_names[1]
    ids, temp_names = draws_after_restores(reseed=True)
    assert ids[0] != ids[1] and temp_names[0] != temp_names[1]


async def test_a_restore_ends_held_connections_and_new_ones_work(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    async with daemon.client() as client, client.exec_stream() as stream:
        held = await stream.start(shell(f"touch {started}; sleep 60"))
        await asyncio.to_thread(wait_until, started.exists, what="the held call's shell")
        url = f"ws://127.0.0.1:{daemon.pty_port}/terminals/new?name=held&token={daemon.token}"
        async with websockets.connect(url) as terminal:
            attached = json.loads(await asyncio.wait_for(terminal.recv(), generous(20)))
            daemon.process.send_signal(signal.SIGUSR2)
            with pytest.raises(StreamEndedError, match="before call 1 answered"):
                await asyncio.wait_for(held.wait(), generous(ENDED_WITHIN))
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(terminal.recv(), generous(ENDED_WITHIN))
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
        assert "restored from a snapshot" in closed.value.rcvd.reason
        # The same client reconnects: a new stream and a call on it are answered.
        async with client.exec_stream() as again:
            outcome = await asyncio.wait_for(
                (await again.start(shell("echo after-restore"))).wait(), generous(30)
            )
        assert outcome.result is not None
        assert outcome.result.shell_tool_call.result.success.stdout.strip() == "after-restore"
    # The terminal lives on: attached to again by its id.
    url = f"ws://127.0.0.1:{daemon.pty_port}/terminals/{attached['id']}?token={daemon.token}"
    async with websockets.connect(url) as terminal:
        assert (
            json.loads(await asyncio.wait_for(terminal.recv(), generous(20)))["type"] == "attached"
        )
    log = await asyncio.to_thread(
        wait_until, lambda: re.search(r"closed \d+ RPC and 1 PTY connections", daemon.log())
    )
    assert log is not None and DRAW.search(daemon.log())
