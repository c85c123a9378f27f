#!/usr/bin/env python3
"""An OTLP/gRPC collector in a process of its own, for benchmarks: the loopback collector of
tests/test_telemetry_otlp.py (traces, metrics, logs).

Prints its port on the first line, then, when its stdin closes, one JSON line: the spans
received, the tool calls the daemons counted (`exec_daemon.tool.calls`) and the spans they said
they dropped (`otel.sdk.processor.span.processed` with `error.type=queue_full`), summed over the
daemons that sent to it.
`--delay S`: each trace export takes S seconds more (a slow collector).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.*

from tests.test_telemetry_otlp import grpc_collector, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay", type=float, default=0.0)
    options = parser.parse_args()
    with grpc_collector(delay=options.delay) as (port, received):
        print(port, flush=True)
        sys.stdin.read()
        calls = dropped = 0.0
        for metrics in received.metrics_by_sender().values():
            if "exec_daemon.tool.calls" in metrics:
                calls += total(metrics["exec_daemon.tool.calls"])
            if "otel.sdk.processor.span.processed" in metrics:
                processed = metrics["otel.sdk.processor.span.processed"]
                dropped += total(processed, **{"error.type": "queue_full"})
        answer = {
            "spans": len(received.spans()),
            "tool_calls_counted": int(calls),
            "spans_dropped_counted": int(dropped),
        }
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
