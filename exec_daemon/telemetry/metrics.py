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
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from exec_daemon.kernel.metering import Kind, Meter, Metric

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.metrics import Meter as SdkMeter

MAX_LABEL_CHARS = 64
MAX_LABEL_SETS = 1024

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


class OtlpMeter(Meter):
    """The kernel `Meter` backed by an SDK meter; also records tool calls and computer use."""

    def __init__(self, meter: SdkMeter, redact: Callable[[str], str]) -> None:
        self._meter = meter
        self._redact = redact
        # Made at first use: a `watch`ed metric is an observable instrument of the same name.
        self._instruments: dict[Metric, Any] = {}
        # The labels of each (tool, outcome), cleaned once: both come from small fixed sets.
        self._call_labels: dict[tuple[str, str], dict[str, str]] = {}
        self._call_duration = meter.create_histogram(
            TOOL_CALL_DURATION, "s", "Duration of tool calls, guards included"
        )
        self._calls = meter.create_counter(TOOL_CALLS, "{call}", "Tool calls by tool and outcome")
        self._cu_duration = meter.create_histogram(
            COMPUTER_USE_DURATION, "s", "Duration of computer-use sessions (calls)"
        )
        self._cu_actions = meter.create_histogram(
            COMPUTER_USE_ACTIONS, "{action}", "Actions per computer-use session"
        )
        self._cu_result = meter.create_counter(
            COMPUTER_USE_RESULT, "{session}", "Computer-use sessions by outcome"
        )
        _gauge(meter, PROCESS_MEMORY, "By", "Resident set size of the daemon", resident_bytes)
        _gauge(meter, PROCESS_FDS, "{file_descriptor}", "Open fds of the daemon", open_fds)

    def labels(self, labels: dict[str, str]) -> dict[str, str]:
        return {key: self._redact(value)[:MAX_LABEL_CHARS] for key, value in labels.items()}

    def add(self, metric: Metric, amount: int = 1, **labels: str) -> None:
        self._instrument(metric).add(amount, self.labels(labels))

    def record(self, metric: Metric, value: float, **labels: str) -> None:
        self._instrument(metric).record(value, self.labels(labels))

    def _instrument(self, metric: Metric) -> Any:
        instrument = self._instruments.get(metric)
        if instrument is None:
            spec = metric.value
            create = {
                Kind.COUNTER: self._meter.create_counter,
                Kind.UP_DOWN: self._meter.create_up_down_counter,
                Kind.HISTOGRAM: self._meter.create_histogram,
            }[spec.kind]
            instrument = self._instruments[metric] = create(spec.name, spec.unit, spec.description)
        return instrument

    def watch(self, metric: Metric, read: Callable[[], int]) -> None:
        spec = metric.value
        _gauge(self._meter, spec.name, spec.unit, spec.description, read, up_down=True)

    def tool_call(self, tool: str, outcome: str, seconds: float) -> None:
        labels = self._call_labels.get((tool, outcome))
        if labels is None:
            if len(self._call_labels) >= MAX_LABEL_SETS:
                self._call_labels.clear()
            labels = self._call_labels[tool, outcome] = self.labels(
                {"tool": tool, "outcome": outcome}
            )
        self._call_duration.record(seconds, labels)
        self._calls.add(1, labels)

    def computer_use(self, outcome: str, seconds: float, actions: int) -> None:
        self._cu_duration.record(seconds)
        self._cu_actions.record(actions)
        self._cu_result.add(1, self.labels({"outcome": outcome}))


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
