"""The daemon's metrics, kept by the daemon and exported over OTLP with the spans.

Imported and built only when telemetry is on (exec_daemon/telemetry/tracing.py decides); in
ghost mode the layers record into exec_daemon/kernel/metering.py's no-op `Meter`.

Names and units. OpenTelemetry semantic conventions where one exists:
- `process.memory.usage` (By): the daemon's resident set size (semconv process metrics).
- `process.unix.file_descriptor.count` ({file_descriptor}): its open fds (semconv process).
- The sandbox's resources, as GetSandboxInfo reports them (semconv system metrics):
  `system.cpu.logical.count` ({cpu}), `system.memory.usage` (By, `system.memory.state=used`) and
  `system.memory.limit`, `system.filesystem.usage` (By, `system.filesystem.state=used`, the
  workspace's file system) and `system.filesystem.limit`, `system.process.count` ({process}).
- `otel.sdk.processor.span.processed` / `otel.sdk.processor.log.processed` ({span}/{log}) with
  `error.type=queue_full`: spans and log records dropped because the export queue was full; and
  `otel.sdk.exporter.span.exported` / `...log.exported` with `error.type`: those an export
  failed to deliver (semconv OTel SDK metrics, emitted by the SDK's processors and exporters).
The seed daemon's own names (no convention exists for them): `computer_use.session.duration`
(s), `computer_use.session.action_count` ({action}), `computer_use.session.result` ({session}, label
`outcome`). The daemon's own, under `exec_daemon.`: `exec_daemon.tool.call.duration` (s, a
histogram like semconv's `rpc.server.duration`, which is in ms and per RPC, not per tool call)
and `exec_daemon.tool.calls` ({call}), both labelled `tool` and `outcome` (the result's oneof
case, `exec_error`, or `aborted`); `exec_daemon.telemetry.calls.dropped` ({call}), the calls
whose span and metrics were dropped because too many waited to be made (call_spans.py); and
the `Metric`s of exec_daemon/kernel/metering.py (shell bytes streamed, live shell sessions /
terminals / ExecStreams, sandbox decisions, hook runs).

Label values are redacted like span attributes and cut to MAX_LABEL_CHARS: a label is a
dimension, and an agent-chosen string must not become a secret's or an unbounded one.

Cost. A measurement through the SDK costs ~15-20 µs here (its attributes are checked, sorted
and hashed, a Measurement object is made, locks taken), and a tool call made three or four of
them. So every metric is kept in plain dicts (~1-2 µs a call), label sets cleaned once:
counters and up-down counters as sums that observable instruments read at each export, and
histograms as bucket counts (`Histograms`) that `HistogramsExporter` adds, as the SDK's own data
classes, to what the SDK's reader hands its exporter (in the temporality the exporter prefers,
cumulative unless OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE says otherwise). A metric's
label sets beyond MAX_LABEL_SETS count under `otel.metric.overflow=true`, as the SDK's own
cardinality limit does. Durations use semconv's recommended buckets for seconds
(DURATION_BUCKETS); other histograms the SDK's default buckets (DEFAULT_BUCKETS).
"""

from __future__ import annotations

import bisect
import math
import os
import resource
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.metrics import Meter as SdkMeter
from opentelemetry.sdk.metrics import Histogram as HistogramInstrument
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    HistogramDataPoint,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.sdk.metrics.export import Histogram as HistogramData
from opentelemetry.sdk.metrics.export import Metric as MetricData

from exec_daemon.kernel.metering import Kind, Meter, Metric
from exec_daemon.kernel.usage import SandboxUsage, sandbox_usage

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

MAX_LABEL_CHARS = 64
MAX_LABEL_SETS = 1024
OVERFLOW_LABELS = (("otel.metric.overflow", "true"),)
# Semantic conventions' advice for `*.duration` histograms in seconds (e.g. http.server).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
# The SDK's default explicit bucket boundaries.
DEFAULT_BUCKETS = (0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000)

LabelSet = tuple[tuple[str, str], ...]

TOOL_CALL_DURATION = "exec_daemon.tool.call.duration"
TOOL_CALLS = "exec_daemon.tool.calls"
DROPPED_CALLS = "exec_daemon.telemetry.calls.dropped"
COMPUTER_USE_DURATION = "computer_use.session.duration"
COMPUTER_USE_ACTIONS = "computer_use.session.action_count"
COMPUTER_USE_RESULT = "computer_use.session.result"
PROCESS_MEMORY = "process.memory.usage"
PROCESS_FDS = "process.unix.file_descriptor.count"
# What the sandbox (VM or container) has and uses, as GetSandboxInfo reports it (semconv system
# metrics; the memory is the cgroup's when it has a limit: exec_daemon/kernel/usage.py).
SYSTEM_CPUS = "system.cpu.logical.count"
SYSTEM_MEMORY_USAGE = "system.memory.usage"
SYSTEM_MEMORY_LIMIT = "system.memory.limit"
SYSTEM_DISK_USAGE = "system.filesystem.usage"
SYSTEM_DISK_LIMIT = "system.filesystem.limit"
SYSTEM_PROCESSES = "system.process.count"
# One reading serves every sandbox gauge of an export.
_USAGE_SECONDS = 1.0

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
        # list() copies the items in one step, while the event loop may be adding one.
        return [Observation(value, dict(labels)) for labels, value in list(self.values.items())]


@dataclass
class _Buckets:
    """One label set's recorded values: a count per bucket, their sum, min and max."""

    counts: list[int]
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf

    def add(self, value: float, bucket: int) -> None:
        self.counts[bucket] += 1
        self.total += value
        self.low = min(self.low, value)
        self.high = max(self.high, value)

    def copy(self) -> _Buckets:
        return _Buckets(list(self.counts), self.total, self.low, self.high)


@dataclass
class Histogram:
    """A histogram's buckets per label set (explicit bounds, as the SDK's default aggregation:
    a value v falls in the first bucket whose bound is >= v)."""

    name: str
    unit: str
    description: str
    bounds: tuple[float, ...]
    _points: dict[LabelSet, _Buckets] = field(default_factory=dict)
    _start_ns: int = field(default_factory=time.time_ns)
    # record() runs on the event loop, collect() on the metric reader's thread.
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, value: float, labels: LabelSet) -> None:
        bucket = bisect.bisect_left(self.bounds, value)
        with self._lock:
            points = self._points.get(labels)
            if points is None:
                if len(self._points) >= MAX_LABEL_SETS:
                    labels = OVERFLOW_LABELS
                points = self._points.get(labels)
                if points is None:
                    points = self._points[labels] = _Buckets([0] * (len(self.bounds) + 1))
            points.add(value, bucket)

    def collect(self, now_ns: int, temporality: AggregationTemporality) -> MetricData | None:
        """The points so far (cumulative) or since the last collect (delta); None if none."""
        with self._lock:
            start_ns = self._start_ns
            if temporality == AggregationTemporality.DELTA:
                points, self._points, self._start_ns = self._points, {}, now_ns
            else:
                points = {labels: buckets.copy() for labels, buckets in self._points.items()}
        if not points:
            return None
        data_points = [
            HistogramDataPoint(
                attributes=dict(labels),
                start_time_unix_nano=start_ns,
                time_unix_nano=now_ns,
                count=sum(buckets.counts),
                sum=buckets.total,
                bucket_counts=buckets.counts,
                explicit_bounds=self.bounds,
                min=buckets.low,
                max=buckets.high,
            )
            for labels, buckets in points.items()
        ]
        return MetricData(
            self.name, self.description, self.unit, HistogramData(data_points, temporality)
        )


class Histograms:
    """The daemon's histograms by name, shared by the meter that records them and the exporter
    that sends them."""

    def __init__(self) -> None:
        self._by_name: dict[str, Histogram] = {}

    def get(self, name: str) -> Histogram | None:
        return self._by_name.get(name)

    def create(
        self, name: str, unit: str, description: str, bounds: Sequence[float] = DEFAULT_BUCKETS
    ) -> Histogram:
        histogram = self._by_name[name] = Histogram(name, unit, description, tuple(bounds))
        return histogram

    def collect(self, temporality: AggregationTemporality) -> list[MetricData]:
        now_ns = time.time_ns()
        # list(): one step, while the event loop may be adding a histogram.
        collected = (
            histogram.collect(now_ns, temporality) for histogram in list(self._by_name.values())
        )
        return [metric for metric in collected if metric is not None]


class HistogramsExporter(MetricExporter):
    """Hands `exporter` what the SDK's reader collected plus the daemon's histograms, under the
    meter's scope (`scope`) of the provider's resource."""

    def __init__(
        self,
        exporter: MetricExporter,
        histograms: Histograms,
        resource: Resource,
        scope: InstrumentationScope,
    ) -> None:
        super().__init__(
            preferred_temporality=exporter._preferred_temporality,
            preferred_aggregation=exporter._preferred_aggregation,
        )
        self._exporter = exporter
        self._histograms = histograms
        self._resource = resource
        self._scope = scope
        self._temporality = (exporter._preferred_temporality or {}).get(
            HistogramInstrument, AggregationTemporality.CUMULATIVE
        )

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        with_histograms = self.with_histograms(metrics_data)
        return self._exporter.export(with_histograms, timeout_millis=timeout_millis, **kwargs)

    def with_histograms(self, metrics_data: MetricsData) -> MetricsData:
        histograms = self._histograms.collect(self._temporality)
        if not histograms:
            return metrics_data
        resources = list(metrics_data.resource_metrics)
        first = resources[0] if resources else ResourceMetrics(self._resource, [], "")
        scopes = list(first.scope_metrics)
        for index, scope_metrics in enumerate(scopes):
            if scope_metrics.scope == self._scope:
                metrics = [*scope_metrics.metrics, *histograms]
                scopes[index] = replace(scope_metrics, metrics=metrics)
                break
        else:
            scopes.append(ScopeMetrics(self._scope, histograms, ""))
        return MetricsData([replace(first, scope_metrics=scopes), *resources[1:]])

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._exporter.force_flush(timeout_millis=timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._exporter.shutdown(timeout_millis=timeout_millis, **kwargs)


class OtlpMeter(Meter):
    """The kernel `Meter` backed by an SDK meter (its observable instruments) and `histograms`
    (sent by a HistogramsExporter); also records tool calls and computer use."""

    def __init__(
        self, meter: SdkMeter, redact: Callable[[str], str], histograms: Histograms
    ) -> None:
        self._meter = meter
        self._redact = redact
        self._histograms = histograms
        # Made at first use: a `watch`ed metric is an observable instrument of the same name.
        self._sums: dict[Metric, Sums] = {}
        # Each label set as given, cleaned once (label values come from small fixed sets).
        self._clean: dict[LabelSet, LabelSet] = {}
        self._call_labels: dict[tuple[str, str], LabelSet] = {}
        self._call_duration = histograms.create(
            TOOL_CALL_DURATION, "s", "Duration of tool calls, guards included", DURATION_BUCKETS
        )
        self._calls = self._sum(
            TOOL_CALLS, Kind.COUNTER, "{call}", "Tool calls by tool and outcome"
        )
        self._cu_duration = histograms.create(
            COMPUTER_USE_DURATION,
            "s",
            "Duration of computer-use sessions (calls)",
            DURATION_BUCKETS,
        )
        self._cu_actions = histograms.create(
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
        sums = self._sums.get(metric)
        if sums is None:
            spec = metric.value
            sums = self._sums[metric] = self._sum(spec.name, spec.kind, spec.unit, spec.description)
        sums.add(amount, self.labels(tuple(labels.items())) if labels else ())

    def record(self, metric: Metric, value: float, **labels: str) -> None:
        spec = metric.value
        histogram = self._histograms.get(spec.name) or self._histograms.create(
            spec.name, spec.unit, spec.description
        )
        histogram.record(value, self.labels(tuple(labels.items())))

    def _sum(self, name: str, kind: Kind, unit: str, description: str) -> Sums:
        sums = Sums()
        create = (
            self._meter.create_observable_counter
            if kind == Kind.COUNTER
            else self._meter.create_observable_up_down_counter
        )
        create(name, callbacks=[sums.observe], unit=unit, description=description)
        return sums

    def watch(self, metric: Metric, read: Callable[[], int]) -> None:
        spec = metric.value
        _gauge(self._meter, spec.name, spec.unit, spec.description, read, up_down=True)

    def watch_sandbox(self, workspace: Path) -> None:
        """The sandbox's CPUs, memory, disk (of `workspace`) and processes, read at each export
        (on the SDK's exporting thread, never the event loop)."""
        usage = _RecentUsage(workspace)
        used = (("system.memory.state", "used"),)
        disk_used = (("system.filesystem.state", "used"),)
        for name, unit, description, read, labels in (
            (SYSTEM_CPUS, "{cpu}", "CPUs the sandbox may use", "cpu_count", ()),
            (SYSTEM_MEMORY_USAGE, "By", "Memory used", "memory_used_bytes", used),
            (SYSTEM_MEMORY_LIMIT, "By", "Memory in all", "memory_total_bytes", ()),
            (SYSTEM_DISK_USAGE, "By", "Workspace disk used", "disk_used_bytes", disk_used),
            (SYSTEM_DISK_LIMIT, "By", "Workspace disk in all", "disk_total_bytes", ()),
            (SYSTEM_PROCESSES, "{process}", "Processes in the sandbox", "process_count", ()),
        ):
            _gauge(
                self._meter,
                name,
                unit,
                description,
                lambda field=read: getattr(usage.now(), field),  # type: ignore[misc]
                labels=dict(labels),
            )

    def count_dropped_calls(self, read: Callable[[], int]) -> None:
        """`read()`: the tool calls whose span and metrics were dropped so far (call_spans.py)."""
        self._meter.create_observable_counter(
            DROPPED_CALLS,
            callbacks=[lambda _options: (Observation(read()),)],
            unit="{call}",
            description="Tool calls whose span and metrics were dropped: telemetry fell behind",
        )

    def tool_call(self, tool: str, outcome: str, seconds: float) -> None:
        labels = self._call_labels.get((tool, outcome))
        if labels is None:
            if len(self._call_labels) >= MAX_LABEL_SETS:
                self._call_labels.clear()
            labels = self._call_labels[tool, outcome] = self.labels(
                (("tool", tool), ("outcome", outcome))
            )
        self._call_duration.record(seconds, labels)
        self._calls.add(1, labels)

    def computer_use(self, outcome: str, seconds: float, actions: int) -> None:
        self._cu_duration.record(seconds, ())
        self._cu_actions.record(actions, ())
        self._cu_result.add(1, self.labels((("outcome", outcome),)))


def _gauge(
    meter: SdkMeter,
    name: str,
    unit: str,
    description: str,
    read: Callable[[], int],
    *,
    up_down: bool = False,
    labels: dict[str, str] | None = None,
) -> None:
    def observe(_options: CallbackOptions) -> Iterable[Observation]:
        return (Observation(read(), labels),)

    create = meter.create_observable_up_down_counter if up_down else meter.create_observable_gauge
    create(name, callbacks=[observe], unit=unit, description=description)


class _RecentUsage:
    """sandbox_usage(workspace), read again when older than _USAGE_SECONDS."""

    def __init__(self, workspace: Path) -> None:
        self._workspace = workspace
        self._lock = threading.Lock()
        self._read_at = -math.inf
        self._usage: SandboxUsage | None = None

    def now(self) -> SandboxUsage:
        with self._lock:
            if self._usage is None or time.monotonic() - self._read_at > _USAGE_SECONDS:
                self._usage = sandbox_usage(self._workspace)
                self._read_at = time.monotonic()
            return self._usage
