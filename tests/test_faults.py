"""Faults and load against the real daemon: clients that stop reading over HTTP/2, kill -9.

A client that grants no flow-control window must hold the command, not grow the daemon: its
output stays in the pipe (the command blocks on write), the daemon's memory stays within
`STALLED_CLIENT_BYTES` of idle, other clients are still served, and the command finishes when
the client reads again or ends when it goes away.

A daemon killed (kill -9) mid-write leaves its temp file; the next daemon removes it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon_process import RunningDaemon, running_daemon
from tests.faults_support import (
    DiffTrial,
    descendants,
    end_processes,
    kill_mid_apply,
    kill_mid_write,
    temp_files,
)
from tests.interop import assert_still_serving, daemon_for_module
from tests.polling import eventually
from tests.sandbox_harness import processes_with_argument
from tests.stalled_h2 import (
    CONTROL_EXEC,
    EXEC_STREAM,
    OutputHeld,
    StalledH2Call,
    exec_body,
    rss_bytes,
    shell_call,
)

# README: the daemon's memory under a stalled client, above idle, whatever the output size.
STALLED_CLIENT_BYTES = 64 << 20
OUTPUT_BYTES = 100_000_000
# Polls (tests/polling.py: 20 ms apart) the command must write nothing in to count as held.
STILL_POLLS = 50


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with daemon_for_module(tmp_path_factory) as running:
        yield running


async def _stall(daemon: RunningDaemon, path: str) -> tuple[StalledH2Call, str, Path, int]:
    """Starts a command printing OUTPUT_BYTES for a client that stops reading; returns once
    the command is blocked, with the daemon's peak RSS above idle until then."""
    await assert_still_serving(daemon)
    idle = rss_bytes(daemon.process.pid)
    marker = f"stalled-{secrets.token_hex(6)}"
    finished = daemon.workspace / f"{marker}.done"
    command = f"yes {marker} | head -c {OUTPUT_BYTES}; touch {finished}"
    call = StalledH2Call(daemon.port, daemon.token, path, exec_body(path, shell_call(command)))
    peak = idle
    output = OutputHeld(marker, STILL_POLLS)

    def held() -> bool:
        """The command wrote nothing more for STILL_POLLS polls in a row, or it finished."""
        nonlocal peak
        peak = max(peak, rss_bytes(daemon.process.pid))
        return output.poll() or finished.exists()

    await eventually(held, 60, "the command blocked on its output, or finished")
    return call, marker, finished, peak - idle


async def test_a_stalled_h2_exec_stream_blocks_the_command_until_the_client_reads(
    daemon: RunningDaemon,
) -> None:
    call, _marker, finished, grown = await _stall(daemon, EXEC_STREAM)
    try:
        assert not finished.exists(), "the command ran to its end for a client that read nothing"
        assert grown <= STALLED_CLIENT_BYTES, f"the daemon grew by {grown >> 20} MiB"
        assert call.received <= 1 << 16
        await assert_still_serving(daemon)

        call.resume()
        await eventually(call.ended.is_set, 120, "the whole answer")
        assert finished.exists()
        answers = [m for m in call.messages() if m.HasField("tool_call_result")]
        assert len(answers) == 1
        success = answers[0].tool_call_result.shell_tool_call.result.success
        assert success.exit_code == 0
        assert call.received > OUTPUT_BYTES
    finally:
        call.close()


@pytest.mark.parametrize(
    ("path", "leave"),
    [(CONTROL_EXEC, "disconnect"), (EXEC_STREAM, "reset")],
    ids=["control-exec-disconnect", "exec-stream-reset"],
)
async def test_a_stalled_h2_call_ends_its_command_when_the_client_goes(
    daemon: RunningDaemon, path: str, leave: str
) -> None:
    call, marker, finished, grown = await _stall(daemon, path)
    try:
        assert not finished.exists(), "the command ran to its end for a client that read nothing"
        assert grown <= STALLED_CLIENT_BYTES, f"the daemon grew by {grown >> 20} MiB"
        await assert_still_serving(daemon)
        if leave == "reset":
            call.reset()  # RST_STREAM: the call is cancelled, the connection stays
            await eventually(lambda: not processes_with_argument(marker), 20, "the command ended")
    finally:
        call.close()
    await eventually(lambda: not processes_with_argument(marker), 20, "the command ended")
    assert not finished.exists()
    await assert_still_serving(daemon)


# kill -9 mid-write: what the killed daemon left in the folder it wrote in.

BIG_EDIT = "n" * (31 << 20)
KILL_TRIALS = 8


def test_a_write_killed_midway_leaves_no_temp_file_once_the_daemon_restarted(
    tmp_path: Path,
) -> None:
    workspace, state = tmp_path / "workspace", tmp_path / "state"
    docs = workspace / "docs"
    docs.mkdir(parents=True)
    big = docs / "big.txt"
    big.write_text("old\n")
    for _ in range(KILL_TRIALS):
        with running_daemon(workspace, state) as daemon:
            world = descendants(daemon.process.pid)
            try:
                landed = kill_mid_write(daemon, "docs/big.txt", BIG_EDIT)
            finally:
                end_processes(world)
        if landed:
            break
    assert landed, f"no kill landed mid-write in {KILL_TRIALS} trials"
    assert temp_files(docs), "the kill left no temp file: the trial proves nothing"

    with running_daemon(workspace, state) as daemon:
        assert temp_files(docs) == []
        assert big.read_text() in ("old\n", BIG_EDIT)
        assert "temp files left by a killed daemon" in daemon.log()


# kill -9 mid apply_agent_diff: all or none, across the kill.


def test_an_apply_killed_midway_is_undone_whole_by_the_next_daemon(tmp_path: Path) -> None:
    workspace, state = tmp_path / "workspace", tmp_path / "state"
    workspace.mkdir()
    trial = DiffTrial(workspace, files=40, file_bytes=1 << 20)
    for _ in range(KILL_TRIALS):
        trial.reset()
        with running_daemon(workspace, state) as daemon:
            world = descendants(daemon.process.pid)
            try:
                torn = kill_mid_apply(daemon, trial)
            finally:
                end_processes(world)
        if torn:
            break
    assert torn, f"no kill landed mid-apply in {KILL_TRIALS} trials"

    with running_daemon(workspace, state) as daemon:
        assert trial.applied() == [False] * (trial.files + 2)
        assert (workspace / "gone.txt").read_text() == "bye\n"
        assert all((workspace / n).read_text() == trial.old_text(n) for n in trial.names())
        assert "apply_agent_diff a killed daemon left half done" in daemon.log()
        # No temp file, no moved-aside copy of the deleted file: only the files of before.
        assert sorted(os.listdir(workspace)) == sorted([*trial.names(), "gone.txt"])
