"""exec_daemon/kernel/processes.py: the one spawn path, ending whole process trees, PID 1."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from agent.v1.shell_pb2 import ShellArgs, ShellToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.kernel.processes import (
    SpawnSpec,
    all_processes,
    close_fds,
    open_pipe,
    proc_info,
    run_as_init_if_pid1,
    spawn,
    terminate_sessions,
)
from tests.daemon_process import running_daemon
from tests.polling import generous


def alive(pid: int) -> bool:
    info = proc_info(pid)
    return info is not None and info.alive


async def wait_dead(pids: list[int], seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        living = [pid for pid in pids if alive(pid)]
        if not living:
            return []
        await asyncio.sleep(0.02)
    return [pid for pid in pids if alive(pid)]


async def run_capturing(spec: SpawnSpec, **kwargs: object) -> tuple[int, str]:
    read_fd, write_fd = open_pipe()
    child = await spawn(replace(spec, stdout=write_fd), **kwargs)  # type: ignore[arg-type]
    close_fds(write_fd)
    code = await child.wait()
    output = b""
    while chunk := os.read(read_fd, 65536):
        output += chunk
    close_fds(read_fd)
    return code, output.decode()


async def test_spawn_gives_a_new_session_without_terminal_and_the_given_env(tmp_path: Path) -> None:
    script = (
        'echo "$$ $(ps -o pgid= -p $$) $(ps -o sid= -p $$) $MARK"; exec 3</dev/tty || echo no-tty'
    )
    spec = SpawnSpec(("bash", "-c", script), cwd=str(tmp_path), env={**os.environ, "MARK": "m1"})
    code, output = await run_capturing(spec)
    pid, pgid, sid, mark, *rest = output.split()
    assert code == 0
    assert pid == pgid == sid, "the child leads its own process group and session"
    assert mark == "m1"
    assert rest[-1] == "no-tty", "no controlling terminal: /dev/tty prompts fail at once"


@dataclass(frozen=True)
class PrefixConfinement:
    """A stand-in for the sandbox: wraps the argv, as the sandbox's confinement does."""

    key: str = "test"

    def wrap(self, spec: SpawnSpec) -> SpawnSpec:
        return replace(spec, argv=("env", "CONFINED=yes", *spec.argv))

    async def started(self, wrapped: SpawnSpec) -> None:
        return None

    async def abandon(self, wrapped: SpawnSpec) -> None:
        return None


async def test_confinement_wraps_what_is_spawned(tmp_path: Path) -> None:
    spec = SpawnSpec(("bash", "-c", "echo $CONFINED"), cwd=str(tmp_path), env=dict(os.environ))
    code, output = await run_capturing(spec, confinement=PrefixConfinement())
    assert (code, output) == (0, "yes\n")


async def test_terminate_reaches_grandchildren_in_other_groups_and_kills_stubborn_ones(
    tmp_path: Path,
) -> None:
    pids_file = tmp_path / "pids"
    # A grandchild in its own process group (job control) and one that ignores SIGTERM.
    script = f"""
        set -m
        sleep 100 & echo $! >> {pids_file}
        set +m
        bash -c 'trap "" TERM; echo $$ >> {pids_file}; while :; do sleep 0.05; done' &
        sleep 100
    """
    spec = SpawnSpec(("bash", "-c", script), cwd=str(tmp_path), env=dict(os.environ))
    child = await spawn(spec)
    deadline = time.monotonic() + 5
    while (
        not pids_file.exists() or len(pids_file.read_text().split()) < 2
    ) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    grandchildren = [int(pid) for pid in pids_file.read_text().split()]
    group_leader = proc_info(grandchildren[0])
    assert group_leader is not None and group_leader.pgid != child.pid
    started = time.monotonic()
    await terminate_sessions({child.pid}, grace=0.3)
    assert await wait_dead([child.pid, *grandchildren], 3.0) == []
    assert await child.wait() != 0
    assert time.monotonic() - started < 30  # not the 100 s sleeps


def test_init_reaps_orphans_and_passes_on_the_exit_code(tmp_path: Path) -> None:
    """The PID 1 mode, forced in a plain process (which then acts as a subreaper)."""
    program = f"""
import os, subprocess, sys, time
sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
from exec_daemon.kernel.processes import run_as_init_if_pid1
run_as_init_if_pid1(force=True)
# The daemon side: its own child's exit code is not stolen by the init.
code = subprocess.run(["bash", "-c", "sleep 0.2 & exit 3"]).returncode
# The orphaned sleep is reparented to the init, which must reap it.
time.sleep(0.5)
print(code, os.getppid(), flush=True)
sys.exit(7)
"""
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=30
    )
    code, init_pid = result.stdout.split()
    assert result.returncode == 7
    assert code == "3"
    assert init_pid != "1"


def test_not_pid1_means_no_fork() -> None:
    before = os.getpid()
    run_as_init_if_pid1()
    assert os.getpid() == before


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
async def test_daemon_as_pid1_reaps_and_keeps_exit_codes(tmp_path: Path) -> None:
    probe = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=10
    )
    if probe.returncode != 0:
        pytest.skip("cannot create a PID namespace here")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    argv = [
        "unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGTERM",
        sys.executable, "-m", "exec_daemon",
    ]  # fmt: skip
    with running_daemon(workspace, tmp_path / "state", argv=argv) as daemon:
        async with daemon.client() as client:

            async def shell(command: str, **kwargs: object) -> object:
                call = ToolCall(
                    shell_tool_call=ShellToolCall(args=ShellArgs(command=command, **kwargs))  # type: ignore[arg-type]
                )
                outcome = await client.run(call)
                assert outcome.result is not None, outcome.error
                return outcome.result.shell_tool_call.result

            init = await shell("cat /proc/1/cmdline | tr '\\0' ' '; echo; echo $PPID")
            assert "exec_daemon" in init.success.stdout  # type: ignore[attr-defined]
            # Exit codes of the daemon's own children are never stolen by the reaper, while
            # orphaned grandchildren (`sleep &` outliving their shell) are reaped.
            for _ in range(5):
                sibling = await shell("bash -c 'sleep 0.1 & exit 3'")
                assert sibling.failure.exit_code == 3  # type: ignore[attr-defined]
            background = await shell("sleep 0.1 & exit 4", is_background=True)
            count = "grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l"
            deadline = time.monotonic() + 5
            # The orphaned sleeps end within 0.1 s; a zombie that stays is one the reaper missed.
            while (zombies := await shell(count, timeout=10000)).success.stdout.strip() != "0":  # type: ignore[attr-defined]
                assert time.monotonic() < deadline, f"zombies stay: {zombies}"
                await asyncio.sleep(0.05)
            assert background.pid  # type: ignore[attr-defined]
        # unshare ignores SIGTERM while it waits: signal the namespace's PID 1 (our init),
        # which passes it on to the daemon and then exits with the daemon's exit code.
        init_pid = next(info.pid for info in all_processes() if info.ppid == daemon.process.pid)
        os.kill(init_pid, signal.SIGTERM)
        assert daemon.process.wait(10) == 0


async def test_a_spawn_cancelled_while_starting_ends_what_the_child_already_started(
    tmp_path: Path,
) -> None:
    """asyncio forks the child, then awaits its setup: a cancellation right then (an abort just
    after a call started) must end the child's whole session, not the child alone."""
    pids_file = tmp_path / "pids"
    script = f"echo $$ > {pids_file}; sleep 100 & echo $! >> {pids_file}; sleep 100; exit 0"
    spec = SpawnSpec(("bash", "-c", script), cwd=str(tmp_path), env=dict(os.environ))
    ours = {info.pid for info in all_processes() if info.ppid == os.getpid()}
    starting = asyncio.create_task(spawn(spec))
    # Until asyncio forked the child (it then awaits its setup, a loop iteration or two).
    while not {info.pid for info in all_processes() if info.ppid == os.getpid()} - ours:
        await asyncio.sleep(0)

    def session_members() -> list[int]:
        if not pids_file.exists() or len(lines := pids_file.read_text().split()) < 2:
            return []
        return [info.pid for info in all_processes() if info.alive and info.sid == int(lines[0])]

    # Blocking the loop keeps the setup from finishing while the child starts its sleeps.
    deadline = time.monotonic() + generous(30)
    while len(members := session_members()) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(members) == 3, members  # bash, `sleep 100 &` and the foreground `sleep 100`
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert await wait_dead(members, generous(10)) == []
