#!/usr/bin/env python3
"""What telemetry export adds to a tool call, printed as JSON (run by hand: .venv/bin/python scripts/bench_tracing.py).

`end_to_end` (the goal, issue #16: export on vs off <= 5 % per call): calls through real
daemons over Connect on loopback, as a client sees them, in groups of `--daemons` daemons: in
ghost mode (no telemetry at all), exporting traces, metrics and logs over OTLP/gRPC to a live
collector, to a slow collector (SLOW_EXPORT_SECONDS per trace export: its queue fills, and what
does not fit is dropped and counted) and to a dead port (every export fails). The collectors
run in their own process (scripts/otlp_collector.py), as a real one would. Calls: read_todos
(the cheapest: the worst case for a relative cost), a read of a small file and shell `true`.

How it stays readable on a shared, noisy 2-core machine: two identical daemon processes differ
by a few per cent in CPU per call (their memory layout, which core and cache they land on), and
one round of a hundred calls by up to 10 %; so each kind of daemon is a group of several, and
the calls are many short rounds (`--rounds` of `--calls` calls per daemon and call kind),
interleaved across all daemons, each round starting with the next daemon. A second group of
ghost-mode daemons (`ghost_mode_twin`) runs the same calls: the reference is the mean of both
ghost-mode groups, and the twin's distance to the first is the noise floor. Per call kind: each
group's median and p99 in µs and `over_ghost_ratio`, the median over rounds of its median over
the reference's in the same round (a load that comes and goes moves both).
CPU: each daemon's CPU time (the scheduler's counts of all its threads, the export threads
too) around each batch of calls, per call kind (`cpu_us_per_call`, `cpu_over_ghost_ratio`) and
over the whole run (`daemon_cpu_us_per_call`): the cost the wall-clock medians partly hide on
two cores. `verdict`: per exporting group its CPU per call (with a 95 % interval from how far
apart the daemons of a group are) and its worst median ratio over the reference, against
GOAL_RATIO, beside the noise floor. Each daemon's RSS before and after the
run says whether anything grows.

`in_process` (where the cost is): the same middleware without RPC, dispatching read_todos back
to back in this process (ghost mode vs exporting to an in-process collector vs a dead port).

Every call must succeed, and every span and call must reach the live collectors, or the run
ends with an error. `--quick` (the test suite): few calls, the same checks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.* when run as a script

from agent.v1.files_pb2 import ReadToolArgs, ReadToolCall
from agent.v1.shell_pb2 import ShellArgs, ShellToolCall
from agent.v1.todos_pb2 import ReadTodosArgs, ReadTodosToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.context import CallContext
from exec_daemon.registry import SPECS
from exec_daemon.rpc.dispatch import Dispatcher
from exec_daemon.server import new_daemon
from exec_daemon.telemetry.tracing import EXTRAS_KEY, Telemetry, tracing_middlewares
from scripts.benchmarking import add_quick_flag, expect
from tests.daemon_process import RunningDaemon, running_daemon
from tests.test_telemetry_otlp import grpc_collector, total

if TYPE_CHECKING:
    from exec_daemon.client import ExecDaemonClient

CALL = ToolCall(read_todos_tool_call=ReadTodosToolCall(args=ReadTodosArgs()))
SHELL_CALL = ToolCall(shell_tool_call=ShellToolCall(args=ShellArgs(command="echo hi")))
TRACE_HEADERS = {EXTRAS_KEY: {"traceparent": f"00-{'a' * 32}-{'b' * 16}-01"}}


async def per_call_us(
    dispatcher: Dispatcher, ctx: CallContext, calls: int, call: ToolCall = CALL
) -> float:
    """Per call: the calls back to back, then their spans and metrics made (the work the
    telemetry-calls thread does beside a serving daemon's loop, billed to the calls here)."""
    started = time.perf_counter()
    for _ in range(calls):
        answer = await dispatcher.run(call, ctx)
        case = answer.WhichOneof("tool")
        assert case is not None
        result = getattr(answer, case).result
        expect(result.WhichOneof("result") == "success", f"{case} failed: {result}")
    ctx.daemon.service(Telemetry).complete_calls()
    return (time.perf_counter() - started) / calls * 1e6


def telemetry_config(workspace: Path, port: int) -> DaemonConfig:
    return DaemonConfig(
        auth_token="t",
        workspace=workspace,
        ghost_mode=False,
        trace_endpoint=f"127.0.0.1:{port}",
        trace_auth_token="bench-token",
        trace_insecure=True,
    )


def ratio(samples: dict[str, list[float]], name: str) -> float:
    return statistics.median(samples[name]) / statistics.median(samples["ghost_mode"])


def dead_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        return int(server.getsockname()[1])


async def measure(calls: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder, grpc_collector() as (port, received):
        workspace = Path(folder)
        ghost = new_daemon(DaemonConfig(auth_token="t", workspace=workspace))
        live = new_daemon(telemetry_config(workspace, port))
        dead = new_daemon(telemetry_config(workspace, dead_port()))
        variants = {
            name: (Dispatcher(daemon, SPECS, tracing_middlewares(daemon)), daemon)
            for name, daemon in (("ghost_mode", ghost), ("live", live), ("dead", dead))
        }
        expect(not tracing_middlewares(ghost), "ghost mode must add no middleware")
        samples: dict[str, list[float]] = {name: [] for name in variants}
        shell_samples: dict[str, list[float]] = {name: [] for name in variants}
        for _round in range(rounds):
            for name, (dispatcher, daemon) in variants.items():
                ctx = CallContext(daemon=daemon, extras=TRACE_HEADERS)
                samples[name].append(await per_call_us(dispatcher, ctx, calls))
                shell_samples[name].append(
                    await per_call_us(dispatcher, ctx, max(calls // 10, 10), SHELL_CALL)
                )
        shell_calls = sum(max(calls // 10, 10) for _ in range(rounds))
        for daemon in (ghost, live, dead):
            await daemon.aclose()
        exported = len(received.spans())
        metrics = received.metrics()
    expected = calls * rounds + shell_calls
    # A tight loop of calls can outrun the export queue (the SDK's 2,048 spans): what does not
    # reach the collector must then be counted as dropped, never lost unseen. (The SDK may count
    # one more: it counts a drop when it finds the queue full, and its export thread can take a
    # batch out before the span is added.)
    processed = metrics.get("otel.sdk.processor.span.processed")
    dropped = 0 if processed is None else int(total(processed, **{"error.type": "queue_full"}))
    expect(
        exported <= expected <= exported + dropped,
        f"{exported} spans received and {dropped} counted as dropped, of {expected}",
    )
    counted = metrics.get("exec_daemon.tool.calls")
    expect(
        counted is not None and total(counted) == expected,
        "the live collector's call count must match the calls made",
    )
    ghost_us = statistics.median(samples["ghost_mode"])
    live_us = statistics.median(samples["live"])
    dead_us = statistics.median(samples["dead"])
    return {
        "calls_per_round": calls,
        "ghost_mode_dispatch_us": round(ghost_us, 1),
        "span_exported_added_us": round(live_us - ghost_us, 1),
        "span_exported_over_ghost_ratio": round(live_us / ghost_us, 2),
        "dead_collector_added_us": round(dead_us - ghost_us, 1),
        "dead_collector_over_ghost_ratio": round(dead_us / ghost_us, 2),
        "shell_ghost_mode_us": round(statistics.median(shell_samples["ghost_mode"]), 1),
        "shell_exported_over_ghost_ratio": round(ratio(shell_samples, "live"), 3),
        "shell_dead_collector_over_ghost_ratio": round(ratio(shell_samples, "dead"), 3),
        "spans_received": exported,
        "spans_dropped_queue_full": dropped,
        "spans_expected": expected,
    }


SLOW_EXPORT_SECONDS = 2.0
# The batch processor's schedule delay (5 s) plus the exporter's first retry, with room for load.
DEAD_EXPORT_WAIT_SECONDS = 60.0
COLLECTOR = REPO / "scripts" / "otlp_collector.py"
END_TO_END_CALLS = {
    "read_todos": CALL,
    "read_small_file": ToolCall(read_tool_call=ReadToolCall(args=ReadToolArgs(path="small.txt"))),
    "shell_true": ToolCall(shell_tool_call=ShellToolCall(args=ShellArgs(command="true"))),
}


@contextlib.contextmanager
def collector_process(delay: float = 0.0) -> Iterator[tuple[int, Callable[[], dict[str, int]]]]:
    """scripts/otlp_collector.py in its own process: its port, and a function that stops it
    and returns what it received."""
    process = subprocess.Popen(
        [sys.executable, str(COLLECTOR), "--delay", str(delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def finish() -> dict[str, int]:
        stdin.close()
        answer: dict[str, int] = json.loads(stdout.readline())
        process.wait(30)
        return answer

    try:
        yield int(stdout.readline()), finish
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def cpu_seconds(daemon: RunningDaemon) -> float:
    """The daemon's CPU time so far, all its threads, in the scheduler's nanoseconds (the
    clock ticks of /proc/<pid>/stat are too coarse for one round of calls; the daemon's threads
    live as long as it does, so none takes its time away when it ends)."""
    total = 0
    for task in Path(f"/proc/{daemon.process.pid}/task").iterdir():
        with contextlib.suppress(OSError):
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def rss_kib(daemon: RunningDaemon) -> int:
    with open(f"/proc/{daemon.process.pid}/statm", "rb") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


async def timed_calls(client: ExecDaemonClient, call: ToolCall, count: int) -> list[float]:
    """Each call's time in µs, as the client sees it; every call must succeed."""
    times = []
    for _ in range(count):
        started = time.perf_counter()
        outcome = await client.run(call)
        times.append((time.perf_counter() - started) * 1e6)
        expect(outcome.result is not None, f"no result: {outcome.error}")
        assert outcome.result is not None
        case = outcome.result.WhichOneof("tool")
        result = getattr(outcome.result, case).result
        expect(result.WhichOneof("result") == "success", f"{case} failed: {result}")
    return times


def spread(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_us": round(statistics.median(ordered), 1),
        "p99_us": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1),
    }


def exporting_to(port: int) -> list[str]:
    return [
        "--ghost-mode", "false", "--trace-endpoint", f"http://127.0.0.1:{port}",
        "--trace-insecure", "--trace-auth-token", "bench-token",
    ]  # fmt: skip


GOAL_RATIO = 1.05
GHOST, TWIN = "ghost_mode", "ghost_mode_twin"
BOTH = (GHOST, TWIN)
EXPORTING = ("live", "slow", "dead")


@dataclass
class Samples:
    """Call times in µs by call kind, group of daemons and round; and the CPU seconds the
    group's daemons spent on them."""

    times: dict[str, dict[str, list[list[float]]]] = field(default_factory=dict)
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)

    def add(self, call: str, group: str, round_number: int, times: list[float], cpu: float) -> None:
        rounds = self.times.setdefault(call, {}).setdefault(group, [])
        while len(rounds) <= round_number:
            rounds.append([])
        rounds[round_number].extend(times)
        by_group = self.cpu.setdefault(call, {})
        by_group[group] = by_group.get(group, 0.0) + cpu

    def cpu_us_per_call(self, group: str, calls: Iterable[str]) -> float:
        used = sum(self.cpu[call][group] for call in calls)
        return used / sum(len(self.pooled(call, group)) for call in calls) * 1e6

    def pooled(self, call: str, group: str) -> list[float]:
        return [time for batch in self.times[call][group] for time in batch]

    def paired_ratio(self, call: str, group: str, reference: tuple[str, ...]) -> float:
        """The median over rounds of this group's median over the reference groups' (the
        mean of their medians) in the same round: a load that comes and goes moves both."""
        ratios = []
        for round_number, batch in enumerate(self.times[call][group]):
            medians = [
                statistics.median(self.times[call][name][round_number]) for name in reference
            ]
            ratios.append(statistics.median(batch) / statistics.fmean(medians))
        return statistics.median(ratios)


@dataclass
class GroupRun:
    """What the groups of daemons did: their calls' times and CPU, and what the collectors got."""

    samples: Samples
    # Daemon name -> its group (GHOST, TWIN or one of EXPORTING).
    groups: dict[str, str]
    # Daemon name -> [CPU seconds, calls]: how far a group's daemons are apart.
    spent: dict[str, list[float]]
    # Daemon name -> [RSS KiB before, after].
    rss: dict[str, list[int]]
    # What the live and the slow collector received (spans, tool calls counted).
    live: dict[str, int]
    slow: dict[str, int]


async def end_to_end(calls: int, rounds: int, per_group: int) -> dict[str, Any]:
    return report(await run_groups(calls, rounds, per_group), per_group)


async def run_groups(calls: int, rounds: int, per_group: int) -> GroupRun:
    async with contextlib.AsyncExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        workspace = root / "workspace"
        workspace.mkdir()
        (workspace / "small.txt").write_text("".join(f"line {n}\n" for n in range(50)))
        live_port, live_received = stack.enter_context(collector_process())
        slow_port, slow_received = stack.enter_context(collector_process(SLOW_EXPORT_SECONDS))
        ports = {"live": live_port, "slow": slow_port, "dead": dead_port()}
        quiet = ("--log-level", "info")
        arguments = {GHOST: quiet, TWIN: quiet} | {
            group: (*quiet, *exporting_to(port)) for group, port in ports.items()
        }
        # Two groups of identical ghost-mode daemons: how far apart they are is this machine's
        # noise.
        groups = {f"{group}-{number}": group for group in arguments for number in range(per_group)}
        daemons = {
            name: stack.enter_context(running_daemon(workspace, root / name, *arguments[group]))
            for name, group in groups.items()
        }
        clients = {
            name: await stack.enter_async_context(daemon.client())
            for name, daemon in daemons.items()
        }
        for client in clients.values():  # warm: imports, caches, the first export
            for call in END_TO_END_CALLS.values():
                await timed_calls(client, call, 5)
        rss_before = {name: rss_kib(daemon) for name, daemon in daemons.items()}
        samples = Samples()
        spent = {name: [0.0, 0] for name in daemons}
        order = list(clients)
        for round_number in range(rounds):
            # Each round starts with another daemon: none is always first after a pause.
            shift = round_number % len(order)
            for call_name, call in END_TO_END_CALLS.items():
                count = calls if call_name != "shell_true" else max(calls // 5, 5)
                for name in order[shift:] + order[:shift]:
                    cpu_before = cpu_seconds(daemons[name])
                    times = await timed_calls(clients[name], call, count)
                    cpu = cpu_seconds(daemons[name]) - cpu_before
                    samples.add(call_name, groups[name], round_number, times, cpu)
                    spent[name][0] += cpu
                    spent[name][1] += len(times)
        rss = {name: [rss_before[name], rss_kib(daemon)] for name, daemon in daemons.items()}
        dead = [daemon for name, daemon in daemons.items() if groups[name] == "dead"]
        await _until_each_tried(dead, f"traces to 127.0.0.1:{ports['dead']}")
        for name, group in groups.items():
            if group in ports:
                expect(daemons[name].stop() == 0, f"{name} did not stop cleanly")
        return GroupRun(samples, groups, spent, rss, live_received(), slow_received())


async def _until_each_tried(daemons: list[RunningDaemon], tried: str) -> None:
    """The dead group measured exporting, not daemons that never tried: the SDK logs each failed
    attempt, the first one a schedule delay (5 s) after the first span, which a quick run on a
    fast machine may not have reached yet. Waits for it (untimed), so the check means it."""
    deadline = time.monotonic() + DEAD_EXPORT_WAIT_SECONDS
    for daemon in daemons:
        while tried not in daemon.log():
            expect(
                time.monotonic() < deadline, f"a dead-port daemon never tried to export ({tried})"
            )
            await asyncio.sleep(0.2)


def report(run: GroupRun, per_group: int) -> dict[str, Any]:
    """The collectors' counts checked, then per call kind and group: times, ratios and CPU."""
    samples, live, slow = run.samples, run.live, run.slow
    timed = sum(len(samples.pooled(call, GHOST)) for call in END_TO_END_CALLS) // per_group
    made = (len(END_TO_END_CALLS) * 5 + timed) * per_group
    expect(live["spans"] == made, f"live collector: {live['spans']} spans of {made}")
    expect(live["tool_calls_counted"] == made, f"live collector: {live} for {made} calls")
    # A slow collector may get less (what is not sent within 2.5 s of shutdown is lost; the
    # metrics are sent every 60 s and at shutdown), but some spans: the group did export.
    expect(slow["tool_calls_counted"] <= made, f"slow collector: {slow} for {made} calls")
    expect(0 < slow["spans"] <= made, f"slow collector: {slow} for {made} calls")
    all_groups = (GHOST, TWIN, *EXPORTING)
    answer: dict[str, Any] = {
        call_name: call_report(samples, call_name) for call_name in END_TO_END_CALLS
    }
    cpu_per_call = {group: samples.cpu_us_per_call(group, END_TO_END_CALLS) for group in all_groups}
    answer["daemon_cpu_us_per_call"] = {name: round(us, 1) for name, us in cpu_per_call.items()}
    answer["rss_kib_before_after"] = run.rss
    answer["slow_collector"] = {**slow, "spans_sent": made}
    answer["daemons_per_group"] = per_group
    answer["calls_per_daemon"] = made // per_group
    each_daemon = {
        group: [
            used / calls * 1e6
            for name, (used, calls) in run.spent.items()
            if run.groups[name] == group
        ]
        for group in all_groups
    }
    answer["verdict"] = verdict(answer, cpu_per_call, each_daemon)
    return answer


def call_report(samples: Samples, call_name: str) -> dict[str, Any]:
    """One call kind: each group's times, its median and CPU per call over ghost mode (the
    twin against the first ghost group: the noise floor; the others against both), and the
    slow and dead groups against the live one."""
    ghost_cpu = statistics.fmean(samples.cpu_us_per_call(name, [call_name]) for name in BOTH)
    answer: dict[str, Any] = {
        group: {
            **spread(samples.pooled(call_name, group)),
            "over_ghost_ratio": round(
                samples.paired_ratio(call_name, group, (GHOST,) if group == TWIN else BOTH), 3
            ),
            "cpu_us_per_call": round(samples.cpu_us_per_call(group, [call_name]), 1),
            "cpu_over_ghost_ratio": round(
                samples.cpu_us_per_call(group, [call_name])
                / (samples.cpu_us_per_call(GHOST, [call_name]) if group == TWIN else ghost_cpu),
                3,
            ),
        }
        for group in (TWIN, *EXPORTING)
    }
    for group in ("slow", "dead"):  # a receiver down or slow against a healthy one
        answer[group]["over_live_ratio"] = round(
            samples.paired_ratio(call_name, group, ("live",)), 3
        )
    answer[GHOST] = {
        **spread(samples.pooled(call_name, GHOST)),
        "cpu_us_per_call": round(samples.cpu_us_per_call(GHOST, [call_name]), 1),
    }
    return answer


def verdict(
    answer: dict[str, Any], cpu_per_call: dict[str, float], each_daemon: dict[str, list[float]]
) -> dict[str, Any]:
    """Export on vs off, per exporting group: its daemons' CPU per call and its worst median
    (paired by round) over the two ghost-mode groups' mean, with a 95 % interval of the CPU
    ratio from how far apart the daemons of each group are (`each_daemon`: CPU µs per call of
    each); the noise floor is how far the twin group is from the first ghost-mode group, by the
    same measures. And what a receiver that is down or slow costs against a healthy one: the
    slow and dead groups over the live group."""

    def worst_median(name: str) -> float:
        return max(float(answer[call][name]["over_ghost_ratio"]) for call in END_TO_END_CALLS)

    ghost_cpu = statistics.fmean(cpu_per_call[name] for name in BOTH)
    ghosts = each_daemon[GHOST] + each_daemon[TWIN]
    ratios = {
        name: {
            "cpu_per_call_over_ghost": round(cpu_per_call[name] / ghost_cpu, 3),
            "cpu_per_call_over_ghost_95": ratio_interval(each_daemon[name], ghosts),
            "worst_median_over_ghost": round(worst_median(name), 3),
        }
        for name in EXPORTING
    }
    noise = {
        "cpu_per_call_over_ghost": round(cpu_per_call[TWIN] / cpu_per_call[GHOST], 3),
        "cpu_per_call_over_ghost_95": ratio_interval(each_daemon[TWIN], each_daemon[GHOST]),
        "worst_median_over_ghost": round(worst_median(TWIN), 3),
    }
    down_or_slow = {
        name: {
            "cpu_per_call_over_live": round(cpu_per_call[name] / cpu_per_call["live"], 3),
            "worst_median_over_live": max(
                float(answer[call][name]["over_live_ratio"]) for call in END_TO_END_CALLS
            ),
        }
        for name in ("slow", "dead")
    }
    within = all(
        ratios[name][measure] <= GOAL_RATIO
        for name in EXPORTING
        for measure in ("cpu_per_call_over_ghost", "worst_median_over_ghost")
    )
    return {
        "goal_ratio": GOAL_RATIO,
        "noise_floor": noise,
        **ratios,
        "exporting_within_goal": within,
        "receiver_down_or_slow_over_live": down_or_slow,
    }


def ratio_interval(values: list[float], reference: list[float]) -> list[float] | None:
    """A 95 % interval of mean(values) / mean(reference), from the spread of each (normal
    approximation: rough with a few daemons); None with fewer than two of each."""
    if min(len(values), len(reference)) < 2:
        return None
    ratio = statistics.fmean(values) / statistics.fmean(reference)
    relative = math.hypot(
        *(
            statistics.stdev(sample) / math.sqrt(len(sample)) / statistics.fmean(sample)
            for sample in (values, reference)
        )
    )
    return [round(ratio * (1 - 1.96 * relative), 3), round(ratio * (1 + 1.96 * relative), 3)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=25, help="calls per daemon per round")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument(
        "--daemons", type=int, default=4, help="daemons per group (ghost, twin, live, slow, dead)"
    )
    parser.add_argument("--in-process-calls", type=int, default=3000)
    add_quick_flag(parser)
    options = parser.parse_args()
    if options.quick:
        options.calls, options.rounds, options.in_process_calls = 10, 2, 200
        options.daemons = 1
    answer = {
        "end_to_end": asyncio.run(end_to_end(options.calls, options.rounds, options.daemons)),
        "in_process": asyncio.run(measure(options.in_process_calls, 3)),
        "load_average": os.getloadavg()[0],
    }
    print(json.dumps(answer, indent=2))


if __name__ == "__main__":
    main()
