#!/usr/bin/env python3
"""sem_search benchmark, printed as JSON: quality (old path against new) and the index's speed.

Quality: the labelled queries of scripts/sem_search_queries.json over two code bases (this
repository's exec_daemon/, tools/, sandbox/ and pip/_internal from the venv), ranked by
tools/sem_search.py's index with each model and ranking: today's all-MiniLM-L6-v2 by vectors
alone (the old path), the static model distilled from it (tools/static_embeddings.py) alone and
fused with BM25 (the new path), MiniLM fused with BM25, and BM25 alone. Reported: recall@5 (the
share of queries with an expected file among the first 5 chunks) and MRR (over the first 10).
MiniLM's vectors are kept in --cache (keyed by content, as the daemon's store), so only the
first run pays for them (minutes of one core).

Speed, on the real daemon over a 2 MB copy of this repository's code (exec_daemon/, tools/,
sandbox/, tests/): the first answer with results after the daemon's start, the full index (time,
CPU and peak memory of the daemon with its index process), searches with nothing changed, a one-file edit until a search finds it,
and a restart with nothing changed until the index is complete. Goals (issue 17) are checked
and reported in `goals`.

`--quick` (the test suite): a small workspace for speed, the new path's quality on this
repository's queries only (no MiniLM).

    .venv/bin/python scripts/bench_sem_search.py [--rounds N] [--quick] [--cache DIR]
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.daemon_process when run as a script

from agent.v1.agent_pb2 import SemSearchArgs
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.cli import resolve_rg_path
from exec_daemon.client import ExecDaemonClient
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.state import Daemon
from scripts.benchmarking import add_quick_flag, expect, tool_success
from tests.daemon_process import running_daemon
from tools.embeddings import Embedder as MiniLM
from tools.sem_search import Embedder, SemanticIndex
from tools.static_embeddings import StaticEmbedder

QUERIES_FILE = REPO / "scripts" / "sem_search_queries.json"
QUICK_FILES = ["benchmarking.py", "bench_tracing.py"]
SPEED_QUERY = "where is the bearer token compared"
RECALL_AT = 5
MRR_DEPTH = 10
# Goals (issue 17): seconds, MiB.
GOALS = {
    "first_useful_answer_s": 5.0,
    "full_index_s": 20.0,
    "daemon_peak_rss_mib": 150.0,
    "restart_ready_s": 2.0,
    "one_edit_reindexed_ms": 200.0,
}
# The quick run's floor for the new path on this repository's queries (the full run compares).
QUICK_MIN_RECALL = 0.5


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks


def peak_rss_mib(pids: list[int]) -> float:
    """The sum of the processes' peak resident sets (an upper bound of their peak together)."""
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1])
    return total / 1024


# -- quality ------------------------------------------------------------------------------


def corpus_source(corpus: dict[str, Any]) -> list[tuple[Path, str]]:
    """(source folder, name in the workspace) pairs."""
    if corpus["kind"] == "repo":
        return [(REPO / folder, folder) for folder in corpus["folders"]]
    module = __import__(corpus["package"])
    return [(Path(module.__file__).parent / corpus["folder"], ".")]


def copy_corpus(corpus: dict[str, Any], workspace: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "data", "*.pyc")
    for source, name in corpus_source(corpus):
        shutil.copytree(source, workspace / name, ignore=ignore, dirs_exist_ok=True)


# The models, loaded in the index process (so a reference it can unpickle, not a function here).
minilm: Callable[[], Embedder] = MiniLM.load
static: Callable[[], Embedder] = StaticEmbedder.load


# name: (model, fused with BM25)
PATHS: dict[str, tuple[Callable[[], Embedder] | None, bool]] = {
    "old: MiniLM vectors": (minilm, False),
    "new: static + BM25": (static, True),
    "static vectors": (static, False),
    "MiniLM + BM25": (minilm, True),
}


async def rank_queries(
    workspace: Path,
    cache: Path,
    model: Callable[[], Embedder] | None,
    hybrid: bool,
    queries: list[dict[str, Any]],
) -> tuple[list[list[str]], float]:
    """The paths of each query's first MRR_DEPTH chunks, and the seconds the index took."""
    config = DaemonConfig(
        auth_token="-", workspace=workspace, rg_path=resolve_rg_path("rg"), terminals_folder=cache
    )
    daemon = Daemon(config)
    daemon.provide(
        SemanticIndex, lambda daemon: SemanticIndex(daemon, embedder_factory=model, hybrid=hybrid)
    )
    index = daemon.service(SemanticIndex)
    try:
        started = time.perf_counter()
        expect(await index.ready(3600), "the index was not completed")
        seconds = time.perf_counter() - started
        ranked = []
        for query in queries:
            hits, _state = await index.search(query["query"], [], MRR_DEPTH)
            ranked.append([str(Path(path).relative_to(workspace)) for _s, path, _c in hits])
        return ranked, seconds
    finally:
        await daemon.aclose()


def scores(ranked: list[list[str]], queries: list[dict[str, Any]]) -> dict[str, float]:
    found_at = []
    for paths, query in zip(ranked, queries, strict=True):
        ranks = [rank for rank, path in enumerate(paths, 1) if path in query["expected"]]
        found_at.append(ranks[0] if ranks else None)
    return {
        f"recall@{RECALL_AT}": round(
            sum(1 for rank in found_at if rank and rank <= RECALL_AT) / len(found_at), 3
        ),
        "mrr": round(sum(1 / rank for rank in found_at if rank) / len(found_at), 3),
        "queries": len(found_at),
    }


async def quality(root: Path, cache: Path, quick: bool) -> dict[str, Any]:
    labelled = json.loads(QUERIES_FILE.read_text())
    corpora = ["exec-daemon"] if quick else list(labelled["corpora"])
    paths = {"new: static + BM25": PATHS["new: static + BM25"]} if quick else PATHS
    report: dict[str, Any] = {}
    totals: dict[str, list[list[str]]] = {name: [] for name in paths}
    all_queries: list[dict[str, Any]] = []
    for corpus in corpora:
        workspace = root / "quality" / corpus
        copy_corpus(labelled["corpora"][corpus], workspace)
        queries = [query for query in labelled["queries"] if query["corpus"] == corpus]
        all_queries += queries
        for name, (model, hybrid) in paths.items():
            ranked, seconds = await rank_queries(workspace, cache, model, hybrid, queries)
            totals[name] += ranked
            report.setdefault(corpus, {})[name] = {
                **scores(ranked, queries),
                "index_s": round(seconds, 1),
            }
    report["all"] = {name: scores(ranked, all_queries) for name, ranked in totals.items()}
    return report


# -- speed --------------------------------------------------------------------------------


async def search(client: ExecDaemonClient, query: str) -> Any:
    call = ToolCall()
    call.sem_search_tool_call.args.CopyFrom(SemSearchArgs(query=query, max_results=5))
    return tool_success(await client.run(call))


async def until(
    client: ExecDaemonClient, query: str, done: Callable[[Any], bool], seconds: float = 600
) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        result = await search(client, query)
        if done(result):
            return result
        expect(time.monotonic() < deadline, f"{query!r}: never answered as expected")
        await asyncio.sleep(0.02)


def append_line(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n{line}\n")


async def speed(workspace: Path, state: Path, rounds: int, touched: Path) -> dict[str, Any]:
    report: dict[str, Any] = {}
    spawned = time.perf_counter()
    with running_daemon(workspace, state) as daemon:
        # Goals count from when the daemon serves (its own start-up: bench_startup.py).
        started = time.perf_counter()
        report["daemon_start_s"] = round(started - spawned, 2)
        async with daemon.client(timeout_ms=900_000) as client:
            first = await until(client, SPEED_QUERY, lambda r: len(r.results) > 0)
            report["first_useful_answer_s"] = round(time.perf_counter() - started, 2)
            report["first_answer_index_complete"] = first.index_complete
            full = await until(client, SPEED_QUERY, lambda r: r.index_complete)
            report["full_index_s"] = round(time.perf_counter() - started, 2)
            report["index_cpu_s"] = round(sum(map(cpu_seconds, daemon.own_processes())), 2)
            report["files"] = full.total_files
            unchanged = []
            for _ in range(rounds):
                before = time.perf_counter()
                await search(client, SPEED_QUERY)
                unchanged.append(time.perf_counter() - before)
            report["search_unchanged_p50_ms"] = round(statistics.median(unchanged) * 1000, 1)
            report["search_unchanged_max_ms"] = round(max(unchanged) * 1000, 1)
            marker = "zebracorn_quartz_marker"
            await asyncio.to_thread(append_line, touched, f"# {marker}")
            before = time.perf_counter()
            await until(
                client, marker, lambda r: any(marker in chunk.contents for chunk in r.results)
            )
            edit_seconds = time.perf_counter() - before
            report["one_edit_reindexed_ms"] = round(edit_seconds * 1000, 1)
            report["after_one_edit_over_unchanged_ratio"] = round(
                edit_seconds / statistics.median(unchanged), 2
            )
            report["daemon_peak_rss_mib"] = round(peak_rss_mib(daemon.own_processes()), 1)
    spawned = time.perf_counter()
    with running_daemon(workspace, state) as daemon:
        started = time.perf_counter()
        report["restart_daemon_start_s"] = round(started - spawned, 2)
        async with daemon.client(timeout_ms=900_000) as client:
            await until(client, SPEED_QUERY, lambda r: r.index_complete)
            report["restart_ready_s"] = round(time.perf_counter() - started, 2)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "exec-daemon-bench-sem-cache",
        help="where the quality runs keep embeddings between runs",
    )
    add_quick_flag(parser)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sem-") as name:
        root = Path(name)
        workspace = root / "workspace"
        if options.quick:
            options.rounds = 3
            (workspace / "scripts").mkdir(parents=True)
            for file in QUICK_FILES:
                shutil.copy(REPO / "scripts" / file, workspace / "scripts" / file)
            touched = workspace / "scripts" / QUICK_FILES[0]
        else:
            for part in ("exec_daemon", "tools", "sandbox", "tests"):
                ignore = shutil.ignore_patterns("__pycache__", "data")
                shutil.copytree(REPO / part, workspace / part, ignore=ignore)
            touched = workspace / "tools" / "workspace.py"
        result: dict[str, Any] = asyncio.run(
            speed(workspace, root / "state", options.rounds, touched)
        )
        result["workspace_mib"] = round(
            sum(path.stat().st_size for path in workspace.rglob("*") if path.is_file()) / 2**20, 2
        )
        result["quality"] = asyncio.run(quality(root, options.cache, options.quick))
    result["goals"] = {
        name: {"goal": goal, "measured": result[name], "met": result[name] <= goal}
        for name, goal in GOALS.items()
    }
    overall = result["quality"]["all"]
    new = overall["new: static + BM25"][f"recall@{RECALL_AT}"]
    if options.quick:
        expect(new >= QUICK_MIN_RECALL, f"the new path's recall@{RECALL_AT} fell to {new}")
    else:
        old = overall["old: MiniLM vectors"][f"recall@{RECALL_AT}"]
        result["goals"]["recall_loss_points"] = {
            "goal": 5.0,
            "measured": round((old - new) * 100, 1),
            "met": (old - new) * 100 <= 5.0,
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
