#!/usr/bin/env python3
"""What telemetry adds to a tool call, printed as JSON (run by hand: .venv/bin/python scripts/bench_tracing.py).

Dispatches read_todos calls (the cheapest tool: the worst case for a relative overhead) back to
back in-process (no RPC), in ghost mode (no middleware at all) and with telemetry on (span,
metrics, logs): once exporting over OTLP/gRPC to a live loopback collector (tests/
test_telemetry_otlp.py's; it runs in this process, so its decoding competes for the GIL and the
number is an upper bound) and once to a dead port (nothing listens: every export fails).

Every call must succeed, and every span and call must reach the live collector, or the run ends
with an error.
`--quick` (the test suite): 2 rounds of 200 calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.* when run as a script

from agent.v1.shell_pb2 import ShellArgs, ShellToolCall
from agent.v1.todos_pb2 import ReadTodosArgs, ReadTodosToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.context import CallContext
from exec_daemon.registry import SPECS
from exec_daemon.rpc.dispatch import Dispatcher
from exec_daemon.server import new_daemon
from exec_daemon.telemetry.tracing import EXTRAS_KEY, tracing_middlewares
from scripts.benchmarking import add_quick_flag, expect
from tests.test_telemetry_otlp import grpc_collector, total

CALL = ToolCall(read_todos_tool_call=ReadTodosToolCall(args=ReadTodosArgs()))
SHELL_CALL = ToolCall(shell_tool_call=ShellToolCall(args=ShellArgs(command="echo hi")))
TRACE_HEADERS = {EXTRAS_KEY: {"traceparent": f"00-{'a' * 32}-{'b' * 16}-01"}}


async def per_call_us(
    dispatcher: Dispatcher, ctx: CallContext, calls: int, call: ToolCall = CALL
) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        answer = await dispatcher.run(call, ctx)
        case = answer.WhichOneof("tool")
        assert case is not None
        result = getattr(answer, case).result
        expect(result.WhichOneof("result") == "success", f"{case} failed: {result}")
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
    expect(exported == expected, f"{exported} spans received of {expected}")
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
        "spans_expected": expected,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    add_quick_flag(parser)
    options = parser.parse_args()
    if options.quick:
        options.calls, options.rounds = 200, 2
    print(json.dumps(asyncio.run(measure(options.calls, options.rounds)), indent=2))


if __name__ == "__main__":
    main()
