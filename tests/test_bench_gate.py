"""The benchmarks' regression gate (scripts/bench_all, scripts/regression_gate.py).

The gate itself runs here, against the committed baseline (scripts/bench_baseline.json): a
change that makes a gated ratio worse than its margin plus the run's noise fails the suite in
the change that made it. A daemon whose shell output path burns twice the CPU (the
tests/slow_output/ sitecustomize) fails it; the judging rules are checked on made-up numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from scripts.regression_gate import CPU, ROWS, Row, judge
from tests.polling import generous

REPO = Path(__file__).resolve().parent.parent
BENCH_ALL = REPO / "scripts" / "bench_all"
SLOW_OUTPUT = Path(__file__).resolve().parent / "slow_output"
# A cap on a run that hangs, not a goal: the whole gate took ~5 min at load 28 on 2 cores.
GATE_SECONDS = generous(900)

TIME_ROW = Row("bench_x", "time_ratio", ("ratio",), CPU)
RATE_ROW = Row("bench_x", "rate_ratio", ("rate",), CPU, higher_is_better=True)


def measured(cost: float, spread: float) -> dict[str, Any]:
    return {"median_cost": cost, "spread": spread}


def test_a_row_30_percent_worse_than_its_baseline_fails_and_noise_widens_the_margin() -> None:
    baseline = {"time_ratio": measured(2.0, 0.02)}
    rows = (TIME_ROW,)
    assert judge(rows, {"time_ratio": measured(2.0, 0.05)}, baseline, 1.0)["time_ratio"]["passed"]
    assert judge(rows, {"time_ratio": measured(1.0, 0.05)}, baseline, 1.0)["time_ratio"]["passed"]
    worse = judge(rows, {"time_ratio": measured(2.6, 0.05)}, baseline, 1.0)["time_ratio"]
    assert not worse["passed"] and worse["worse_by"] == pytest.approx(0.3)
    noisy = judge(rows, {"time_ratio": measured(2.6, 0.4)}, baseline, 1.0)["time_ratio"]
    assert noisy["passed"], "a run as noisy as the change is not judged on it"


def test_a_throughput_ratio_is_judged_as_its_inverse() -> None:
    report = {"rate": 0.5}
    assert RATE_ROW.cost(report) == pytest.approx(2.0)
    baseline = {"rate_ratio": measured(RATE_ROW.cost({"rate": 1.0}), 0.0)}
    slower = judge((RATE_ROW,), {"rate_ratio": measured(2.0, 0.0)}, baseline, 1.0)
    assert not slower["rate_ratio"]["passed"]
    faster = judge((RATE_ROW,), {"rate_ratio": measured(0.5, 0.0)}, baseline, 1.0)
    assert faster["rate_ratio"]["passed"]


def test_every_gated_row_is_in_the_committed_baseline() -> None:
    baseline = json.loads((REPO / "scripts" / "bench_baseline.json").read_text())["rows"]
    assert sorted(baseline) == sorted(row.name for row in ROWS)


def run_gate(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    run = subprocess.run(
        [str(BENCH_ALL), *args],
        capture_output=True,
        text=True,
        timeout=GATE_SECONDS,
        check=False,
        env={**os.environ, **(env or {})},
    )
    report = json.loads(run.stdout) if run.stdout.strip() else {}
    return run.returncode, report, run.stderr[-3000:]


@pytest.mark.alone
@pytest.mark.timeout(GATE_SECONDS + 60)
def test_the_gate_passes_on_this_tree() -> None:
    returncode, report, stderr = run_gate()
    assert returncode == 0, f"{stderr}\n{json.dumps(report.get('verdicts'), indent=1)}"


@pytest.mark.alone
@pytest.mark.timeout(GATE_SECONDS + 60)
def test_the_gate_fails_when_the_shell_output_path_costs_twice_the_cpu() -> None:
    slowed = {"PYTHONPATH": str(SLOW_OUTPUT), "SLOW_OUTPUT_EXTRA": "1.0"}
    returncode, report, stderr = run_gate("--only", "bench_shell", env=slowed)
    assert returncode == 1, stderr
    assert "output_cpu_vs_client" in report["failed"], report["verdicts"]
    assert "true_cpu_vs_client" not in report["failed"], "only the output path was slowed"
