#!/usr/bin/env python3
"""Cost curves: how each tool's cost grows with the repository and with the number of agents
(issue #17 part 4), printed as JSON.

Per tree kind (synthetic: generated text files in folders of 100; real: copies of the standard
library's text files) and per size (10k, 100k, 300k files, each a git repository with the same
`small/` folder of 100 files and `big/` folder of 5,000), one daemon serves the tree and each
figure is a median over rounds, with its baseline measured in the same run, alternating:

- grep for a common word vs `rg --json` (reading all of its output);
- glob `**/*.py` vs `rg --files` with the same filters and the same newest-first order
  (`--sortr modified`), and vs plain `rg --files -g` (unordered);
- ls of `big/` vs `ls -lU big`, and ls of `small/` (its cost must not grow with the tree);
- read of a 1 GB text file: the last 100 lines and 101 lines from its middle;
- GetWorkspaceChangesHash (nothing changed, then 1,000 files changed) vs `git status`;
- GetDiff with 1,000 changed .py files vs `git diff HEAD`;
- sem_search through a tool call (whatever the index does): the first call (capped, so a
  slow index cannot hold the run) and the next one;
- the background index (a daemon started on an empty index store): the first sem_search
  answer after start, the time to a complete index, a search on it, and small calls (read of
  a small file, ls of `small/`) p50/p99 while the index builds vs once it is complete (the
  goal: p99 at most 2x its idle value);
- 1, 10 and 50 agents, each on its own connection, running mixed calls at once (read of a
  small file, ls, glob and grep of `small/`): p50/p99 of the read, the daemon's CPU (cores
  used over the phase) and memory (RSS after, peak during).

Every answer is checked (a wrong one ends the run with exit status 1 and no JSON): grep's
matched lines and glob's files against ripgrep's own; a search that reaches the tool's own time
limit fails the run too (a timeout is not a point on the curve). `--quick`
(the test suite): one synthetic tree of 2,000 files, a 10 MB file, 100 changed files, 1 and 5
agents. Trees are built once under --data-dir and reused; the full run is heavy (run it nice'd).

    .venv/bin/python scripts/bench_scale.py [--sizes 10000,100000] [--kinds synthetic,real]
        [--rounds N] [--data-dir DIR] [--index-cap S] [--index-only] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.daemon_process when run as a script

from connectrpc.errors import ConnectError

from agent.v1.agent_pb2 import SemSearchArgs
from agent.v1.control_pb2 import GetDiffRequest, GetWorkspaceChangesHashRequest
from agent.v1.files_pb2 import (
    GlobToolArgs,
    GlobToolCall,
    GrepArgs,
    GrepToolCall,
    LsArgs,
    LsToolCall,
    ReadToolArgs,
    ReadToolCall,
)
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.cli import resolve_rg_path
from exec_daemon.client import ExecDaemonClient
from scripts.bench_files import (
    alternate,
    bench_read,
    build_big_file,
    expect_success,
    git,
    p50,
    rss_kb,
    rss_peak_reset,
    run_subprocess,
)
from scripts.benchmarking import add_quick_flag, expect, tool_success
from tests.daemon_process import running_daemon

SIZES = (10_000, 100_000, 300_000)
KINDS = ("synthetic", "real")
SMALL_FILES = 100
BIG_FOLDER_FILES = 5_000
CHANGED_FILES = 1_000
BIG_FILE_BYTES = 1 << 30
AGENTS = (1, 10, 50)
AGENT_ROUNDS = 10
SEM_SEARCH_CAP_SECONDS = 120.0
INDEX_CAP_SECONDS = 1800.0
IDLE_CALLS = 1000  # small calls timed once the index is complete
QUICK = {
    "sizes": (2_000,),
    "kinds": ("synthetic",),
    "big_folder_files": 500,
    "changed_files": 100,
    "big_file_bytes": 10_000_000,
    "agents": (1, 5),
    "agent_rounds": 3,
    "sem_search_cap_seconds": 5.0,
    "index_cap_seconds": 120.0,
}
GREP_WORD = "return"
GLOB = "**/*.py"
SEM_QUERY = "parse the header of an email message"
# Synthetic files: 12 lines each; every 10th file is a .py file.
SYNTHETIC_BODY = "".join(
    f"def step_{n}(value):\n    return value * {n}  # alpha beta gamma\n" for n in range(6)
)
MARK = "# changed by bench_scale.py\n"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Trees


def _write_folder(folder: Path, count: int, stem: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        suffix = ".py" if n % 10 == 0 else ".txt"
        (folder / f"{stem}{n:05d}{suffix}").write_text(SYNTHETIC_BODY)


def _synthetic_files(tree: Path, count: int) -> None:
    made, leaf = 0, 0
    while made < count:
        batch = min(100, count - made)
        _write_folder(tree / "s" / f"d{leaf // 100:03d}" / f"d{leaf % 100:02d}", batch, "f")
        made, leaf = made + batch, leaf + 1


def _library_sources(limit_bytes: int = 256 * 1024) -> Iterator[Path]:
    """The standard library's text files (no caches, no installed packages, no big files)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    skipped = {"__pycache__", "site-packages", "dist-packages"}
    for folder, dirs, files in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in skipped)
        for name in sorted(files):
            path = Path(folder, name)
            if path.suffix in {".pyc", ".so", ".a", ".o"} or path.is_symlink():
                continue
            if path.stat().st_size <= limit_bytes:
                yield path


def _real_files(tree: Path, count: int) -> None:
    sources = list(_library_sources())
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    made, copy = 0, 0
    while made < count:
        copy += 1
        for source in sources[: count - made]:
            target = tree / f"copy{copy:02d}" / source.relative_to(stdlib)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        made += min(len(sources), count - made)
        log(f"  {made} files copied")


def build_tree(data: Path, kind: str, size: int, big_folder: int) -> Path:
    """A git repository of `size` files of `kind`, `small/` and `big/` among them."""
    tree = data / f"{kind}-{size}"
    done = tree / ".git" / "bench-complete"
    if done.exists():
        return tree
    log(f"building the {kind} tree of {size} files")
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    _write_folder(tree / "small", SMALL_FILES, "f")
    _write_folder(tree / "big", big_folder, "b")
    rest = max(0, size - SMALL_FILES - big_folder)
    (_synthetic_files if kind == "synthetic" else _real_files)(tree, rest)
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "bench tree")
    done.write_text("")
    return tree


def tracked_files(tree: Path) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=tree, capture_output=True, check=True)
    return [name for name in listed.stdout.decode().split("\0") if name]


def change_files(tree: Path, names: list[str]) -> None:
    for name in names:
        with (tree / name).open("a") as out:
            out.write(MARK)


def restore(tree: Path) -> None:
    git(tree, "checkout", "-q", "--", ".")


# ---------------------------------------------------------------------------------------------
# Measurements


def grep_call(pattern: str, path: str = "") -> ToolCall:
    return ToolCall(grep_tool_call=GrepToolCall(args=GrepArgs(pattern=pattern, path=path)))


def glob_call(pattern: str, target: str = "") -> ToolCall:
    args = GlobToolArgs(glob_pattern=pattern, target_directory=target)
    return ToolCall(glob_tool_call=GlobToolCall(args=args))


def ls_call(path: str) -> ToolCall:
    return ToolCall(ls_tool_call=LsToolCall(args=LsArgs(path=path)))


def read_call(path: str) -> ToolCall:
    return ToolCall(read_tool_call=ReadToolCall(args=ReadToolArgs(path=path)))


async def checked(client: ExecDaemonClient, call: ToolCall, check: Callable[[Any], bool]) -> Any:
    success = await expect_success(client, call)
    expect(check(success), f"unexpected answer to {call.WhichOneof('tool')}: {str(success)[:300]}")
    return success


async def bench_grep_glob(
    client: ExecDaemonClient, tree: Path, rg: str, rounds: int
) -> dict[str, Any]:
    grep = grep_call(GREP_WORD)
    timed_out = await search_timed_out(client, grep)
    expect(timed_out is None, f"grep {GREP_WORD!r} timed out: {timed_out} (no answer to time)")
    found = await expect_success(client, grep)
    # The same search by ripgrep alone (hidden files too, not .git): the same matched lines.
    want = rg_matched_lines([rg, "--no-config", "--hidden", "-g", "!.git", "-e", GREP_WORD], tree)
    expect(
        found.total_matches == want > 0,
        f"grep {GREP_WORD!r}: {found.total_matches} matched lines, ripgrep alone {want}",
    )
    grep_result = await alternate(
        rounds,
        lambda: checked(client, grep, lambda s: s.total_matches == found.total_matches),
        lambda: run_subprocess([rg, "--no-config", "--json", "-e", GREP_WORD], tree),
    )
    grep_result["total_matches"] = found.total_matches
    glob = glob_call(GLOB)
    listed = await expect_success(client, glob)
    rg_glob = [rg, "--no-config", "--files", "--hidden", "-g", GLOB, "-g", "!.git"]
    want = (
        len(subprocess.run(rg_glob, cwd=tree, capture_output=True, check=True).stdout.split(b"\n"))
        - 1
    )
    expect(
        listed.total_files == want > 0,
        f"glob {GLOB}: {listed.total_files} files, ripgrep alone {want}",
    )
    same_work = await alternate(
        rounds,
        lambda: checked(client, glob, lambda s: s.total_files == listed.total_files),
        lambda: run_subprocess([*rg_glob, "--sortr", "modified"], tree),
    )
    unordered = await alternate(
        rounds,
        lambda: checked(client, glob, lambda s: s.total_files == listed.total_files),
        lambda: run_subprocess(rg_glob, tree),
    )
    return {
        "grep": grep_result,
        "glob": {
            **same_work,
            "total_files": listed.total_files,
            "unordered_baseline_p50_ms": unordered["baseline_p50_ms"],
            "ratio_to_unordered": unordered["ratio"],
        },
    }


def rg_matched_lines(command: list[str], tree: Path) -> int:
    """The matched lines ripgrep itself counts for `command` (its --json summary)."""
    done = subprocess.run([*command, "--json"], cwd=tree, capture_output=True, check=False)
    summary = json.loads(done.stdout.splitlines()[-1])
    expect(summary.get("type") == "summary", f"no ripgrep summary: {done.stderr[-300:]!r}")
    return int(summary["data"]["stats"]["matched_lines"])


async def search_timed_out(client: ExecDaemonClient, call: ToolCall) -> dict[str, Any] | None:
    """How long a search ran before the tool's own time limit ended it; None when it answered
    in time. A timeout is no answer: the run fails rather than time it as one."""
    started = time.perf_counter()
    outcome = await client.run(call)
    variant = outcome.result.WhichOneof("tool") if outcome.result is not None else None
    result = getattr(outcome.result, str(variant)).result if variant else None
    if result is None or result.WhichOneof("result") != "error" or result.error.code != "timeout":
        return None
    return {"timed_out_after_s": round(time.perf_counter() - started, 1)}


async def bench_ls(
    client: ExecDaemonClient, tree: Path, big_folder: int, rounds: int
) -> dict[str, Any]:
    shown = min(big_folder, 1000)
    big = await alternate(
        rounds,
        lambda: checked(client, ls_call("big"), lambda s: s.total_files == shown),
        lambda: run_subprocess(["ls", "-lU", "big"], tree),
    )
    small = await alternate(
        rounds,
        lambda: checked(client, ls_call("small"), lambda s: s.total_files == SMALL_FILES),
        lambda: run_subprocess(["ls", "-lU", "small"], tree),
    )
    return {"big_folder": {**big, "entries": big_folder}, "small_folder": small}


async def bench_changes(
    client: ExecDaemonClient, tree: Path, changed: int, rounds: int
) -> dict[str, Any]:
    hash_request = GetWorkspaceChangesHashRequest()

    async def changes_hash() -> str:
        answer = await client.control.get_workspace_changes_hash(
            hash_request, headers=client.headers
        )
        expect(bool(answer.hash), "GetWorkspaceChangesHash answered no hash")
        return str(answer.hash)

    status = ["git", "status", "--porcelain=v2", "-z", "--untracked-files=all"]
    clean_hash = await changes_hash()
    clean = await alternate(
        rounds,
        lambda: same(changes_hash, clean_hash),
        lambda: run_subprocess(status, tree),
    )
    # Python files: each shows the appended line in the diff (a binary file would not).
    names = [name for name in tracked_files(tree) if name.endswith(".py")][-changed:]
    expect(len(names) == changed, f"the tree has fewer than {changed} .py files")
    change_files(tree, names)
    try:
        dirty_hash = await changes_hash()
        expect(dirty_hash != clean_hash, "the hash did not change with files changed")
        dirty = await alternate(
            rounds,
            lambda: same(changes_hash, dirty_hash),
            lambda: run_subprocess(status, tree),
        )

        async def diff() -> None:
            answer = await client.control.get_diff(GetDiffRequest(), headers=client.headers)
            expect(answer.diff.count(MARK.strip()) == changed, "the diff misses changed files")

        diff_result = await alternate(
            rounds, diff, lambda: run_subprocess(["git", "diff", "HEAD"], tree)
        )
    finally:
        restore(tree)
    return {
        "changes_hash_clean": clean,
        "changes_hash_changed": dirty,
        "get_diff": diff_result,
        "changed_files": changed,
    }


async def same(produce: Callable[[], Awaitable[str]], want: str) -> None:
    got = await produce()
    expect(got == want, "the answer changed with nothing changed")


async def bench_sem_search(client: ExecDaemonClient, cap: float) -> dict[str, Any]:
    """The first search (it may have to index) and the next, each capped at `cap` seconds."""
    call = ToolCall()
    call.sem_search_tool_call.args.CopyFrom(SemSearchArgs(query=SEM_QUERY, max_results=5))
    timings: dict[str, Any] = {"cap_s": cap}
    for name in ("first_s", "next_s"):
        started, deadline = time.perf_counter(), asyncio.timeout(cap)
        try:
            async with deadline:
                outcome = await client.run(call)
        except (TimeoutError, ConnectError):
            # The client turns the cancelled call into ConnectError(CANCELED).
            if not deadline.expired():
                raise
            timings[name] = None
            timings["timed_out"] = True
            break
        timings[name] = round(time.perf_counter() - started, 3)
        success = tool_success(outcome)
        timings["results"] = len(success.results)
    return timings


async def timed_small_calls(
    client: ExecDaemonClient, samples: list[tuple[float, float]], count: int
) -> None:
    """`count` small calls in turn (read of a small file, ls of `small/`), each as (when it
    started, perf_counter s; how long it took, ms)."""
    for n in range(count):
        call = read_call(f"small/f{1 + n % 9:05d}.txt") if n % 2 == 0 else ls_call("small")
        started = time.perf_counter()
        await expect_success(client, call)
        samples.append((started, (time.perf_counter() - started) * 1000))


async def index_state(client: ExecDaemonClient) -> tuple[float, Any]:
    """One sem_search: its duration (s) and its answer (how complete the index is)."""
    call = ToolCall()
    call.sem_search_tool_call.args.CopyFrom(SemSearchArgs(query=SEM_QUERY, max_results=5))
    started = time.perf_counter()
    success = tool_success(await client.run(call))
    return time.perf_counter() - started, success


def small_call_figures(samples: list[tuple[float, float]], since: float) -> dict[str, Any]:
    """p50/p99 and the slowest calls (when, seconds after `since`: to tell a start-up pause
    from steady contention)."""
    took = [ms for _, ms in samples]
    slowest = sorted(samples, key=lambda sample: -sample[1])[:3]
    return {
        "p50_ms": p50(took),
        "p99_ms": percentile(took, 0.99),
        "calls": len(took),
        "slowest": [{"at_s": round(at - since, 2), "ms": round(ms, 1)} for at, ms in slowest],
    }


async def bench_background_index(tree: Path, cap: float) -> dict[str, Any]:
    """The goal "a big tree indexed in the background without any other call's p99 rising above
    2x its idle value": a daemon with an empty index store serves small calls while its index
    builds, then the same calls once the index is complete. Also the first sem_search answer
    after start, the time to a complete index and a search on it."""
    state_dir = tree.parent / f"state-index-{tree.name}"
    shutil.rmtree(state_dir, ignore_errors=True)  # an empty store: the index is built anew
    with running_daemon(tree, state_dir) as daemon:
        async with daemon.client(timeout_ms=900_000) as client:
            started = time.perf_counter()  # the index starts with the daemon
            first_s, first = await index_state(client)
            result: dict[str, Any] = {
                "first_answer_s": round(time.perf_counter() - started, 2),
                "first_answer_call_s": round(first_s, 2),
                "first_answer_results": len(first.results),
                "first_answer_indexed": f"{first.indexed_files}/{first.total_files}",
            }
            building: list[tuple[float, float]] = []
            state, checks = first, 0
            while not state.index_complete and time.perf_counter() - started < cap:
                await timed_small_calls(client, building, 20)
                checks += 1
                if checks % 10 == 0:  # a search also asks for a refresh: not too often
                    _, state = await index_state(client)
            complete = state.index_complete
            result["index_s"] = round(time.perf_counter() - started, 1) if complete else None
            result["indexed"] = f"{state.indexed_files}/{state.total_files}"
            result["index_complete"] = complete
            result["cap_s"] = cap
            if not complete:
                return result
            search_s, searched = await index_state(client)
            result["search_s"] = round(search_s, 3)
            expect(len(searched.results) > 0, "sem_search on the complete index found nothing")
            idle: list[tuple[float, float]] = []
            await timed_small_calls(client, idle, IDLE_CALLS)
            while_indexing = small_call_figures(building, started)
            result["small_call_while_indexing"] = while_indexing
            result["small_call_idle"] = small_call_figures(idle, started)
            if building:
                idle_p99 = result["small_call_idle"]["p99_ms"]
                result["p99_ratio"] = round(while_indexing["p99_ms"] / idle_p99, 2)
            peaks = [rss_kb(pid, "VmHWM") for pid in daemon.own_processes()]
            result["daemon_peak_rss_mb"] = round(peaks[0] / 1024, 1)
            result["index_process_peak_rss_mb"] = round(sum(peaks[1:]) / 1024, 1)
    return result


def cpu_seconds(pid: int, children: bool = False) -> float:
    """CPU time of `pid` itself, or of its ended children (ripgrep, git) it has waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    first = 13 if children else 11  # utime, stime / cutime, cstime
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 2)


async def agent(client: ExecDaemonClient, rounds: int, read_ms: list[float]) -> None:
    """Mixed calls on `small/`; each read of a small file is timed."""
    for n in range(rounds):
        started = time.perf_counter()
        name = f"small/f{1 + n % 9:05d}.txt"  # every 10th file is a .py file
        await checked(client, read_call(name), lambda s: len(s.ranges) > 0)
        read_ms.append((time.perf_counter() - started) * 1000)
        await checked(client, ls_call("small"), lambda s: s.total_files == SMALL_FILES)
        await checked(client, glob_call("*.py", "small"), lambda s: s.total_files == 10)
        await checked(client, grep_call("gamma", "small"), lambda s: s.total_matches > 0)


async def bench_agents(
    open_client: Callable[[], ExecDaemonClient], pid: int, counts: tuple[int, ...], rounds: int
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for count in counts:
        clients = [open_client() for _ in range(count)]
        try:
            await asyncio.gather(*(c.ping() for c in clients))
            read_ms: list[float] = []
            rss_peak_reset(pid)
            cpu_before, children_before = cpu_seconds(pid), cpu_seconds(pid, children=True)
            client_before, started = time.process_time(), time.perf_counter()
            await asyncio.gather(*(agent(c, rounds, read_ms) for c in clients))
            wall = time.perf_counter() - started
            cores = (cpu_seconds(pid) - cpu_before) / wall
            helper_cores = (cpu_seconds(pid, children=True) - children_before) / wall
            client_cores = (time.process_time() - client_before) / wall
        finally:
            await asyncio.gather(*(c.close() for c in clients))
        results[str(count)] = {
            "small_call_p50_ms": p50(read_ms),
            "small_call_p99_ms": percentile(read_ms, 0.99),
            "calls": count * rounds * 4,
            "wall_s": round(wall, 2),
            "daemon_cpu_cores": round(cores, 2),
            "helpers_cpu_cores": round(helper_cores, 2),  # ripgrep and git, run by the daemon
            "bench_client_cpu_cores": round(client_cores, 2),  # the agents' side, same machine
            "daemon_rss_mb": round(rss_kb(pid, "VmRSS") / 1024, 1),
            "daemon_peak_rss_mb": round(rss_kb(pid, "VmHWM") / 1024, 1),
        }
    return results


async def bench_size(
    tree: Path, files: int, big_file: Path, settings: dict[str, Any], rounds: int
) -> dict[str, Any]:
    rg = resolve_rg_path("rg")
    with running_daemon(tree, tree.parent / f"state-{tree.name}") as daemon:
        pid = daemon.process.pid
        async with daemon.client(timeout_ms=900_000) as client:
            results: dict[str, Any] = {"files": files}
            log(f"{tree.name}: search")
            results.update(await bench_grep_glob(client, tree, rg, rounds))
            results["ls"] = await bench_ls(client, tree, settings["big_folder_files"], rounds)
            log(f"{tree.name}: read")
            results["read_big_file"] = await bench_read(
                client, pid, big_file, settings["big_file_bytes"], rounds
            )
            log(f"{tree.name}: changes")
            results.update(await bench_changes(client, tree, settings["changed_files"], rounds))
            log(f"{tree.name}: agents")
            results["agents"] = await bench_agents(
                daemon.client, pid, settings["agents"], settings["agent_rounds"]
            )
            if settings["sem_search_cap_seconds"] > 0:
                log(f"{tree.name}: sem_search")
                # Last: a capped first search may leave the daemon indexing until it stops.
                results["sem_search"] = await bench_sem_search(
                    client, settings["sem_search_cap_seconds"]
                )
            results["daemon_peak_rss_mb"] = round(rss_kb(pid, "VmHWM") / 1024, 1)
    return results


def curve(by_size: dict[str, Any]) -> dict[str, Any]:
    """Each figure's growth from the smallest size to each larger one (time ratio over file
    ratio: 1 = linear, < 1 = sublinear)."""
    figures = {
        "grep_ms": ("grep", "tool_p50_ms"),
        "glob_ms": ("glob", "tool_p50_ms"),
        "ls_small_ms": ("ls", "small_folder", "tool_p50_ms"),
        "changes_hash_ms": ("changes_hash_changed", "tool_p50_ms"),
        "get_diff_ms": ("get_diff", "tool_p50_ms"),
    }
    sizes = sorted(by_size, key=int)
    growth: dict[str, Any] = {}
    for name, path in figures.items():
        values = []
        for size in sizes:
            value: Any = by_size[size]
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            values.append(value)
        growth[name] = {
            size: round((v / values[0]) / (int(size) / int(sizes[0])), 3)
            for size, v in zip(sizes[1:], values[1:], strict=True)
            if v is not None and values[0] is not None
        }
    return growth


def settings_for(args: argparse.Namespace) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "big_folder_files": BIG_FOLDER_FILES,
        "changed_files": CHANGED_FILES,
        "big_file_bytes": BIG_FILE_BYTES,
        "agents": AGENTS,
        "agent_rounds": AGENT_ROUNDS,
        "sem_search_cap_seconds": SEM_SEARCH_CAP_SECONDS,
        "index_cap_seconds": INDEX_CAP_SECONDS,
        "sizes": SIZES,
        "kinds": KINDS,
    }
    if args.quick:
        settings.update(QUICK)
    if args.sizes:
        settings["sizes"] = tuple(int(size) for size in args.sizes.split(","))
    if args.kinds:
        settings["kinds"] = tuple(args.kinds.split(","))
    if args.sem_search_cap is not None:
        settings["sem_search_cap_seconds"] = args.sem_search_cap
    if args.index_cap is not None:
        settings["index_cap_seconds"] = args.index_cap
    return settings


def bench(args: argparse.Namespace) -> dict[str, Any]:
    settings = settings_for(args)
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    big_file = data / "big.txt"
    settings["big_file_bytes"] = build_big_file(big_file, settings["big_file_bytes"])
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "load_1m": os.getloadavg()[0]},
        "rounds": args.rounds,
        "settings": {k: v for k, v in settings.items() if k not in {"sizes", "kinds"}},
    }
    for kind in settings["kinds"]:
        by_size: dict[str, Any] = {}
        for size in settings["sizes"]:
            tree = build_tree(data, kind, size, settings["big_folder_files"])
            if args.index_only:
                index = bench_background_index(tree, settings["index_cap_seconds"])
                by_size[str(size)] = {"background_index": asyncio.run(index)}
                continue
            files = len(tracked_files(tree))
            measured = bench_size(tree, files, big_file, settings, args.rounds)
            by_size[str(size)] = asyncio.run(measured)
            if settings["index_cap_seconds"] > 0:
                log(f"{tree.name}: background index")
                index = bench_background_index(tree, settings["index_cap_seconds"])
                by_size[str(size)]["background_index"] = asyncio.run(index)
        results[kind] = {"sizes": by_size}
        if len(by_size) > 1 and not args.index_only:
            results[kind]["growth_over_linear"] = curve(by_size)
    if args.index_only:
        return results
    first = results[settings["kinds"][0]]["sizes"][str(settings["sizes"][0])]
    results["summary"] = {
        "grep_ratio": first["grep"].get("ratio"),
        "glob_ratio_same_work": first["glob"]["ratio"],
        "ls_small_p50_ms": first["ls"]["small_folder"]["tool_p50_ms"],
        "background_index_p99_ratio": first.get("background_index", {}).get("p99_ratio"),
    }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="", help="comma-separated file counts")
    parser.add_argument("--kinds", default="", help="synthetic and/or real")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--sem-search-cap",
        type=float,
        default=None,
        help=f"seconds a sem_search call may take (default {SEM_SEARCH_CAP_SECONDS:g}; 0: skip)",
    )
    parser.add_argument(
        "--index-cap",
        type=float,
        default=None,
        help=f"seconds the background index may take (default {INDEX_CAP_SECONDS:g}; 0: skip)",
    )
    parser.add_argument(
        "--index-only",
        action="store_true",
        help="only the background-index phase (small calls while the index builds vs idle)",
    )
    add_quick_flag(parser)
    args = parser.parse_args()
    if args.quick:
        args.rounds = 2
    if args.data_dir is None:
        args.data_dir = "/tmp/exec-daemon-bench-scale" + ("-quick" if args.quick else "")
    results = bench(args)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
