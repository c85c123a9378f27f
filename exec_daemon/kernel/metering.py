"""What the daemon counts, recorded through one small interface every layer may import.

Tools, guards, the sandbox and terminals call `daemon.service(Meter)` and record by name
(`meter.add(Metric.HOOK_RUNS, outcome="deny")`); they never import exec_daemon/telemetry/. The
default `Meter` does nothing (ghost mode: no SDK is even imported). When telemetry is on, the
composition root (exec_daemon/server.py) provides exec_daemon/telemetry/metrics.py's OTLP one,
which exports each `Metric` below as an OTLP metric of that name, kind and unit.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exec_daemon.kernel.state import Daemon


class Kind(enum.Enum):
    COUNTER = "counter"  # only grows: `add`
    UP_DOWN = "up_down"  # goes up and down: `add` with +1 / -1
    HISTOGRAM = "histogram"  # a distribution: `record`


@dataclass(frozen=True)
class Instrument:
    name: str
    kind: Kind
    unit: str
    description: str


class Metric(enum.Enum):
    """Every metric the daemon's layers record (the telemetry layer adds the process gauges and
    the tool-call metrics itself: exec_daemon/telemetry/metrics.py)."""

    SHELL_BYTES = Instrument(
        "exec_daemon.shell.streamed.bytes",
        Kind.COUNTER,
        "By",
        "Shell output bytes streamed to the client (label stream: stdout|stderr)",
    )
    LIVE_SHELL_SESSIONS = Instrument(
        "exec_daemon.shell.sessions", Kind.UP_DOWN, "{session}", "Live shell sessions"
    )
    LIVE_TERMINALS = Instrument(
        "exec_daemon.terminals", Kind.UP_DOWN, "{terminal}", "Live PTY terminals"
    )
    LIVE_EXEC_STREAMS = Instrument(
        "exec_daemon.exec_streams", Kind.UP_DOWN, "{stream}", "Open ExecStream RPCs"
    )
    SANDBOX_DECISIONS = Instrument(
        "exec_daemon.sandbox.decisions",
        Kind.COUNTER,
        "{decision}",
        "Sandbox decisions of shell calls (label outcome: confined|unconfined|refused)",
    )
    HOOK_RUNS = Instrument(
        "exec_daemon.hook.runs",
        Kind.COUNTER,
        "{run}",
        "Hook processes run (label outcome: allow|deny|ask|none|failed)",
    )


class Meter:
    """Records nothing: what the daemon uses unless telemetry is on."""

    def __init__(self, daemon: Daemon | None = None) -> None:
        pass

    def add(self, metric: Metric, amount: int = 1, **labels: str) -> None:
        """Adds `amount` to a COUNTER or UP_DOWN metric."""

    def record(self, metric: Metric, value: float, **labels: str) -> None:
        """Records one value of a HISTOGRAM metric."""

    def watch(self, metric: Metric, read: Callable[[], int]) -> None:
        """Makes an UP_DOWN metric read `read()` at each export instead of being added to.

        `read` runs on the exporter's thread: it must only read (e.g. `len` of a collection)."""
