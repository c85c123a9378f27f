"""exec_daemon/kernel/runner.py: helpers run in their own group, end with it, and never see the
daemon's secrets."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from exec_daemon.kernel.errors import ErrorCode
from exec_daemon.kernel.processes import proc_info
from exec_daemon.kernel.runner import HelperFailed, run_helper, start_helper
from exec_daemon.kernel.secrets import keep_secret, without_secrets

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def alive(pid: int) -> bool:
    info = proc_info(pid)
    return info is not None and info.alive


def written(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""


async def wait_for_file(path: Path, seconds: float = 5.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text := written(path):
            return text
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} was not written within {seconds}s")


async def wait_dead(pids: list[int], seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + seconds
    living = pids
    while time.monotonic() < deadline:
        living = [pid for pid in pids if alive(pid)]
        if not living:
            return []
        await asyncio.sleep(0.02)
    return living


def pids_in(text: str) -> list[int]:
    return [int(word) for word in text.split()]


# A helper that starts a grandchild in its group and one in a group of its own (`set -m`),
# writes their pids, then waits.
TREE = "sleep 1000 & a=$!; set -m; sleep 1000 & b=$!; echo $a $b $$ > {out}; wait"


async def test_timeout_ends_the_helper_and_its_descendants(tmp_path: Path) -> None:
    out = tmp_path / "pids"
    with pytest.raises(HelperFailed) as failed:
        await run_helper(["bash", "-c", TREE.format(out=out)], env=ENV, time_limit=1.0)
    assert failed.value.code == ErrorCode.TIMEOUT
    assert "bash did not finish within 1 s" in failed.value.message
    pids = pids_in(out.read_text())
    assert len(pids) == 3
    assert await wait_dead(pids) == []


async def test_cancel_ends_the_helper_and_its_descendants(tmp_path: Path) -> None:
    out = tmp_path / "pids"
    task = asyncio.create_task(
        run_helper(["bash", "-c", TREE.format(out=out)], env=ENV, time_limit=60)
    )
    pids = pids_in(await wait_for_file(out))
    assert all(alive(pid) for pid in pids)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_dead(pids) == []


async def test_children_left_behind_end_with_a_finished_helper(tmp_path: Path) -> None:
    done = await run_helper(
        ["bash", "-c", "sleep 1000 >/dev/null 2>&1 & echo $!"], env=ENV, time_limit=10
    )
    assert done.returncode == 0
    assert await wait_dead(pids_in(done.stdout.data.decode())) == []


async def test_output_is_bounded_and_says_what_was_cut() -> None:
    done = await run_helper(
        ["bash", "-c", "head -c 3000000 /dev/zero | tr '\\0' x; echo oops >&2; exit 3"],
        env=ENV,
        time_limit=30,
        limit=1000,
        stderr_limit=2,
    )
    assert done.returncode == 3
    assert done.stdout.data == b"x" * 1000
    assert done.stdout.cut == 3000000 - 1000
    assert done.stdout.text().endswith("[2999000 more bytes cut]")
    assert done.stderr.data == b"oo"
    assert done.stderr.cut == 3


async def test_stdin_is_dev_null_unless_given() -> None:
    # `cat` would wait for ever on an inherited terminal or pipe.
    done = await run_helper(["cat"], env=ENV, time_limit=10)
    assert (done.returncode, done.stdout.data) == (0, b"")
    fed = await run_helper(["cat"], env=ENV, time_limit=10, input=b"given")
    assert fed.stdout.data == b"given"


async def test_a_missing_helper_is_unavailable() -> None:
    with pytest.raises(HelperFailed) as failed:
        await run_helper(["/nonexistent/linter", "--version"], env=ENV, time_limit=10)
    assert failed.value.code == ErrorCode.UNAVAILABLE
    assert "linter cannot be started" in failed.value.message


async def test_the_daemon_secrets_never_reach_a_helper() -> None:
    keep_secret("registered-secret-0123456789")
    env = {
        **ENV,
        "EXEC_DAEMON_AUTH_TOKEN": "the-token",
        "EXEC_DAEMON_TRACE_AUTH_TOKEN": "the-trace-token",
        "RENAMED": "Bearer registered-secret-0123456789",
        "KEPT": "visible",
    }
    done = await run_helper(["env"], env=env, time_limit=10)
    lines = done.stdout.data.decode().splitlines()
    assert "KEPT=visible" in lines
    assert not [line for line in lines if "token" in line.lower() or "secret" in line]
    assert without_secrets(env) == {**ENV, "KEPT": "visible"}


async def test_a_kept_helper_stops_with_its_group(tmp_path: Path) -> None:
    out = tmp_path / "pids"
    helper = await start_helper(["bash", "-c", f"trap '' TERM; {TREE.format(out=out)}"], env=ENV)
    pids = pids_in(await wait_for_file(out))
    assert helper.returncode is None
    # It ignores SIGTERM: SIGKILL reaches it and its descendants after the grace.
    returncode = await helper.stop(grace=0.2)
    assert returncode == -9
    assert await wait_dead(pids) == []


async def test_a_timeout_reaches_what_left_the_helper_session(tmp_path: Path) -> None:
    out = tmp_path / "pid"
    script = f"setsid -f bash -c 'echo $$ > {out}; exec sleep 1000' </dev/null >/dev/null 2>&1; sleep 1000"
    with pytest.raises(HelperFailed):
        await run_helper(["bash", "-c", script], env=ENV, time_limit=1.0)
    escaped = pids_in(await wait_for_file(out))
    assert await wait_dead(escaped) == []


async def test_a_helper_stopped_with_unread_output_is_stopped() -> None:
    # Its stdout is read by nobody: the pipe and the reader's buffer fill, reading pauses, and
    # Python 3.11's wait() waited for that pipe's end for ever (a git run past its output limit).
    helper = await start_helper(["yes"], env=ENV, stdout=asyncio.subprocess.PIPE)
    assert helper.process.stdout is not None
    while not helper.process.stdout._paused:  # type: ignore[attr-defined]
        await asyncio.sleep(0.01)
    async with asyncio.timeout(30):
        status = await helper.stop(grace=0)
    assert status == -signal.SIGTERM or status == -signal.SIGKILL
