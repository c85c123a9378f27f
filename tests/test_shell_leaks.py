"""tools/shell under churn: 1000 calls mixing timeouts, aborts, background jobs, siblings and
`sleep &` grandchildren leave no zombie, no stray process, no growing fd count or memory."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

from exec_daemon.client import ExecDaemonClient, ExecStream
from exec_daemon.kernel.processes import all_processes, proc_info
from tests.daemon_process import running_daemon
from tests.shell_calls import shell_call
from tools.sem_search import INDEX_PROCESS_CODE

CALLS = 1000
WORKERS = 10
AGENTS = 5
ROUND = 200


def status_field(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    raise AssertionError(name)


def footprint(pid: int) -> tuple[int, int, int]:
    """(open fds, resident KiB, threads) of a process."""
    return (
        len(os.listdir(f"/proc/{pid}/fd")),
        status_field(pid, "VmRSS"),
        status_field(pid, "Threads"),
    )


def marked_processes(mark: str) -> set[int]:
    """Every process whose environment carries `mark` (all the daemon ever started)."""
    found = set()
    for info in all_processes():
        try:
            environ = Path(f"/proc/{info.pid}/environ").read_bytes()
        except OSError:
            continue
        if mark.encode() in environ and info.alive:
            found.add(info.pid)
    return found


def command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()[-300:]
    except OSError:
        return b""


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for info in all_processes():
        children.setdefault(info.ppid, []).append(info.pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


async def one_call(stream: ExecStream, index: int, agent: str) -> str:
    kind = index % 10
    if kind == 0:
        call = await stream.start(shell_call("echo t; sleep 5", timeout=80), agent_id=agent)
    elif kind == 1:
        call = await stream.start(shell_call("echo a; sleep 5 & sleep 5"), agent_id=agent)
        await asyncio.sleep(0.03)
        await stream.abort(call.id)
    elif kind == 2:
        call = await stream.start(
            shell_call(f"sleep 0.1 & echo bg{index}", is_background=True), agent_id=agent
        )
    elif kind == 3:
        call = await stream.start(shell_call("sleep 0.3 & echo gc"), agent_id=agent)
    elif kind == 4:
        call = await stream.start(shell_call("printf '\\xff\\xfe'; exit 3"), agent_id=agent)
    else:
        call = await stream.start(shell_call(f"echo {index}; echo e >&2"), agent_id=agent)
    outcome = await call.wait()
    assert outcome.result is not None, outcome.error
    return str(outcome.result.shell_tool_call.result.WhichOneof("result") or "background")


async def worker(client: ExecDaemonClient, number: int, indexes: list[int]) -> list[str]:
    agent = f"agent-{number % AGENTS}"
    async with client.exec_stream() as stream:
        return [await one_call(stream, index, agent) for index in indexes]


async def churn(client: ExecDaemonClient, indexes: range) -> list[str]:
    per_worker = [list(indexes)[number::WORKERS] for number in range(WORKERS)]
    results = await asyncio.gather(
        *(worker(client, number, chunk) for number, chunk in enumerate(per_worker))
    )
    return [kind for chunk in results for kind in chunk]


async def test_a_thousand_calls_leak_nothing(tmp_path: Path) -> None:
    mark = f"EXEC_DAEMON_LEAK_MARK_{uuid.uuid4().hex}"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with running_daemon(workspace, tmp_path / "state", env={mark: "1"}) as daemon:
        pid = daemon.process.pid
        async with daemon.client() as client:
            kinds: list[str] = []
            footprints = []
            for first in range(0, CALLS, ROUND):
                kinds += await churn(client, range(first, first + ROUND))
                await asyncio.sleep(0.7)  # background jobs and `sleep 0.3 &` end
                footprints.append(footprint(pid))
            assert len(kinds) == CALLS
            assert {"success", "failure", "timeout", "aborted", "background"} <= set(kinds)

            # No zombie under the daemon or its shells.
            tree = descendants(pid)
            zombies = [
                info.pid
                for info in all_processes()
                if info.state == "Z" and (info.ppid == pid or info.ppid in tree)
            ]
            assert zombies == []
            # Nothing it started is left but the agents' session shells.
            sessions = set()
            for number in range(AGENTS):
                outcome = await client.run(shell_call("echo $$"), agent_id=f"agent-{number}")
                assert outcome.result is not None
                sessions.add(int(outcome.result.shell_tool_call.result.success.stdout))
            # The daemon's own tmux server (shared terminals) and sem_search's index process
            # live as long as the daemon.
            own_helpers = {
                other
                for other in marked_processes(mark)
                if (info := proc_info(other)) is not None
                and info.ppid == pid
                and (
                    b"\x00-D\x00-f\x00" in command_line(other)
                    or INDEX_PROCESS_CODE.encode() in command_line(other)
                )
            }
            strays = marked_processes(mark) - sessions - own_helpers - {pid}
            details = {stray: (proc_info(stray), command_line(stray)) for stray in strays}
            assert strays == set(), details
        # After warming up (pools, caches, the job history filling), nothing keeps growing.
        fds, rss_kib, threads = zip(*footprints, strict=True)
        warm = len(footprints) // 2
        assert max(fds[warm:]) - fds[warm - 1] <= 4, footprints
        assert max(rss_kib[warm:]) - rss_kib[warm - 1] <= 8 * 1024, footprints
        # Threads: asyncio's executor keeps up to min(32, cpus + 4) idle workers (a pool, not
        # a leak) beside the daemon's own long-lived ones (the semantic index, file watchers);
        # beyond that, one per running child would be.
        pool = min(32, (os.cpu_count() or 1) + 4)
        assert max(threads) <= pool + threads[0], footprints
        assert max(threads[warm:]) - threads[warm - 1] <= 2, footprints
