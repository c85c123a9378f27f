#!/usr/bin/env python3
"""Workspace tool benchmarks against the real daemon, printed as JSON (issue #4's goals).

In one run, on one daemon whose workspace is a ≥ 20k-file git repository made of copies of
the Python standard library (built once under --data-dir, then reused):

- grep for a common word (content mode, default bounds) vs plain `rg --json` from a subprocess
  (reading all its output), p50 ratio, goal ≤ 1.15;
- glob `**/*.py` vs plain `rg --files -g '**/*.py'`, p50 ratio, goal ≤ 1.2;
- read of a 1 GiB text file: the last 100 lines (offset -100) ≤ 20 ms, and lines
  1,000,000-1,000,100 ≤ 200 ms, each with ≤ 20 MB growth of the daemon's peak RSS (VmHWM,
  reset before each call through /proc/PID/clear_refs);
- GetWorkspaceChangesHash with 10 changed files, p50 ≤ 200 ms.

Tool and baseline runs alternate so that load from other work on the machine falls on both.
The file is in the page cache (it was just written or read); cold-cache reads are not measured.

Every answer is checked (each search finds what the first one found, each read returns the
lines asked for, the hash is stable, every rg exits 0); a wrong one ends the run with an error.
`--quick` (the test suite): a tree of ~300 files (copies of the stdlib's email package), a
10 MB file, 3 rounds, in its own data directory.

    .venv/bin/python scripts/bench_files.py [--rounds N] [--data-dir DIR] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.daemon_process when run as a script

from agent.v1.control_pb2 import GetWorkspaceChangesHashRequest
from agent.v1.files_pb2 import (
    GlobToolArgs,
    GlobToolCall,
    GrepArgs,
    GrepToolCall,
    ReadToolArgs,
    ReadToolCall,
)
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.cli import resolve_rg_path
from exec_daemon.client import ExecDaemonClient
from scripts.benchmarking import add_quick_flag, expect, tool_success
from tests.daemon_process import running_daemon

MIN_FILES = 20_000
BIG_FILE_BYTES = 1 << 30
MIDDLE_LINE = 1_000_000
QUICK_MIN_FILES = 300
QUICK_BIG_FILE_BYTES = 10_000_000
LINE_WIDTH = 100  # bytes per line of the big file, newline included
GREP_WORD = "return"
GOALS = {
    "grep_ratio": 1.15,
    "glob_ratio": 1.2,
    "read_tail_ms": 20.0,
    "read_middle_ms": 200.0,
    "read_rss_growth_mb": 20.0,
    "changes_hash_ms": 200.0,
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=bench@example.com", "-c", "user.name=bench", *args],
        cwd=cwd,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def build_tree(tree: Path, min_files: int, source: Path) -> int:
    """Copies of `source` (part of the standard library) until there are `min_files` files,
    committed to git."""
    done = tree / ".bench-complete"
    if not done.exists():
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        count, copy = 0, 0
        while count < min_files:
            copy += 1
            log(f"copying {source} ({count} files so far)")
            shutil.copytree(
                source,
                tree / f"copy{copy:02d}",
                symlinks=True,
                ignore=shutil.ignore_patterns("site-packages", "dist-packages"),
            )
            count = sum(len(files) for _, _, files in os.walk(tree))
        git(tree, "init", "-q")
        git(tree, "add", "-A")
        git(tree, "commit", "-qm", "bench tree")
        done.write_text("")
    return int(
        subprocess.run(["git", "ls-files"], cwd=tree, capture_output=True, check=True).stdout.count(
            b"\n"
        )
    )


def build_big_file(path: Path, size: int) -> int:
    """A text file of `size` bytes (rounded up to whole blocks): line N reads `000000000N xxx`."""
    if not path.exists() or path.stat().st_size < size:
        log(f"writing the {size} byte text file")
        filler = "x" * (LINE_WIDTH - 12)
        block_lines = 100_000
        with path.open("w") as out:
            written, line = 0, 1
            while written < size:
                block = "".join(f"{n:010d} {filler}\n" for n in range(line, line + block_lines))
                out.write(block)
                written += len(block)
                line += block_lines
    return path.stat().st_size


def rss_peak_reset(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def rss_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


async def timed(run: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await run()
    return (time.perf_counter() - started) * 1000


def p50(samples: list[float]) -> float:
    return round(statistics.median(samples), 2)


async def alternate(
    rounds: int, tool: Callable[[], Awaitable[Any]], baseline: Callable[[], Awaitable[Any]]
) -> dict[str, Any]:
    await tool()  # warm both (page cache, daemon code paths)
    await baseline()
    tool_ms, base_ms = [], []
    for _ in range(rounds):
        base_ms.append(await timed(baseline))
        tool_ms.append(await timed(tool))
    return {
        "tool_p50_ms": p50(tool_ms),
        "baseline_p50_ms": p50(base_ms),
        "ratio": round(statistics.median(tool_ms) / statistics.median(base_ms), 3),
        "tool_ms": [round(x, 1) for x in tool_ms],
        "baseline_ms": [round(x, 1) for x in base_ms],
    }


async def run_subprocess(command: list[str], cwd: Path) -> None:
    def run() -> int:
        return subprocess.run(command, cwd=cwd, capture_output=True, check=False).returncode

    returncode = await asyncio.to_thread(run)
    expect(returncode == 0, f"{command} exited with {returncode}")


async def expect_success(client: ExecDaemonClient, call: ToolCall) -> Any:
    return tool_success(await client.run(call))


async def expect_same(client: ExecDaemonClient, call: ToolCall, first: Any, *fields: str) -> None:
    """The call succeeds and answers what it answered the first time in these fields."""
    again = await expect_success(client, call)
    for name in fields:
        got, want = getattr(again, name), getattr(first, name)
        expect(got == want, f"{name} is {got}, the first call answered {want}")


async def bench_search(
    client: ExecDaemonClient, tree: Path, rg: str, rounds: int
) -> dict[str, Any]:
    grep = ToolCall(grep_tool_call=GrepToolCall(args=GrepArgs(pattern=GREP_WORD)))
    found = await expect_success(client, grep)
    expect(found.total_matches > 0, f"grep found no {GREP_WORD!r} in the tree")
    grep_result = await alternate(
        rounds,
        lambda: expect_same(client, grep, found, "total_matches", "total_files"),
        lambda: run_subprocess([rg, "--no-config", "--json", "-e", GREP_WORD], tree),
    )
    grep_result.update(total_matches=found.total_matches, total_files=found.total_files)
    glob = ToolCall(glob_tool_call=GlobToolCall(args=GlobToolArgs(glob_pattern="**/*.py")))
    listed = await expect_success(client, glob)
    expect(listed.total_files > 0, "glob found no .py file in the tree")
    glob_result = await alternate(
        rounds,
        lambda: expect_same(client, glob, listed, "total_files"),
        lambda: run_subprocess([rg, "--no-config", "--files", "-g", "**/*.py"], tree),
    )
    glob_result.update(total_files=listed.total_files)
    return {"grep": grep_result, "glob": glob_result}


async def read_lines(client: ExecDaemonClient, call: ToolCall, first_line: int) -> Any:
    """Reads and checks that the answer starts at `first_line`, with that line's text. A read
    from the end of a file too large to count may number its lines from the end instead."""
    success = await expect_success(client, call)
    expect(len(success.ranges) > 0, "the read answered no lines")
    got = success.ranges[0]
    from_end = call.read_tool_call.args.offset if success.total_lines_unknown else None
    expect(got.start_line in (first_line, from_end), f"the read starts at line {got.start_line}")
    expect(
        f"{first_line:010d} " in got.contents[:200],
        f"line {first_line} reads {got.contents[:80]!r}",
    )
    return success


async def bench_read(
    client: ExecDaemonClient, pid: int, path: Path, size: int, rounds: int
) -> dict[str, Any]:
    total_lines = size // LINE_WIDTH
    middle = min(MIDDLE_LINE, total_lines // 2)
    cases = {
        "tail_100": (ReadToolArgs(path=str(path), offset=-100), total_lines - 99),
        "middle_101_lines": (ReadToolArgs(path=str(path), offset=middle, limit=101), middle),
    }
    results: dict[str, Any] = {}
    for name, (args, first_line) in cases.items():
        call = ToolCall(read_tool_call=ReadToolCall(args=args))
        success = await read_lines(client, call, first_line)
        first = success.ranges[0]
        samples, growth = [], []
        for _ in range(rounds):
            rss_peak_reset(pid)
            before = rss_kb(pid, "VmRSS")
            samples.append(await timed(lambda c=call, n=first_line: read_lines(client, c, n)))
            growth.append((rss_kb(pid, "VmHWM") - before) / 1024)
        results[name] = {
            "p50_ms": p50(samples),
            "max_ms": round(max(samples), 2),
            "max_rss_growth_mb": round(max(growth), 2),
            "lines": [first.start_line, first.end_line],
            "total_lines_unknown": success.total_lines_unknown,
        }
    return results


def change_files(tree: Path, count: int) -> list[Path]:
    changed = sorted(tree.glob("copy01/*.py"))[:count]
    for path in changed:
        with path.open("a") as out:
            out.write("# changed by bench_files.py\n")
    return changed


async def bench_changes_hash(client: ExecDaemonClient, tree: Path, rounds: int) -> dict[str, Any]:
    changed = change_files(tree, 10)
    try:
        request = GetWorkspaceChangesHashRequest()

        async def call() -> Any:
            return await client.control.get_workspace_changes_hash(request, headers=client.headers)

        first = await call()
        expect(bool(first.hash), "GetWorkspaceChangesHash answered no hash")

        async def same_hash() -> None:
            answer = await call()
            expect(answer.hash == first.hash, "the hash changed with nothing changed")

        samples = [await timed(same_hash) for _ in range(rounds)]
    finally:
        git(tree, "checkout", "-q", "--", *[str(p.relative_to(tree)) for p in changed])
    return {"p50_ms": p50(samples), "changed_files": len(changed)}


def verdict(results: dict[str, Any]) -> dict[str, bool]:
    reads = results["read_big_file"].values()
    return {
        "grep_ratio": results["search"]["grep"]["ratio"] <= GOALS["grep_ratio"],
        "glob_ratio": results["search"]["glob"]["ratio"] <= GOALS["glob_ratio"],
        "read_tail_ms": results["read_big_file"]["tail_100"]["p50_ms"] <= GOALS["read_tail_ms"],
        "read_middle_ms": results["read_big_file"]["middle_101_lines"]["p50_ms"]
        <= GOALS["read_middle_ms"],
        "read_rss_growth_mb": all(
            r["max_rss_growth_mb"] <= GOALS["read_rss_growth_mb"] for r in reads
        ),
        "changes_hash_ms": results["changes_hash"]["p50_ms"] <= GOALS["changes_hash_ms"],
    }


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(args.data_dir)
    tree = data / "tree"
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    if args.quick:
        files = build_tree(tree, QUICK_MIN_FILES, stdlib / "email")
        size = build_big_file(data / "big.txt", QUICK_BIG_FILE_BYTES)
    else:
        files = build_tree(tree, MIN_FILES, stdlib)
        size = build_big_file(data / "big.txt", BIG_FILE_BYTES)
    big = data / "big.txt"
    rg = resolve_rg_path("rg")
    with running_daemon(tree, data / "state") as daemon:
        async with daemon.client() as client:
            results: dict[str, Any] = {
                "machine": {"cpus": os.cpu_count(), "load_1m": os.getloadavg()[0]},
                "tree_files": files,
                "big_file_bytes": size,
                "rounds": args.rounds,
                "search": await bench_search(client, tree, rg, args.rounds),
                "read_big_file": await bench_read(
                    client, daemon.process.pid, big, size, args.rounds
                ),
                "changes_hash": await bench_changes_hash(client, tree, args.rounds),
            }
    results["goals"] = GOALS
    results["met"] = verdict(results)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--data-dir", default=None)
    add_quick_flag(parser)
    args = parser.parse_args()
    if args.quick:
        args.rounds = 3
    if args.data_dir is None:
        args.data_dir = "/tmp/exec-daemon-bench-files" + ("-quick" if args.quick else "")
    results = asyncio.run(bench(args))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
