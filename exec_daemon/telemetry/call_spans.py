"""The spans of tool calls (exec_daemon/telemetry/tracing.py's middleware opens and ends them);
imported only when telemetry is on."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import DEFAULT_ON, Sampler
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    get_current_span,
)

SAMPLED = TraceFlags(TraceFlags.SAMPLED)
NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)


class CallSpans:
    """The tool calls' spans, each a small `CallSpan` handed whole to the SDK's batch processor
    when its call ends, and encoded from it on the export thread (span_encoding.py): through
    `Tracer.start_span` a span costs ~44 µs here (a recording span object, its limits and locks,
    per-span counters), this way ~7 µs on the event loop. The
    provider's sampler still decides (parent-based, always on, unless the operator's
    OTEL_TRACES_SAMPLER says otherwise; the default's decision, the parent's flag or sampled
    for a root, is taken here without the ~5 µs of its SamplingResult); an unsampled call keeps
    its ids for its log records."""

    def __init__(
        self,
        processor: SpanProcessor,
        sampler: Sampler,
        resource: Resource,
        scope: InstrumentationScope,
    ) -> None:
        self._processor = processor
        self._sampler = sampler
        self._parent_based_always_on = sampler is DEFAULT_ON
        self.resource = resource
        self.scope = scope
        self._ids = RandomIdGenerator()

    def open(
        self, name: str, parent: Context | None, links: tuple[Link, ...], attributes: dict[str, Any]
    ) -> CallSpan:
        parent_span = get_current_span(parent).get_span_context() if parent is not None else None
        valid_parent = parent_span is not None and parent_span.is_valid
        trace_id = parent_span.trace_id if valid_parent else self._ids.generate_trace_id()  # type: ignore[union-attr]
        if self._parent_based_always_on:
            sampled = parent_span.trace_flags.sampled if valid_parent else True  # type: ignore[union-attr]
            trace_state = parent_span.trace_state if valid_parent else None  # type: ignore[union-attr]
        else:
            decision = self._sampler.should_sample(
                parent, trace_id, name, SpanKind.SERVER, attributes, links
            )
            sampled, trace_state = decision.decision.is_sampled(), decision.trace_state
        context = SpanContext(
            trace_id,
            self._ids.generate_span_id(),
            is_remote=False,
            trace_flags=SAMPLED if sampled else NOT_SAMPLED,
            trace_state=trace_state,
        )
        return CallSpan(
            self, name, context, parent_span if valid_parent else None, links, attributes, sampled
        )

    def finish(self, span: CallSpan) -> None:
        span.end_ns = time.time_ns()
        if span.sampled:
            # The batch processor reads only `span.context` before queueing it for the exporter,
            # which takes CallSpans (GrpcSpanExporter encodes them, ReadableSpans converts them).
            self._processor.on_end(span)  # type: ignore[arg-type]


@dataclass(slots=True)
class CallSpan:
    """A tool call's span, queued as it is when the call ends: a ReadableSpan (~10 objects the
    garbage collector tracks while it waits in the queue) is made only if an exporter needs one."""

    spans: CallSpans
    name: str
    context: SpanContext
    parent: SpanContext | None
    links: tuple[Link, ...]
    attributes: dict[str, Any]
    sampled: bool
    status: Status | None = None
    start_ns: int = field(default_factory=time.time_ns)
    end_ns: int = 0

    @property
    def resource(self) -> Resource:
        return self.spans.resource

    @property
    def instrumentation_scope(self) -> InstrumentationScope:
        return self.spans.scope

    def fail(self, description: str, **attributes: str) -> None:
        self.attributes.update(attributes)
        self.status = Status(StatusCode.ERROR, description)

    def end(self) -> None:
        self.spans.finish(self)

    def readable(self) -> ReadableSpan:
        return ReadableSpan(
            self.name,
            self.context,
            self.parent,
            self.resource,
            self.attributes,
            links=self.links,
            kind=SpanKind.SERVER,
            status=self.status or Status(),
            start_time=self.start_ns,
            end_time=self.end_ns,
            instrumentation_scope=self.instrumentation_scope,
        )


class ReadableSpans(SpanExporter):
    """Hands `exporter` (the SDK's OTLP/HTTP one) every CallSpan as a ReadableSpan."""

    def __init__(self, exporter: SpanExporter) -> None:
        self._exporter = exporter

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        readable = [
            span.readable() if isinstance(span, CallSpan) else span
            for span in cast(Sequence[ReadableSpan | CallSpan], spans)
        ]
        return self._exporter.export(readable)

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._exporter.force_flush(timeout_millis)
