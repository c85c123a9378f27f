#!/usr/bin/env python3
"""What tracing adds to a tool call, printed as JSON (run by hand: .venv/bin/python scripts/bench_tracing.py).

Dispatches read_todos calls back to back in-process (no RPC), in ghost mode (no middleware at
all) and with tracing on: once with a provider that exports nothing (the span itself) and once
exporting over OTLP/gRPC to a loopback receiver. That receiver runs in this process, so its
decoding competes for the GIL and the last number is an upper bound.

Every call must succeed and every span must reach the receiver, or the run ends with an error.
`--quick` (the test suite): 2 rounds of 200 calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.* when run as a script

from opentelemetry.sdk.trace import TracerProvider

from agent.v1.todos_pb2 import ReadTodosArgs, ReadTodosToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.context import CallContext
from exec_daemon.registry import SPECS
from exec_daemon.rpc.dispatch import Dispatcher
from exec_daemon.server import new_daemon
from exec_daemon.telemetry.tracing import EXTRAS_KEY, tracing_middleware, tracing_middlewares
from scripts.benchmarking import add_quick_flag, expect
from tests.test_tracing import grpc_receiver

CALL = ToolCall(read_todos_tool_call=ReadTodosToolCall(args=ReadTodosArgs()))
TRACE_HEADERS = {EXTRAS_KEY: {"traceparent": f"00-{'a' * 32}-{'b' * 16}-01"}}


async def per_call_us(dispatcher: Dispatcher, ctx: CallContext, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        answer = await dispatcher.run(CALL, ctx)
        result = answer.read_todos_tool_call.result
        expect(result.WhichOneof("result") == "success", f"read_todos failed: {result}")
    return (time.perf_counter() - started) / calls * 1e6


async def measure(calls: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder, grpc_receiver() as (port, received):
        workspace = Path(folder)
        ghost = new_daemon(DaemonConfig(auth_token="t", workspace=workspace))
        traced = new_daemon(
            DaemonConfig(
                auth_token="t",
                workspace=workspace,
                ghost_mode=False,
                trace_endpoint=f"127.0.0.1:{port}",
                trace_auth_token="bench",
                trace_insecure=True,
            )
        )
        no_export = tracing_middleware(TracerProvider().get_tracer("bench"))
        variants = {
            "ghost_mode": (Dispatcher(ghost, SPECS, tracing_middlewares(ghost)), ghost),
            "span_only": (Dispatcher(ghost, SPECS, [no_export]), ghost),
            "span_exported": (Dispatcher(traced, SPECS, tracing_middlewares(traced)), traced),
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for _round in range(rounds):
            for name, (dispatcher, daemon) in variants.items():
                ctx = CallContext(daemon=daemon, extras=TRACE_HEADERS)
                samples[name].append(await per_call_us(dispatcher, ctx, calls))
        await traced.aclose()
        exported = len(received.spans())
    expect(exported == calls * rounds, f"{exported} spans received of {calls * rounds}")
    ghost_us = statistics.median(samples["ghost_mode"])
    exported_us = statistics.median(samples["span_exported"])
    return {
        "calls_per_round": calls,
        "ghost_mode_dispatch_us": round(ghost_us, 1),
        "span_added_us": round(statistics.median(samples["span_only"]) - ghost_us, 1),
        "span_exported_added_us": round(exported_us - ghost_us, 1),
        "span_exported_over_ghost_ratio": round(exported_us / ghost_us, 2),
        "spans_received": exported,
        "spans_expected": calls * rounds,
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
