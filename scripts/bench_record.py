#!/usr/bin/env python3
"""What the session record (serve --record) adds to a tool call, printed as JSON (run by hand:
.venv/bin/python scripts/bench_record.py).

The goal (issue #32): record on vs off <= 3 % CPU per call. Measured as scripts/bench_tracing.py
measures export: calls through real daemons over Connect on loopback, in groups of `--daemons`
daemons: record off, a twin group also off (how far it is from the first is the machine's
noise floor), and record on (each daemon its own --record-folder beside the state roots). The
calls (bench_tracing's: read_todos, a read of a small file, shell `echo hi`) go in many short
rounds interleaved across all daemons. CPU: each daemon's CPU time (all its threads, the record's
writer too) around each batch of calls (`cpu_us_per_call`), and over the whole run, from after
the warm-up to a second after the last call so the writer's last batch counts
(`whole_run_cpu_us_per_call`: the verdict's measure). Every call must succeed, and every call
of a recording daemon must be in its record (checked with GetSessionRecord), or the run ends
with an error. `in_process`: the same chain without RPC, in this process (see `in_process`).
`--quick` (the test suite): few calls, the same checks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.* and scripts.* when run as a script

from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.state_root import RECORDS, default_base
from exec_daemon.registry import SPECS
from exec_daemon.rpc.dispatch import Dispatcher
from exec_daemon.server import middlewares, new_daemon
from exec_daemon.telemetry.session_record import SessionRecord
from scripts.bench_tracing import (
    END_TO_END_CALLS,
    Samples,
    cpu_seconds,
    ratio_interval,
    spread,
    timed_calls,
)
from scripts.benchmarking import add_quick_flag, expect
from tests.daemon_process import running_daemon

GOAL_RATIO = 1.03
OFF, TWIN, ON = "record_off", "record_off_twin", "record_on"
GROUPS = (OFF, TWIN, ON)
WARM_CALLS = 5


async def run(calls: int, rounds: int, per_group: int) -> dict[str, Any]:
    records = default_base() / RECORDS
    run_id = secrets.token_hex(4)
    async with contextlib.AsyncExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        stack.callback(_remove_bench_records, records, run_id)
        workspace = root / "workspace"
        workspace.mkdir()
        (workspace / "small.txt").write_text("".join(f"line {n}\n" for n in range(50)))
        quiet = ("--log-level", "info")
        groups = {f"{group}-{number}": group for group in GROUPS for number in range(per_group)}
        arguments = {
            name: (
                (*quiet, "--record-folder", str(records / f"bench-{run_id}-{name}"))
                if group == ON
                else quiet
            )
            for name, group in groups.items()
        }
        daemons = {
            name: stack.enter_context(running_daemon(workspace, root / name, *arguments[name]))
            for name in groups
        }
        clients = {
            name: await stack.enter_async_context(daemon.client())
            for name, daemon in daemons.items()
        }
        for client in clients.values():  # warm: imports, caches, the record's first segment
            for call in END_TO_END_CALLS.values():
                await timed_calls(client, call, WARM_CALLS)
        whole_start = {name: cpu_seconds(daemon) for name, daemon in daemons.items()}
        samples = Samples()
        made = dict.fromkeys(daemons, 0)
        order = list(clients)
        for round_number in range(rounds):
            shift = round_number % len(order)
            for call_name, call in END_TO_END_CALLS.items():
                count = calls if call_name != "shell_true" else max(calls // 5, 5)
                for name in order[shift:] + order[:shift]:
                    cpu_before = cpu_seconds(daemons[name])
                    times = await timed_calls(clients[name], call, count)
                    cpu = cpu_seconds(daemons[name]) - cpu_before
                    samples.add(call_name, groups[name], round_number, times, cpu)
                    made[name] += len(times)
        await asyncio.sleep(1.0)  # the writer's last batch (every 0.25 s) is in the whole run
        whole = {
            name: (cpu_seconds(daemon) - whole_start[name]) / made[name] * 1e6
            for name, daemon in daemons.items()
        }
        for name, group in groups.items():
            if group == ON:
                recorded = [e async for e in clients[name].session_record() if e.kind == "call"]
                warm = WARM_CALLS * len(END_TO_END_CALLS)
                expect(
                    len(recorded) == made[name] + warm,
                    f"{name} recorded {len(recorded)} calls of {made[name] + warm}",
                )
    return report(samples, groups, whole, per_group)


async def in_process(calls: int, rounds: int) -> dict[str, Any]:
    """The daemon's whole middleware chain without RPC, read_todos and a read back to back in
    this process, record off vs on: this process's CPU time (every thread: the writer's too,
    its queue flushed at the end of each batch) per call. Less noisy than the daemons: no
    sockets, no other process."""
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder) / "workspace"
        workspace.mkdir()
        (workspace / "small.txt").write_text("".join(f"line {n}\n" for n in range(50)))
        off = new_daemon(DaemonConfig(auth_token="t", workspace=workspace))
        on = new_daemon(
            DaemonConfig(auth_token="t", workspace=workspace, record_folder=Path(folder) / "rec")
        )
        record = on.service(SessionRecord)
        await asyncio.to_thread(record.start)
        variants = {
            OFF: (Dispatcher(off, SPECS, middlewares(off)), off),
            ON: (Dispatcher(on, SPECS, middlewares(on)), on),
        }
        cpu: dict[str, dict[str, list[float]]] = {}
        for _round in range(rounds):
            for call_name in ("read_todos", "read_small_file"):
                call = END_TO_END_CALLS[call_name]
                for name, (dispatcher, daemon) in variants.items():
                    ctx = CallContext(daemon=daemon, agent_id="bench")
                    started = time.process_time()
                    for _ in range(calls):
                        answer = await dispatcher.run(call, ctx)
                        case = answer.WhichOneof("tool")
                        result = getattr(answer, str(case)).result
                        expect(result.WhichOneof("result") == "success", f"{case}: {result}")
                    if daemon is on:
                        record.flush()
                    used = (time.process_time() - started) / calls * 1e6
                    cpu.setdefault(call_name, {}).setdefault(name, []).append(used)
        recorded = sum(1 for entry, _line in record.read() if entry["kind"] == "call")
        expect(recorded == 2 * calls * rounds, f"{recorded} calls recorded of {2 * calls * rounds}")
        for daemon in (off, on):
            await daemon.aclose()
    answer: dict[str, Any] = {"calls_per_round": calls}
    for call_name, by_group in cpu.items():
        off_us, on_us = (statistics.median(by_group[name]) for name in (OFF, ON))
        answer[call_name] = {
            "off_cpu_us_per_call": round(off_us, 1),
            "on_cpu_us_per_call": round(on_us, 1),
            "added_us": round(on_us - off_us, 1),
            "on_over_off_ratio": round(on_us / off_us, 3),
        }
    return answer


def _remove_bench_records(records: Path, run_id: str) -> None:
    with contextlib.suppress(OSError):
        for entry in records.iterdir():
            if entry.name.startswith(f"bench-{run_id}-"):
                shutil.rmtree(entry, ignore_errors=True)


def report(
    samples: Samples, groups: dict[str, str], whole: dict[str, float], per_group: int
) -> dict[str, Any]:
    answer: dict[str, Any] = {}
    for call_name in END_TO_END_CALLS:
        off_cpu = statistics.fmean(samples.cpu_us_per_call(g, [call_name]) for g in (OFF, TWIN))
        answer[call_name] = {
            group: {
                **spread(samples.pooled(call_name, group)),
                "cpu_us_per_call": round(samples.cpu_us_per_call(group, [call_name]), 1),
                "median_over_off_ratio": round(
                    samples.paired_ratio(
                        call_name, group, (OFF,) if group == TWIN else (OFF, TWIN)
                    ),
                    3,
                ),
                "cpu_over_off_ratio": round(
                    samples.cpu_us_per_call(group, [call_name])
                    / (samples.cpu_us_per_call(OFF, [call_name]) if group == TWIN else off_cpu),
                    3,
                ),
            }
            for group in (TWIN, ON)
        }
        answer[call_name][OFF] = {
            **spread(samples.pooled(call_name, OFF)),
            "cpu_us_per_call": round(samples.cpu_us_per_call(OFF, [call_name]), 1),
        }
    each = {group: [us for name, us in whole.items() if groups[name] == group] for group in GROUPS}
    mean = {group: statistics.fmean(values) for group, values in each.items()}
    off = statistics.fmean([mean[OFF], mean[TWIN]])
    ratio = mean[ON] / off
    answer["whole_run_cpu_us_per_call"] = {group: round(us, 1) for group, us in mean.items()}
    answer["daemons_per_group"] = per_group
    answer["verdict"] = {
        "goal_ratio": GOAL_RATIO,
        "record_on_cpu_over_off": round(ratio, 3),
        "record_on_cpu_over_off_95": ratio_interval(each[ON], each[OFF] + each[TWIN]),
        "noise_floor_twin_over_off": round(mean[TWIN] / mean[OFF], 3),
        "within_goal": ratio <= GOAL_RATIO,
    }
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=25, help="calls per daemon per round")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--daemons", type=int, default=3, help="daemons per group (off, twin, on)")
    parser.add_argument("--in-process-calls", type=int, default=2000)
    add_quick_flag(parser)
    options = parser.parse_args()
    if options.quick:
        options.calls, options.rounds, options.daemons = 10, 2, 1
        options.in_process_calls = 100
    started = time.monotonic()
    answer = asyncio.run(run(options.calls, options.rounds, options.daemons))
    answer["in_process"] = asyncio.run(in_process(options.in_process_calls, 5))
    answer["seconds"] = round(time.monotonic() - started, 1)
    answer["load_average"] = os.getloadavg()[0]
    print(json.dumps(answer, indent=2))


if __name__ == "__main__":
    main()
