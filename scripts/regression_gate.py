#!/usr/bin/env python3
"""The benchmarks' regression gate (`scripts/bench_all`): every gated benchmark's quick mode,
repeated, its RATIOS (each to a baseline measured in the same run, never an absolute time)
compared with the committed `scripts/bench_baseline.json`.

A row fails when its median over the repeats is worse than the baseline's by more than its
margin (CPU or WALL, below) plus the noise: half the larger of this run's spread over its
repeats and the baseline's (spread: (max - min) / median, in "cost" terms: a time ratio as is,
a throughput ratio inverted). The repeats are interleaved (every benchmark once, then again),
so a burst of load from other work falls on one repeat of each rather than on every repeat of
one.

`--update` writes the medians and spreads measured in this run as the new baseline (with
`--only`, of those rows alone): a deliberate step, committed with its reason (what changed, the machine's load). Exit status: 0
all rows within bounds (or updated), 1 a row worse than allowed, 2 a benchmark failed to run
(a wrong answer ends a benchmark with an error, not a number).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
BASELINE = SCRIPTS / "bench_baseline.json"
# How much worse than the baseline (a fraction of its cost), beyond the run's noise, a row may
# measure before the gate fails. Chosen from gate runs on unchanged code on the shared 2-core
# machine under load 15-30: the medians of CPU-time ratios (the daemon's CPU against the same
# work's elsewhere in the same run) moved by up to ~15 % between runs; those of wall-time
# ratios by 2x and more (scheduling delays land on one side or the other), so a wall-time row
# only catches a gross regression.
CPU = 0.15
WALL = 1.00
BENCH_SECONDS = 300.0


@dataclass(frozen=True)
class Row:
    """One gated ratio: where it is in a benchmark's JSON, and which way is better."""

    bench: str
    name: str
    path: tuple[str, ...]
    # How much worse than the baseline it may measure beyond the noise (a fraction of its cost).
    margin: float
    higher_is_better: bool = False

    def cost(self, report: dict[str, Any]) -> float:
        value: Any = report
        for key in self.path:
            if not isinstance(value, dict) or key not in value:
                raise KeyError(f"{self.bench}: no {'.'.join(self.path)} in its report")
            value = value[key]
        number = float(value)
        if number <= 0:
            raise ValueError(f"{self.bench}: {'.'.join(self.path)} is {number}")
        return 1 / number if self.higher_is_better else number


ROWS = (
    Row("bench_files", "grep_vs_rg_json", ("search", "grep", "ratio"), WALL),
    Row("bench_files", "glob_vs_rg_files", ("search", "glob", "ratio"), WALL),
    Row("bench_shell", "true_p50_vs_bare_bash", ("ratios", "true_p50_vs_bare_bash"), WALL),
    Row("bench_shell", "true_cpu_vs_client", ("ratios", "true_daemon_cpu_vs_client_cpu"), CPU),
    Row(
        "bench_shell",
        "output_mb_s_vs_bare_pipe",
        ("ratios", "output_mb_s_vs_bare_pipe"),
        WALL,
        higher_is_better=True,
    ),
    Row("bench_shell", "output_cpu_vs_client", ("ratios", "output_daemon_cpu_vs_client_cpu"), CPU),
    Row("bench_startup", "start_to_ping_vs_bare", ("daemon_over_bare_median_ratio",), WALL),
    Row("bench_startup", "start_cpu_vs_bare", ("daemon_over_bare_cpu_ratio",), CPU),
    Row(
        "bench_pty",
        "throughput_vs_raw_pty",
        ("throughput_vs_raw_pty_ceiling",),
        WALL,
        higher_is_better=True,
    ),
    Row("bench_pty", "cpu_per_byte_vs_terminado", ("server_cpu_per_byte_vs_terminado",), CPU),
    Row("bench_sandbox", "sandboxed_vs_plain", ("sandboxed_over_unsandboxed_median_ratio",), WALL),
    Row(
        "bench_sandbox", "sandboxed_cpu_vs_plain", ("cpu_ratios", "sandboxed_over_unsandboxed"), CPU
    ),
)


class BenchFailed(Exception):
    """A benchmark exited non-zero or printed no JSON."""


def run_quick(bench: str) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / f"{bench}.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=BENCH_SECONDS,
        check=False,
    )
    if run.returncode != 0:
        raise BenchFailed(f"{bench} --quick exited {run.returncode}: {run.stderr[-2000:]}")
    try:
        report: dict[str, Any] = json.loads(run.stdout)
    except json.JSONDecodeError as error:
        raise BenchFailed(f"{bench} --quick printed no JSON: {error}") from error
    return report


def spread(costs: list[float]) -> float:
    """(max - min) / median: the relative noise of one row over the repeats."""
    return (max(costs) - min(costs)) / statistics.median(costs)


def measure(rows: tuple[Row, ...], repeats: int) -> dict[str, dict[str, Any]]:
    """Each row's median cost and spread over `repeats` interleaved quick runs."""
    benches = list(dict.fromkeys(row.bench for row in rows))
    costs: dict[str, list[float]] = {row.name: [] for row in rows}
    for repeat in range(repeats):
        for bench in benches:
            started = time.monotonic()
            report = run_quick(bench)
            print(
                f"  {bench} --quick ({repeat + 1}/{repeats}): {time.monotonic() - started:.1f} s",
                file=sys.stderr,
                flush=True,
            )
            for row in rows:
                if row.bench == bench:
                    costs[row.name].append(row.cost(report))
    return {
        row.name: {
            "median_cost": round(statistics.median(costs[row.name]), 4),
            "spread": round(spread(costs[row.name]), 3),
            "costs": [round(cost, 4) for cost in costs[row.name]],
            "cost_is": "1 / ratio" if row.higher_is_better else "ratio",
        }
        for row in rows
    }


def judge(
    rows: tuple[Row, ...], measured: dict[str, Any], baseline: dict[str, Any], scale: float
) -> dict[str, Any]:
    """Per row: how much worse than the baseline (a fraction of its cost), what is allowed, and
    whether it passes. A row missing from the baseline passes (and says so)."""
    verdicts: dict[str, Any] = {}
    for row in rows:
        name, now = row.name, measured[row.name]
        base = baseline.get(name)
        if base is None:
            verdicts[name] = {"passed": True, "note": "not in the baseline"}
            continue
        worse_by = now["median_cost"] / base["median_cost"] - 1
        allowed = row.margin * scale + max(now["spread"], base["spread"]) / 2
        verdicts[name] = {
            "baseline_cost": base["median_cost"],
            "cost": now["median_cost"],
            "worse_by": round(worse_by, 3),
            "allowed": round(allowed, 3),
            "passed": worse_by <= allowed,
        }
    return verdicts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="+", metavar="BENCH", help="only these benchmarks")
    parser.add_argument("--update", action="store_true", help="write this run as the baseline")
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    parser.add_argument(
        "--margin-scale", type=float, default=1.0, help="multiplies every row's margin"
    )
    options = parser.parse_args()
    rows = tuple(row for row in ROWS if not options.only or row.bench in options.only)
    if not rows:
        parser.error(f"no gated benchmark among {options.only}")
    try:
        measured = measure(rows, options.repeats)
    except (BenchFailed, KeyError, ValueError, subprocess.TimeoutExpired) as failure:
        print(f"bench_all: {failure}", file=sys.stderr)
        return 2
    load = round(os.getloadavg()[0], 2)
    if options.update:
        if options.only and options.baseline.exists():  # the other rows stay as they were
            measured = {**json.loads(options.baseline.read_text())["rows"], **measured}
        document = {
            "about": "scripts/bench_all's baseline: written by `scripts/bench_all --update`, "
            "committed with its reason",
            "repeats": options.repeats,
            "load_1m": load,
            "cpus": os.cpu_count(),
            "rows": measured,
        }
        options.baseline.write_text(json.dumps(document, indent=2) + "\n")
        print(json.dumps(document, indent=2))
        return 0
    baseline = json.loads(options.baseline.read_text())["rows"]
    verdicts = judge(rows, measured, baseline, options.margin_scale)
    failed = sorted(name for name, verdict in verdicts.items() if not verdict["passed"])
    report = {
        "load_1m": load,
        "margin_scale": options.margin_scale,
        "measured": measured,
        "verdicts": verdicts,
        "failed": failed,
    }
    print(json.dumps(report, indent=2))
    for name in failed:
        verdict = verdicts[name]
        print(
            f"bench_all: {name} is {verdict['worse_by']:.0%} worse than the baseline "
            f"(allowed {verdict['allowed']:.0%})",
            file=sys.stderr,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
