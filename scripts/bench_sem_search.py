#!/usr/bin/env python3
"""sem_search benchmark against the real daemon, printed as JSON.

The workspace is a copy of this repository's Python code (exec_daemon/, tools/, sandbox/,
tests/; about 2 MB). Measured: the first search (the daemon builds the index: its wall time and
the daemon's CPU time), searches with nothing changed (the refresh lists and stats the files,
then ranks), a search after one file changed (one file embedded again), and the daemon's peak
memory.

Every search must succeed with results, or the run ends with an error. `--quick` (the test
suite): the workspace is two small files of scripts/, 3 rounds.

    .venv/bin/python scripts/bench_sem_search.py [--rounds N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.daemon_process when run as a script

from agent.v1.agent_pb2 import SemSearchArgs
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from scripts.benchmarking import add_quick_flag, expect, tool_success
from tests.daemon_process import running_daemon

# The quick mode's workspace: a few small files (embedding on numpy costs ~0.2 s a chunk).
QUICK_FILES = ["benchmarking.py", "bench_tracing.py"]
QUERIES = [
    "where is the bearer token compared",
    "kill the whole process group on timeout",
    "parse the unified diff hunks",
    "take a screenshot of the virtual display",
]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def search(client: ExecDaemonClient, query: str) -> tuple[float, Any]:
    call = ToolCall()
    call.sem_search_tool_call.args.CopyFrom(SemSearchArgs(query=query, max_results=5))
    started = time.perf_counter()
    outcome = await client.run(call)
    elapsed = time.perf_counter() - started
    success = tool_success(outcome)
    expect(len(success.results) > 0, f"no result for {query!r}")
    return elapsed, outcome.result.sem_search_tool_call.result


def append_a_comment(path: Path) -> None:
    path.write_text(path.read_text() + "\n# changed\n")


async def bench(workspace: Path, state: Path, rounds: int, touched: Path) -> dict[str, Any]:
    with running_daemon(workspace, state) as daemon:
        pid = daemon.process.pid
        async with daemon.client(timeout_ms=900_000) as client:
            cpu_before = cpu_seconds(pid)
            first_seconds, first = await search(client, QUERIES[0])
            while not first.success.index_complete:
                await asyncio.sleep(1)
                first_seconds_more, first = await search(client, QUERIES[0])
                first_seconds += 1 + first_seconds_more
            index_cpu = cpu_seconds(pid) - cpu_before
            unchanged = []
            for index in range(rounds):
                seconds, _ = await search(client, QUERIES[index % len(QUERIES)])
                unchanged.append(seconds)
            append_a_comment(touched)
            after_edit_seconds, _ = await search(client, QUERIES[1])
            top = {}
            for query in QUERIES:
                _, result = await search(client, query)
                top[query] = [
                    f"{chunk.path}:{chunk.start_line} ({chunk.score:.2f})"
                    for chunk in result.success.results[:3]
                ]
            return {
                "files": first.success.total_files,
                "first_search_s": round(first_seconds, 2),
                "index_cpu_s": round(index_cpu, 2),
                "search_unchanged_p50_ms": round(statistics.median(unchanged) * 1000, 1),
                "search_unchanged_max_ms": round(max(unchanged) * 1000, 1),
                "search_after_one_edit_ms": round(after_edit_seconds * 1000, 1),
                "after_one_edit_over_unchanged_ratio": round(
                    after_edit_seconds / statistics.median(unchanged), 2
                ),
                "daemon_peak_rss_mib": round(peak_rss_mib(pid), 1),
                "top_results": top,
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    add_quick_flag(parser)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sem-") as root:
        workspace = Path(root) / "workspace"
        if options.quick:
            options.rounds = 3
            (workspace / "scripts").mkdir(parents=True)
            for name in QUICK_FILES:
                shutil.copy(REPO / "scripts" / name, workspace / "scripts" / name)
            touched = workspace / "scripts" / QUICK_FILES[0]
        else:
            for part in ("exec_daemon", "tools", "sandbox", "tests"):
                ignore = shutil.ignore_patterns("__pycache__", "data")
                shutil.copytree(REPO / part, workspace / part, ignore=ignore)
            touched = workspace / "tools" / "workspace.py"
        result = asyncio.run(bench(workspace, Path(root) / "state", options.rounds, touched))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
