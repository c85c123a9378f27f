#!/usr/bin/env python3
"""Fault trials against the real daemon (loopback only), printed as JSON counts.

1. kill -9 mid-write: WriteTextFile of a large file, the daemon killed as soon as its temp file
   appears, then restarted on the same workspace and state: torn files (neither the old nor the
   new content) and temp files left once the next daemon is up.
2. kill -9 mid apply_agent_diff: a diff creating a file, changing many large files and deleting
   one, killed after its first change landed: diffs left partly applied once the next daemon is
   up.
3. A stalled HTTP/2 client (tests/stalled_h2.py: drains its socket, grants no window) on a
   command printing `--output-mb`, over ExecStream and ControlService.Exec: the daemon's peak RSS
   above idle, whether the command ran to its end for nobody, another client's Ping p50 during
   the stall against idle, and after the client reads again (ExecStream) or goes away
   (ControlService.Exec) whether the command finished or was ended.
4. kill -9 with jobs running (a foreground call, background calls, a process that left its
   session): how many of the daemon's processes outlive it, how many outlive the next daemon's
   start on the same --state-base (which ends them), and what it said.

What the trials leave is ended before the next one. `--quick` (the test suite): small sizes.

    .venv/bin/python scripts/bench_faults.py [--kills N] [--output-mb N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.* when run as a script

from agent.v1.shell_pb2 import ShellArgs, ShellToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from scripts.benchmarking import add_quick_flag, expect, tool_success
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

MB = 1 << 20
# The daemon's memory under a stalled client may grow by at most this much (README).
STALLED_GOAL_MB = 64


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


# -- 1. kill -9 mid-write ---------------------------------------------------------------------


def kill_mid_write_trials(root: Path, kills: int, size_mb: int) -> dict[str, Any]:
    workspace, state = root / "workspace", root / "state"
    docs = workspace / "docs"
    docs.mkdir(parents=True)
    big = docs / "big.txt"
    old = "old content\n"
    big.write_text(old)
    new = "n" * (size_mb * MB)
    landed = torn = 0
    temps_left: list[int] = []
    for trial in range(kills + 1):
        with running_daemon(workspace, state, "--log-level", "warn") as daemon:
            world = descendants(daemon.process.pid)
            try:
                if trial:  # what the previous kill left, now that a new daemon is up
                    temps_left.append(len(temp_files(docs)))
                    torn += big.read_text() not in (old, new)
                if trial == kills:
                    break
                landed += kill_mid_write(daemon, "docs/big.txt", new)
            finally:
                end_processes(world)
    return {
        "kills": kills,
        "edit_mb": size_mb,
        "landed_mid_write": landed,
        "torn_files": torn,
        "temp_files_left_after_restart": sum(temps_left),
        "temp_files_left_in_workspace_at_end": len(temp_files(docs)),
    }


# -- 2. kill -9 mid apply_agent_diff ----------------------------------------------------------


def kill_mid_apply_trials(root: Path, kills: int, files: int, file_kb: int) -> dict[str, Any]:
    workspace, state = root / "workspace", root / "state"
    workspace.mkdir(parents=True)
    trial = DiffTrial(workspace, files=files, file_bytes=file_kb * 1024)
    landed = partly_applied = 0
    for _ in range(kills):
        trial.reset()
        with running_daemon(workspace, state, "--log-level", "warn") as daemon:
            world = descendants(daemon.process.pid)
            try:
                landed += kill_mid_apply(daemon, trial)
            finally:
                end_processes(world)
        with running_daemon(workspace, state, "--log-level", "warn") as daemon:
            partly_applied += trial.torn()
            leftover = len(temp_files(workspace))
    return {
        "kills": kills,
        "files_in_diff": files + 2,
        "file_kb": file_kb,
        "landed_mid_apply": landed,
        "partly_applied_after_restart": partly_applied,
        "temp_files_left_after_restart": leftover,
    }


# -- 3. stalled HTTP/2 client -----------------------------------------------------------------


async def _pings(client: ExecDaemonClient, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        await client.ping()
        times.append(time.perf_counter() - started)
    return times


async def stalled_call(
    daemon: RunningDaemon, client: ExecDaemonClient, path: str, output_mb: int
) -> dict[str, Any]:
    idle = rss_bytes(daemon.process.pid)
    marker = f"stalled-{secrets.token_hex(6)}"
    finished = daemon.workspace / f"{marker}.done"
    command = f"yes {marker} | head -c {output_mb * MB}; touch {finished}"
    call = StalledH2Call(daemon.port, daemon.token, path, exec_body(path, shell_call(command)))
    peak = idle
    output = OutputHeld(marker, 50)
    deadline = time.monotonic() + 60
    try:
        # Until the command wrote nothing for a second (held) or ran to its end.
        while time.monotonic() < deadline and not finished.exists():
            peak = max(peak, rss_bytes(daemon.process.pid))
            if output.poll():
                break
            await asyncio.sleep(0.02)
        during = await _pings(client, 20)
        peak = max(peak, rss_bytes(daemon.process.pid))
        ran_to_end = finished.exists()
        report: dict[str, Any] = {
            "idle_rss_mb": round(idle / MB, 1),
            "peak_rss_above_idle_mb": round((peak - idle) / MB, 1),
            "client_received_bytes": call.received,
            "command_ran_to_its_end_unread": ran_to_end,
            "ping_p50_during_ms": _ms(statistics.median(during)),
        }
        if path == EXEC_STREAM:
            started = time.monotonic()
            call.resume()
            while not call.ended.is_set() and time.monotonic() - started < 120:
                await asyncio.sleep(0.05)
            report["finished_once_read"] = finished.exists() and call.received > output_mb * MB
            report["read_all_seconds"] = round(time.monotonic() - started, 2)
    finally:
        call.close()
    if path == CONTROL_EXEC:
        started = time.monotonic()
        while processes_with_argument(marker) and time.monotonic() - started < 20:
            await asyncio.sleep(0.05)
        report["processes_left_after_disconnect"] = len(processes_with_argument(marker))
        report["ended_within_seconds"] = round(time.monotonic() - started, 2)
        report["finished_after_disconnect"] = finished.exists()
    return report


async def stalled_trials(root: Path, output_mb: int) -> dict[str, Any]:
    workspace = root / "workspace"
    workspace.mkdir(parents=True)
    with running_daemon(workspace, root / "state", "--log-level", "warn") as daemon:
        async with daemon.client() as client:
            idle_pings = await _pings(client, 20)
            exec_stream = await stalled_call(daemon, client, EXEC_STREAM, output_mb)
            control_exec = await stalled_call(daemon, client, CONTROL_EXEC, output_mb)
            idle_p50 = statistics.median(idle_pings)
    during = [exec_stream["ping_p50_during_ms"], control_exec["ping_p50_during_ms"]]
    worst = max(exec_stream["peak_rss_above_idle_mb"], control_exec["peak_rss_above_idle_mb"])
    return {
        "output_mb": output_mb,
        "exec_stream": exec_stream,
        "control_exec": control_exec,
        "ping_p50_idle_ms": _ms(idle_p50),
        "ping_p50_during_over_idle_ratio": round(max(during) / 1000 / idle_p50, 2),
        "worst_peak_rss_above_idle_mb": worst,
        "goal_peak_rss_above_idle_mb": STALLED_GOAL_MB,
    }


# -- 4. kill -9 with jobs running -------------------------------------------------------------


async def _start_jobs(daemon: RunningDaemon, marker: str) -> None:
    async with daemon.client() as client:
        for n in range(2):
            answer = await client.run(
                ToolCall(
                    shell_tool_call=ShellToolCall(
                        args=ShellArgs(command=f"sleep 300.{marker}{n}", is_background=True)
                    )
                ),
                agent_id="jobs",
            )
            started = answer.result is not None and answer.result.shell_tool_call.result.pid
            expect(bool(started), f"the background call did not start: {answer}")
        left = await client.run(shell_call(f"setsid sleep 300.{marker}9 >/dev/null 2>&1 & echo ok"))
        tool_success(left)


def kill_with_jobs_trial(root: Path) -> dict[str, Any]:
    workspace = root / "workspace"
    workspace.mkdir(parents=True)
    state = root / "state"
    marker = str(secrets.randbelow(10**8))
    world: dict[int, str] = {}
    # A base of its own: another daemon starting on the machine's would end the world first.
    with private_state_base() as base:
        options = ("--log-level", "info", "--state-base", str(base))
        try:
            with running_daemon(workspace, state, *options) as daemon:
                asyncio.run(_start_jobs(daemon, marker))
                body = exec_body(CONTROL_EXEC, shell_call(f"sleep 300.{marker}5"))
                foreground = StalledH2Call(daemon.port, daemon.token, CONTROL_EXEC, body)
                deadline = time.monotonic() + 30
                while len(_marked(marker)) < 4 and time.monotonic() < deadline:
                    time.sleep(0.02)
                expect(len(_marked(marker)) >= 4, "the jobs and the foreground call are running")
                tmux_socket = str(daemon.state_root() / "sockets" / "tmux" / "server.sock")
                world = descendants(daemon.process.pid)
                for pid in _marked(marker):
                    world.update(_start_of(pid))
                before = len(world)
                daemon.process.send_signal(signal.SIGKILL)
                daemon.process.wait()
                foreground.close()
            time.sleep(1)
            after_kill = alive(world)
            orphan_names = _names(after_kill)
            tmux_after_kill = sum(tmux_socket in _cmdline(pid) for pid in after_kill)
            with running_daemon(workspace, state, *options) as again:
                world.update(descendants(again.process.pid))
                time.sleep(1)
                from_before = [pid for pid in alive(world) if pid in after_kill]
                tmux_servers = len([p for p in _all_pids() if tmux_socket in _cmdline(p)])
                said = [line for line in again.log().splitlines() if "killed daemon left" in line]
        finally:
            end_processes(world)
    return {
        "processes_before_kill": before,
        "orphans_after_kill": len(after_kill),
        "orphans_by_name": orphan_names,
        "tmux_servers_orphaned": tmux_after_kill,
        "orphans_after_restart": len(from_before),
        "tmux_servers_on_the_killed_socket_after_restart": tmux_servers,
        "the_next_daemon_said": [line.split(": ", 1)[-1] for line in said],
    }


def _marked(marker: str) -> list[int]:
    return [pid for pid in _all_pids() if marker in _cmdline(pid)]


def _all_pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _names(pids: list[int]) -> dict[str, int]:
    names: dict[str, int] = {}
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        names[name] = names.get(name, 0) + 1
    return names


def _start_of(pid: int) -> dict[int, str]:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return {}
    return {pid: text[text.rindex(")") + 2 :].split()[19]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--output-mb", type=int, default=100)
    add_quick_flag(parser)
    options = parser.parse_args()
    kills = 1 if options.quick else options.kills
    output_mb = 24 if options.quick else options.output_mb
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as root:
        base = Path(root)
        report["kill_mid_write"] = kill_mid_write_trials(
            base / "write", kills, 8 if options.quick else 31
        )
        report["kill_mid_apply"] = kill_mid_apply_trials(
            base / "apply", kills, 10 if options.quick else 40, 256 if options.quick else 1024
        )
        report["stalled_h2_client"] = asyncio.run(stalled_trials(base / "stalled", output_mb))
        report["kill_with_jobs"] = kill_with_jobs_trial(base / "jobs")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
