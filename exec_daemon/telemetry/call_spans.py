"""The spans and metrics of tool calls (exec_daemon/telemetry/tracing.py's middleware opens and
ends them); imported only when telemetry is on.

A call costs the event loop only a record: `CallSpans.open` notes the call's name, ids, RPC trace
headers and start, `CallSpans.finish` its end and outcome and appends it to a deque (~6-8 µs in
all). Everything else is done off the loop, a batch at a time, by the `telemetry-calls` thread
(`complete_ended`): the parent parsed from the headers, the sampler's decision, the span's
context, attributes (cleaned) and status, the tool-call metrics, and the hand-over of sampled
spans to the SDK's batch processor, which exports them. Done per call on the loop, inside the
daemon's request path (cold: each call's RPC stack evicts what the previous one warmed), those
steps cost ~90 µs of CPU; in a batch, ~15-20 µs, on a thread that runs while the loop waits. A
span's context is made earlier only when someone needs it during the call (a log record, an MCP
request: `CallSpan.span_context`); its ids are drawn when it opens, so it is the same whoever
makes it.

The provider's sampler decides (parent-based, always on, unless the operator's
OTEL_TRACES_SAMPLER says otherwise; the default's decision, the parent's flag or sampled for a
root, is taken here without the ~5 µs of its SamplingResult); an unsampled call keeps its ids for
its log records and still counts in the metrics.

Bounded: at most MAX_WAITING ended calls wait for the thread; past that a call's span and
metrics are dropped and counted (`dropped`, exported as `exec_daemon.telemetry.calls.dropped`).
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
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

ATTR_TOOL = "tool.name"
ATTR_CALL_ID = "tool.call_id"
ATTR_AGENT_ID = "agent.id"
ATTR_RESULT = "tool.result"
ATTR_ERROR_CODE = "tool.error_code"
ATTR_EXCEPTION_TYPE = "exception.type"

EXEC_ERROR = "exec_error"
ABORTED = "aborted"

# Ended calls waiting for the thread, at most; it wakes when WAKE_AT are waiting, or after
# its period (tracing.py: at most half a second, sooner if the span processor exports sooner).
MAX_WAITING = 16_384
WAKE_AT = 256
# The thread lets the event loop in after every YIELD_EVERY spans (~0.3 ms of work).
YIELD_EVERY = 32
YIELD_SECONDS = 0.0002

Clean = Callable[[str], str]
# A call's parent context and links, from its RPC's trace headers (tracing.parent_of).
ParentOf = Callable[[Mapping[str, str]], tuple[Context | None, tuple[Link, ...]]]


@dataclass(slots=True, eq=False)
class CallSpan:
    """One tool call's span. The loop fills the first block of fields; the rest is made off the
    loop (`CallSpans.complete_ended`), and the span is then queued as it is for the exporter,
    which reads it like a ReadableSpan (span_encoding.py; `readable()` for the HTTP exporter)."""

    spans: CallSpans
    name: str
    call_id: int
    agent_id: str
    headers: Mapping[str, str] | None
    span_id: int
    # Its trace id when it has no valid parent.
    root_trace_id: int
    start_ns: int
    started: float  # time.perf_counter(), for the duration
    end_ns: int = 0
    seconds: float = 0.0
    # The result's oneof case, EXEC_ERROR or ABORTED.
    outcome: str = "unset"
    error_code: str = ""
    # What crashed, when a handler did (an `internal` ExecError).
    exception_type: str = ""

    context: SpanContext | None = None
    parent: SpanContext | None = None
    links: tuple[Link, ...] = ()
    sampled: bool = True
    attributes: dict[str, Any] | None = None
    status: Status | None = None

    @property
    def resource(self) -> Resource:
        return self.spans.resource

    @property
    def instrumentation_scope(self) -> InstrumentationScope:
        return self.spans.scope

    def span_context(self) -> SpanContext:
        """Its context (trace and span ids, sampled flag), made now if not made yet."""
        context = self.context
        if context is None:
            context = self.spans.identify(self)
        return context

    def fail(self, code: str, exception_type: str = "") -> None:
        """The call could not be run: an ExecError `code` (its span's status is ERROR)."""
        self.outcome = EXEC_ERROR
        self.error_code = code
        self.exception_type = exception_type

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


class CallSpans:
    """Opens and ends the tool calls' spans, and completes the ended ones on its own thread:
    `on_complete(span)` records the call's metrics, and sampled spans go to `processor`."""

    def __init__(
        self,
        processor: SpanProcessor,
        sampler: Sampler,
        resource: Resource,
        scope: InstrumentationScope,
        parent_of: ParentOf,
        *,
        on_complete: Callable[[CallSpan], None] = lambda _span: None,
        clean: Clean = str,
        complete_every: float = 0.5,
    ) -> None:
        self._processor = processor
        self._sampler = sampler
        self._parent_based_always_on = sampler is DEFAULT_ON
        self.resource = resource
        self.scope = scope
        self._parent_of = parent_of
        self._on_complete = on_complete
        self._clean = clean
        self._ended: deque[CallSpan] = deque()
        self.dropped = 0
        self._wake = threading.Event()
        self._completing = threading.Lock()
        self._closed = False
        self._complete_every = complete_every
        self._thread = threading.Thread(target=self._run, name="telemetry-calls", daemon=True)
        self._thread.start()

    def open(
        self, name: str, call_id: int, agent_id: str, headers: Mapping[str, str] | None
    ) -> CallSpan:
        return CallSpan(
            self,
            name,
            call_id,
            agent_id,
            headers,
            random.getrandbits(64) or 1,
            random.getrandbits(128) or 1,
            time.time_ns(),
            time.perf_counter(),
        )

    def finish(self, span: CallSpan) -> None:
        span.seconds = time.perf_counter() - span.started
        span.end_ns = time.time_ns()
        ended = self._ended
        if len(ended) >= MAX_WAITING:
            self.dropped += 1
            return
        ended.append(span)
        if len(ended) >= WAKE_AT and not self._wake.is_set():
            self._wake.set()

    def identify(self, span: CallSpan) -> SpanContext:
        """Makes the span's context from its ids, its RPC's trace headers and the sampler. The
        same whichever thread makes it first (its ids were drawn when it opened)."""
        parent, links = self._parent_of(span.headers) if span.headers else (None, ())
        parent_span = get_current_span(parent).get_span_context() if parent is not None else None
        if parent_span is None or not parent_span.is_valid:
            parent_span = None
            trace_id, sampled, trace_state = span.root_trace_id, True, None
        else:
            trace_id = parent_span.trace_id
            sampled, trace_state = parent_span.trace_flags.sampled, parent_span.trace_state
        if not self._parent_based_always_on:
            decision = self._sampler.should_sample(
                parent, trace_id, span.name, SpanKind.SERVER, {ATTR_TOOL: span.name}, links
            )
            sampled, trace_state = decision.decision.is_sampled(), decision.trace_state
        context = SpanContext(
            trace_id,
            span.span_id,
            is_remote=False,
            trace_flags=SAMPLED if sampled else NOT_SAMPLED,
            trace_state=trace_state,
        )
        span.parent = parent_span
        span.links = links
        span.sampled = sampled
        span.context = context
        return context

    def complete_ended(self, pause: float = 0.0) -> None:
        """Completes every ended span waiting: its metrics, and its export if sampled; sleeping
        `pause` seconds after every YIELD_EVERY spans when it runs beside the event loop (a
        thread holding the GIL keeps a waiting loop out for up to the switch interval, 5 ms)."""
        ended = self._ended
        done = 0
        while ended:
            # One at a time: the metrics' sums are not safe to add to from two threads.
            with self._completing:
                try:
                    span = ended.popleft()
                except IndexError:  # another thread took the last one
                    return
                self._complete(span)
            done += 1
            if pause and done % YIELD_EVERY == 0:
                time.sleep(pause)

    def _complete(self, span: CallSpan) -> None:
        if span.context is None:
            self.identify(span)
        clean = self._clean
        attributes: dict[str, Any] = {
            ATTR_TOOL: span.name,
            ATTR_CALL_ID: span.call_id,
            ATTR_RESULT: span.outcome,
        }
        if span.agent_id:
            attributes[ATTR_AGENT_ID] = clean(span.agent_id)
        if span.error_code:
            attributes[ATTR_ERROR_CODE] = clean(span.error_code)
        if span.exception_type:
            attributes[ATTR_EXCEPTION_TYPE] = span.exception_type
        span.attributes = attributes
        if span.outcome == EXEC_ERROR:
            span.status = Status(StatusCode.ERROR, attributes.get(ATTR_ERROR_CODE, EXEC_ERROR))
        self._on_complete(span)
        if span.sampled:
            # The batch processor reads only `span.context` before queueing it for the exporter,
            # which takes CallSpans (GrpcSpanExporter encodes them, ReadableSpans converts them).
            self._processor.on_end(span)  # type: ignore[arg-type]

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self._complete_every)
            self._wake.clear()
            self.complete_ended(pause=YIELD_SECONDS)

    def close(self, timeout: float) -> None:
        """Stops the thread and completes what is left (before the span processor shuts down)."""
        self._closed = True
        self._wake.set()
        self._thread.join(timeout)
        self.complete_ended()


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
