"""The daemon's metrics as OpenTelemetry instruments, exported over OTLP with the spans.

Built only when telemetry is on (exec_daemon/telemetry/tracing.py decides); in ghost mode the
layers record into exec_daemon/kernel/metering.py's no-op `Meter`.

Names and units. OpenTelemetry semantic conventions where one exists:
- `process.memory.usage` (By): the daemon's resident set size (semconv process metrics).
- `process.unix.file_descriptor.count` ({file_descriptor}): its open fds (semconv process).
- `otel.sdk.processor.span.processed` / `otel.sdk.processor.log.processed` ({span}/{log}) with
  `error.type=queue_full`: spans and log records dropped because the export queue was full; and
  `otel.sdk.exporter.span.exported` / `...log.exported` with `error.type`: those an export
  failed to deliver (semconv OTel SDK metrics, emitted by the SDK's processors and exporters).
The seed daemon's own names (no convention exists for them): `computer_use.session.duration`
(s), `computer_use.session.action_count` ({action}), `computer_use.result` ({session}, label
`outcome`). The daemon's own, under `exec_daemon.`: `exec_daemon.tool.call.duration` (s, a
histogram like semconv's `rpc.server.duration`, which is in ms and per RPC, not per tool call)
and `exec_daemon.tool.calls` ({call}), both labelled `tool` and `outcome` (the result's oneof
case, `exec_error`, or `aborted`); and the `Metric`s of exec_daemon/kernel/metering.py (shell
bytes streamed, live shell sessions / terminals / ExecStreams, sandbox decisions, hook runs).

Label values are redacted like span attributes and cut to MAX_LABEL_CHARS: a label is a
dimension, and an agent-chosen string must not become a secret's or an unbounded one.

Cost. A measurement through the SDK costs ~15 µs here (its attributes are checked, sorted and
hashed each time), and a tool call made three or four of them. So counters and up-down counters
are summed in plain dicts (well under 1 µs) that observable instruments read at each export,
labels cleaned once per label set; a metric's label sets beyond MAX_LABEL_SETS count under
`otel.metric.overflow=true`, as the SDK's own cardinality limit does. Only histograms are
recorded through the SDK, one measurement per tool call. Durations use semconv's recommended
buckets for seconds (DURATION_BUCKETS).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from exec_daemon.kernel.metering import Kind, Meter, Metric

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.metrics import Meter as SdkMeter

MAX_LABEL_CHARS = 64
MAX_LABEL_SETS = 1024
OVERFLOW_LABELS = (("otel.metric.overflow", "true"),)
# Semantic conventions' advice for `*.duration` histograms in seconds (e.g. http.server).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)

LabelSet = tuple[tuple[str, str], ...]

TOOL_CALL_DURATION = "exec_daemon.tool.call.duration"
TOOL_CALLS = "exec_daemon.tool.calls"
COMPUTER_USE_DURATION = "computer_use.session.duration"
COMPUTER_USE_ACTIONS = "computer_use.session.action_count"
COMPUTER_USE_RESULT = "computer_use.result"
PROCESS_MEMORY = "process.memory.usage"
PROCESS_FDS = "process.unix.file_descriptor.count"

_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int:
    """The daemon's resident set size now (Linux /proc; else its peak, from getrusage)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # minus the one listdir itself opened
    except OSError:
        return 0


class Sums:
    """A counter's or up-down counter's cumulative value per label set, which an observable
    instrument reports at each export."""

    def __init__(self) -> None:
        self.values: dict[LabelSet, float] = {}

    def add(self, amount: float, labels: LabelSet) -> None:
        if labels not in self.values and len(self.values) >= MAX_LABEL_SETS:
            labels = OVERFLOW_LABELS
        self.values[labels] = self.values.get(labels, 0) + amount

    def observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        # list() copies the items in one step, while the event loop may be adding one.
        return [Observation(value, dict(labels)) for labels, value in list(self.values.items())]


class OtlpMeter(Meter):
    """The kernel `Meter` backed by an SDK meter; also records tool calls and computer use."""

    def __init__(self, meter: SdkMeter, redact: Callable[[str], str]) -> None:
        self._meter = meter
        self._redact = redact
        # Made at first use: a `watch`ed metric is an observable instrument of the same name.
        self._sums: dict[str, Sums] = {}
        self._histograms: dict[str, Any] = {}
        # Each label set as given, cleaned once (label values come from small fixed sets).
        self._clean: dict[LabelSet, LabelSet] = {}
        self._call_labels: dict[tuple[str, str], tuple[LabelSet, dict[str, str]]] = {}
        self._call_duration = self._histogram(
            TOOL_CALL_DURATION, "s", "Duration of tool calls, guards included", DURATION_BUCKETS
        )
        self._calls = self._sum(
            TOOL_CALLS, Kind.COUNTER, "{call}", "Tool calls by tool and outcome"
        )
        self._cu_duration = self._histogram(
            COMPUTER_USE_DURATION,
            "s",
            "Duration of computer-use sessions (calls)",
            DURATION_BUCKETS,
        )
        self._cu_actions = self._histogram(
            COMPUTER_USE_ACTIONS, "{action}", "Actions per computer-use session"
        )
        self._cu_result = self._sum(
            COMPUTER_USE_RESULT, Kind.COUNTER, "{session}", "Computer-use sessions by outcome"
        )
        _gauge(meter, PROCESS_MEMORY, "By", "Resident set size of the daemon", resident_bytes)
        _gauge(meter, PROCESS_FDS, "{file_descriptor}", "Open fds of the daemon", open_fds)

    def labels(self, labels: LabelSet) -> LabelSet:
        clean = self._clean.get(labels)
        if clean is None:
            if len(self._clean) >= MAX_LABEL_SETS:
                self._clean.clear()
            clean = self._clean[labels] = tuple(
                (key, self._redact(value)[:MAX_LABEL_CHARS]) for key, value in labels
            )
        return clean

    def add(self, metric: Metric, amount: int = 1, **labels: str) -> None:
        spec = metric.value
        sums = self._sums.get(spec.name) or self._sum(
            spec.name, spec.kind, spec.unit, spec.description
        )
        sums.add(amount, self.labels(tuple(labels.items())))

    def record(self, metric: Metric, value: float, **labels: str) -> None:
        spec = metric.value
        histogram = self._histograms.get(spec.name) or self._histogram(
            spec.name, spec.unit, spec.description
        )
        histogram.record(value, dict(self.labels(tuple(labels.items()))))

    def _sum(self, name: str, kind: Kind, unit: str, description: str) -> Sums:
        sums = self._sums[name] = Sums()
        create = (
            self._meter.create_observable_counter
            if kind == Kind.COUNTER
            else self._meter.create_observable_up_down_counter
        )
        create(name, callbacks=[sums.observe], unit=unit, description=description)
        return sums

    def _histogram(
        self, name: str, unit: str, description: str, buckets: Sequence[float] | None = None
    ) -> Any:
        histogram = self._histograms[name] = self._meter.create_histogram(
            name, unit, description, explicit_bucket_boundaries_advisory=buckets
        )
        return histogram

    def watch(self, metric: Metric, read: Callable[[], int]) -> None:
        spec = metric.value
        _gauge(self._meter, spec.name, spec.unit, spec.description, read, up_down=True)

    def tool_call(self, tool: str, outcome: str, seconds: float) -> None:
        labels = self._call_labels.get((tool, outcome))
        if labels is None:
            if len(self._call_labels) >= MAX_LABEL_SETS:
                self._call_labels.clear()
            clean = self.labels((("tool", tool), ("outcome", outcome)))
            labels = self._call_labels[tool, outcome] = (clean, dict(clean))
        self._call_duration.record(seconds, labels[1])
        self._calls.add(1, labels[0])

    def computer_use(self, outcome: str, seconds: float, actions: int) -> None:
        self._cu_duration.record(seconds)
        self._cu_actions.record(actions)
        self._cu_result.add(1, self.labels((("outcome", outcome),)))


def _gauge(
    meter: SdkMeter,
    name: str,
    unit: str,
    description: str,
    read: Callable[[], int],
    *,
    up_down: bool = False,
) -> None:
    from opentelemetry.metrics import Observation

    def observe(_options: CallbackOptions) -> Iterable[Observation]:
        return (Observation(read()),)

    create = meter.create_observable_up_down_counter if up_down else meter.create_observable_gauge
    create(name, callbacks=[observe], unit=unit, description=description)
