#!/usr/bin/env python3
"""Cost of the guards (redaction, permissions, hooks) around tool calls, printed as JSON.

1. guard overhead: the real Dispatcher running a no-op tool call (read_todos) in this process,
   with and without the guard middlewares (no hooks configured, permissions.json present, run
   mode allowlist; and with secret redaction on, 50 secrets), in alternating rounds. Compared to
   (2)'s end-to-end no-op call; the goal is <= 5 %.
2. end to end, on the real daemon (subprocess, one ExecStream, one call at a time): a no-op call
   with no hooks, and with one trivial hook (`true` on preToolUse) — the hook's added latency.
3. redaction throughput: a 100 MB stream of log-like text with 50 secrets sprinkled in, fed as
   64 KiB deltas through the stream redactor (split secrets handled), and as one 100 MB result;
   the goal is >= 200 MB/s. Also non-ASCII text.

    .venv/bin/python scripts/bench_guards.py [--calls N] [--megabytes M]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.* when run as a script

from agent.v1.todos_pb2 import ReadTodosToolCall  # noqa: E402
from agent.v1.tool_call_pb2 import ToolCall, ToolCallDelta  # noqa: E402
from exec_daemon.guards import guard_middlewares  # noqa: E402
from exec_daemon.guards.redaction import (  # noqa: E402
    SECRET_NAMES_VARIABLE,
    SecretMatcher,
    StreamRedactor,
)
from exec_daemon.kernel.config import DaemonConfig  # noqa: E402
from exec_daemon.kernel.context import CallContext  # noqa: E402
from exec_daemon.registry import SPECS  # noqa: E402
from exec_daemon.rpc.dispatch import Dispatcher  # noqa: E402
from exec_daemon.server import new_daemon  # noqa: E402
from tests.daemon_process import running_daemon  # noqa: E402

NOOP = ToolCall(read_todos_tool_call=ReadTodosToolCall())
GOAL_OVERHEAD_PERCENT = 5.0
GOAL_REDACTION_MB_S = 200.0
SECRET_COUNT = 50
DELTA_BYTES = 64 * 1024
REPEATS = 3


def make_secrets(rng: random.Random, count: int = SECRET_COUNT) -> list[str]:
    alphabet = string.ascii_letters + string.digits
    prefixes = ["sk-", "ghp_", "AKIA", "xoxb-", "glpat-", ""]
    return [
        rng.choice(prefixes) + "".join(rng.choice(alphabet) for _ in range(rng.randint(16, 48)))
        for _ in range(count)
    ]


def make_text(rng: random.Random, size: int, secrets: list[str], non_ascii: bool = False) -> str:
    words = ["GET", "/api/v1/users", "200", "in", "12ms", "debug:", "connection", "from",
             "10.0.0.7", "token", "value", "=", "{", "}", "build", "step", "ok", "warning"]  # fmt: skip
    if non_ascii:
        words += ["café", "naïve", "→", "日本語"]
    block = "".join(" ".join(rng.choice(words) for _ in range(10)) + "\n" for _ in range(4000))
    # One secret about every 8 KiB, some of them straddling the 64 KiB delta boundaries.
    pieces: list[str] = []
    length = 0
    while length < size:
        cut = rng.randrange(0, len(block) - 8192)
        piece = block[cut : cut + 8192] + rng.choice(secrets)
        pieces.append(piece)
        length += len(piece)
    return "".join(pieces)[:size]


def redaction_throughput(megabytes: int) -> dict[str, Any]:
    rng = random.Random(1)
    secrets = make_secrets(rng)
    matcher = SecretMatcher(secrets)
    results: dict[str, Any] = {"secrets": len(secrets), "megabytes": megabytes}
    for label, non_ascii in (("ascii", False), ("non_ascii", True)):
        text = make_text(rng, megabytes * 1_000_000, secrets, non_ascii)
        deltas = [text[i : i + DELTA_BYTES] for i in range(0, len(text), DELTA_BYTES)]
        size_mb = len(text.encode()) / 1e6
        stream_seconds = whole_seconds = float("inf")
        # Best of a few runs: the machine is shared, the fastest run is the least disturbed.
        for _run in range(REPEATS):
            stream = StreamRedactor()
            started = time.perf_counter()
            out = [stream.feed(matcher, delta) for delta in deltas]
            out.append(stream.flush(matcher))
            stream_seconds = min(stream_seconds, time.perf_counter() - started)
            streamed = "".join(out)
            started = time.perf_counter()
            whole = matcher.redact(text)
            whole_seconds = min(whole_seconds, time.perf_counter() - started)
        assert streamed == whole, "stream and whole-text redaction differ"
        assert not any(secret in whole for secret in secrets)
        results[label] = {
            "stream_64k_deltas_mb_s": round(size_mb / stream_seconds, 1),
            "one_result_mb_s": round(size_mb / whole_seconds, 1),
            "redacted": whole.count("[REDACTED]"),
        }
    results["goal_mb_s"] = GOAL_REDACTION_MB_S
    results["goal_met"] = results["ascii"]["stream_64k_deltas_mb_s"] >= GOAL_REDACTION_MB_S
    return results


async def time_calls(run: Callable[[], Awaitable[Any]], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        await run()
    return (time.perf_counter() - started) / calls * 1e6


def dispatcher(workspace: Path, guards: bool, **config: Any) -> tuple[Dispatcher, CallContext]:
    daemon = new_daemon(DaemonConfig(auth_token="t", workspace=workspace, **config))
    secrets = make_secrets(random.Random(2))
    names = [f"BENCH_SECRET_{i}" for i in range(len(secrets))]
    daemon.env.update(
        {**dict(zip(names, secrets, strict=True)), SECRET_NAMES_VARIABLE: ",".join(names)}
    )
    middlewares = guard_middlewares(daemon) if guards else []

    async def discard(_delta: ToolCallDelta) -> None:
        return None

    return Dispatcher(daemon, SPECS, middlewares), CallContext(daemon=daemon, emit=discard)


async def guard_overhead(calls: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        (workspace / ".cursor").mkdir()
        (workspace / ".cursor" / "permissions.json").write_text('{"terminalAllowlist": ["git"]}')
        variants = {
            "bare": dispatcher(workspace, guards=False),
            "guards": dispatcher(workspace, guards=True, run_mode="allowlist"),
            "guards_redaction": dispatcher(
                workspace, guards=True, run_mode="allowlist", secret_redaction_enabled=True
            ),
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for _round in range(7):
            for name, (chain, ctx) in variants.items():
                samples[name].append(await time_calls(lambda c=chain, x=ctx: c.run(NOOP, x), calls))
    bare = statistics.median(samples["bare"])
    return {
        "noop_dispatch_us": round(bare, 2),
        "guards_added_us": round(statistics.median(samples["guards"]) - bare, 2),
        "guards_with_redaction_added_us": round(
            statistics.median(samples["guards_redaction"]) - bare, 2
        ),
    }


async def end_to_end(calls: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        workspace = root / "workspace"
        workspace.mkdir()
        hooks = workspace / ".cursor" / "hooks.json"
        with running_daemon(workspace, root / "state", "--log-level", "warn") as daemon:
            async with daemon.client() as client, client.exec_stream() as stream:

                async def one_call() -> None:
                    call = await stream.start(NOOP)
                    outcome = await call.wait()
                    assert outcome.result is not None, outcome.error

                for _ in range(50):
                    await one_call()
                no_hooks, one_hook = [], []
                for _round in range(5):
                    hooks.unlink(missing_ok=True)
                    no_hooks.append(await time_calls(one_call, calls))
                    hooks.parent.mkdir(exist_ok=True)
                    trivial = {"version": 1, "hooks": {"preToolUse": [{"command": "true"}]}}
                    hooks.write_text(json.dumps(trivial))
                    one_hook.append(await time_calls(one_call, max(20, calls // 20)))
    noop = statistics.median(no_hooks)
    return {
        "noop_call_us": round(noop, 1),
        "one_trivial_hook_call_us": round(statistics.median(one_hook), 1),
        "one_trivial_hook_added_us": round(statistics.median(one_hook) - noop, 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--megabytes", type=int, default=100)
    options = parser.parse_args()
    overhead = await guard_overhead(options.calls)
    e2e = await end_to_end(max(100, options.calls // 4))
    percent = overhead["guards_added_us"] / e2e["noop_call_us"] * 100
    percent_redaction = overhead["guards_with_redaction_added_us"] / e2e["noop_call_us"] * 100
    report = {
        "load_average_1m": os.getloadavg()[0],
        "guard_overhead": {
            **overhead,
            "noop_call_us": e2e["noop_call_us"],
            "added_percent_of_noop_call": round(percent, 2),
            "added_percent_with_redaction": round(percent_redaction, 2),
            "goal_percent": GOAL_OVERHEAD_PERCENT,
            "goal_met": percent <= GOAL_OVERHEAD_PERCENT,
        },
        "hooks": e2e,
        "redaction": redaction_throughput(options.megabytes),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
