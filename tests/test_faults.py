"""Faults and load against the real daemon: clients that stop reading over HTTP/2, kill -9.

A client that grants no flow-control window must hold the command, not grow the daemon: its
output stays in the pipe (the command blocks on write), the daemon's memory stays within
`STALLED_CLIENT_BYTES` of idle, other clients are still served, and the command finishes when
the client reads again or ends when it goes away.

A daemon killed (kill -9) mid-write leaves its temp file; the next daemon removes it. Killed
with a shared terminal, jobs and a process that left its session running, it leaves them all
running; the next daemon on its base ends them (never a live daemon's) and names them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from agent.v1.shell_pb2 import ShellArgs, ShellToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.kernel.leftovers import MARK_FILE, end_left_running
from exec_daemon.server import GRACEFUL_SECONDS
from tests.daemon_process import RunningDaemon, running_daemon
from tests.faults_support import (
    DiffTrial,
    alive,
    descendants,
    end_processes,
    kill_mid_apply,
    kill_mid_write,
    private_state_base,
    temp_files,
)
from tests.interop import (
    CONNECT_END_STREAM_FLAG,
    assert_still_serving,
    daemon_for_module,
    unframe,
)
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
from tests.test_pty_server import connect
from tests.test_shared_terminals import agent_shell, shared_terminal, write_environment

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


@pytest.mark.parametrize("path", [CONTROL_EXEC, EXEC_STREAM], ids=["control-exec", "exec-stream"])
async def test_sigterm_answers_a_slow_reader_shutting_down_before_the_port_closes(
    tmp_path: Path, path: str
) -> None:
    """The call SIGTERM ends still sends its last answer to a client that reads it late (the
    daemon once closed the connection first: under load an answer took longer than the
    connections' graceful close, and the client saw a broken pipe instead of the reason)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with running_daemon(workspace, tmp_path / "state") as daemon:
        call, marker, finished, _grown = await _stall(daemon, path)
        try:
            daemon.process.send_signal(signal.SIGTERM)
            await eventually(lambda: "shutting down" in daemon.log(), 20, "the drain began")
            # Longer than hypercorn's graceful close gives a connection after its shutdown began.
            await asyncio.sleep(2 * GRACEFUL_SECONDS)
            call.resume()
            await eventually(call.ended.is_set, 60, "the end of the answer")
            ends = [
                body for flags, body in unframe(bytes(call.body)) if flags & CONNECT_END_STREAM_FLAG
            ]
            assert len(ends) == 1, "no end-of-stream message reached the client"
            error = json.loads(ends[0])["error"]
            assert error["code"] == "unavailable"
            assert "shutting down" in error["message"]
            assert await asyncio.to_thread(daemon.process.wait, 60) == 0
        finally:
            call.close()
    assert not processes_with_argument(marker)
    assert not finished.exists()
    assert "Traceback" not in daemon.log()


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


# kill -9 with a shared terminal and jobs running: the next daemon ends what the killed one left.


async def _background(daemon: RunningDaemon, command: str) -> None:
    async with daemon.client() as client:
        outcome = await client.run(
            ToolCall(
                shell_tool_call=ShellToolCall(args=ShellArgs(command=command, is_background=True))
            )
        )
    assert outcome.result is not None and outcome.result.shell_tool_call.result.pid, outcome


async def test_the_next_daemon_ends_what_a_killed_one_left_running_and_names_it(
    tmp_path: Path,
) -> None:
    seconds = f"300.{secrets.randbelow(10**6):06d}"
    terminal, job, unmarked, escaped, bystander, person = (f"{seconds}{n}" for n in range(6))
    stubborn = "trap '' HUP TERM; sleep"  # ignores SIGHUP and SIGTERM: only SIGKILL ends it
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    write_environment(workspace, [{"name": "dev", "command": f"{stubborn} {terminal}"}])
    other = tmp_path / "other"
    other.mkdir()
    world: dict[int, str] = {}
    with private_state_base() as base:
        state_base = ("--state-base", str(base))
        try:
            with (
                running_daemon(other, tmp_path / "other-state", *state_base) as live,
                running_daemon(workspace, tmp_path / "state", *state_base) as killed,
            ):
                await _background(live, f"sleep {bystander}")
                await shared_terminal(killed, "dev")
                # A job with a child that dropped its mark (found by the job's session).
                await _background(
                    killed, f"env -u EXEC_DAEMON_CALL sleep {unmarked} & sleep {job}; wait"
                )
                # A process that left its session.
                await agent_shell(killed, f"setsid sleep {escaped} >/dev/null 2>&1 &")
                markers = (terminal, job, unmarked, escaped, bystander, person)
                # A terminal a person opened on the PTY WebSocket.
                async with connect(
                    killed, "/terminals/new?command=" + quote(f"{stubborn} {person}")
                ):
                    await eventually(
                        lambda: all(processes_with_argument(m) for m in markers), 60, "all running"
                    )
                    instance = killed.state_root()
                    world = descendants(killed.process.pid)
                    killed.process.send_signal(signal.SIGKILL)
                    killed.process.wait()
                # The kill alone ends none of them: what follows is the next daemon's doing.
                assert all(processes_with_argument(m) for m in markers)
                assert instance.is_dir()

                with running_daemon(workspace, tmp_path / "state", *state_base) as again:
                    survivors = {pid: _describe(pid) for pid in alive(world)}
                    assert survivors == {}
                    # The new daemon starts environment.json's terminal again: its own
                    # processes are not the killed daemon's.
                    its_own = descendants(again.process.pid)
                    for marker in (terminal, job, unmarked, escaped, person):
                        left = [p for p in processes_with_argument(marker) if p not in its_own]
                        assert left == [], (marker, {pid: _describe(pid) for pid in left})
                    assert processes_with_argument(bystander), "a live daemon's job was ended"
                    assert not instance.exists()
                    said = [
                        line for line in again.log().splitlines() if "killed daemon left" in line
                    ]
                    assert len(said) == 1, said
                    # Every sleep above; the killed daemon's shells and tmux server.
                    assert instance.name in said[0]
                    for name in ("sleep (5)", "tmux: server (1)", "bash ("):
                        assert name in said[0], said
                # The live daemon still serves its agent.
                assert "still here" in await agent_shell(live, "echo still here")
        finally:
            end_processes(world)


async def test_only_processes_with_an_ended_instances_mark_are_ended(tmp_path: Path) -> None:
    """exec_daemon/kernel/leftovers.py alone: the ended instance's mark is what counts; another
    mark, or a process of the daemon's own (its descendant), is left alone."""
    ended, other = (f"1-{secrets.token_hex(4)}." for _ in range(2))
    (tmp_path / MARK_FILE).write_text(ended)
    seconds = f"300.{secrets.randbelow(10**6):06d}"
    left, kept, own = (f"{seconds}{n}" for n in range(3))

    def sleep(mark: str, marker: str) -> list[str]:
        return ["env", f"EXEC_DAEMON_CALL={mark}7", "sleep", marker]

    # Detached (setsid -f): re-parented away from this process, as a killed daemon's are.
    subprocess.run(["setsid", "-f", *sleep(ended, left)], check=True)
    subprocess.run(["setsid", "-f", *sleep(other, kept)], check=True)
    child = subprocess.Popen(sleep(ended, own))  # noqa: ASYNC220
    try:
        await eventually(lambda: all(_sleep_runs(m) for m in (left, kept, own)))
        (found,) = await end_left_running([tmp_path], grace=0.2)
        assert found.instance == tmp_path and dict(found.names) == {"sleep": 1}
        assert processes_with_argument(left) == []
        assert processes_with_argument(kept) and child.poll() is None
    finally:
        for pid in processes_with_argument(left) + processes_with_argument(kept):
            os.kill(pid, signal.SIGKILL)
        child.kill()
        child.wait()


def _sleep_runs(marker: str) -> bool:
    """The `sleep` given `marker` runs, with its mark: not `setsid` or `env` still on the way to
    it (their arguments hold the marker too, their environment not yet the mark)."""
    for pid in processes_with_argument(marker):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                return True
    return False


def _describe(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"
