"""The spans of tool calls, built whole when a call ends (exec_daemon/telemetry/tracing.py's
middleware opens and ends them); imported only when telemetry is on."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
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


class CallSpans:
    """The tool calls' spans, each built whole at the call's end as a finished `ReadableSpan`
    and handed to the batch processor: through `Tracer.start_span` a span costs ~44 µs here (a
    recording span object, its limits and locks, per-span counters), this way ~10 µs. The
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
        self._resource = resource
        self._scope = scope
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
            trace_flags=TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT),
            trace_state=trace_state,
        )
        return CallSpan(
            self, name, context, parent_span if valid_parent else None, links, attributes
        )

    def finish(self, span: CallSpan) -> None:
        if not span.context.trace_flags.sampled:
            return
        finished = ReadableSpan(
            span.name,
            span.context,
            span.parent,
            self._resource,
            span.attributes,
            links=span.links,
            kind=SpanKind.SERVER,
            status=span.status or Status(),
            start_time=span.start_ns,
            end_time=time.time_ns(),
            instrumentation_scope=self._scope,
        )
        self._processor.on_end(finished)


@dataclass
class CallSpan:
    spans: CallSpans
    name: str
    context: SpanContext
    parent: SpanContext | None
    links: tuple[Link, ...]
    attributes: dict[str, Any]
    status: Status | None = None
    start_ns: int = field(default_factory=time.time_ns)

    def fail(self, description: str, **attributes: str) -> None:
        self.attributes.update(attributes)
        self.status = Status(StatusCode.ERROR, description)

    def end(self) -> None:
        self.spans.finish(self)
