"""The OTLP encoding of the daemon's spans for the gRPC exporter; imported only when telemetry
is on (exec_daemon/telemetry/tracing.py).

The SDK's encoder (`opentelemetry.exporter.otlp.proto.common`) cost ~85 µs per tool call span
here, on the export thread but holding the GIL: it hashes each span's Resource (a JSON dump of
its attributes) to group the spans, and builds every attribute as a KeyValue message that is
then copied into its parent. This one groups by the resource's and scope's identity (the daemon
has one of each), encodes them once per batch, and fills each span in place: ~20 µs. It encodes
the tool calls' CallSpans (call_spans.py) directly, and everything a ReadableSpan holds
(events, links, dropped counts), so the spans made through the SDK's tracer (desktop hand-overs)
go the same way; `tests/test_tracing.py` checks that it gives the same message as the SDK's.

OTLP/HTTP keeps the SDK's encoder (its exporter has no hook for another), given ReadableSpans
made from the CallSpans on the export thread (call_spans.ReadableSpans).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common._internal import (
    _encode_instrumentation_scope,
    _encode_resource,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, SpanFlags
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind

from exec_daemon.telemetry.call_spans import CallSpan

LOCAL_PARENT = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
REMOTE_PARENT = LOCAL_PARENT | SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
KINDS = {
    SpanKind.INTERNAL: Span.SpanKind.SPAN_KIND_INTERNAL,
    SpanKind.SERVER: Span.SpanKind.SPAN_KIND_SERVER,
    SpanKind.CLIENT: Span.SpanKind.SPAN_KIND_CLIENT,
    SpanKind.PRODUCER: Span.SpanKind.SPAN_KIND_PRODUCER,
    SpanKind.CONSUMER: Span.SpanKind.SPAN_KIND_CONSUMER,
}


class GrpcSpanExporter(OTLPSpanExporter):
    """The SDK's OTLP/gRPC span exporter (retries, timeouts, its counts of spans exported or
    not) with this module's encoding."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._batch: Sequence[ReadableSpan] = ()
        self._request = ExportTraceServiceRequest()

    def _translate_data(self, data: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
        # The SDK encodes the batch again for each retry (up to 3 while a collector is down).
        if data is not self._batch:
            self._batch, self._request = data, encode_spans(data)
        return self._request


def encode_spans(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    by_resource: dict[int, ResourceSpans] = {}
    by_scope: dict[tuple[int, int], ScopeSpans] = {}
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope
        key = (id(resource), id(scope))
        scope_spans = by_scope.get(key)
        if scope_spans is None:
            resource_spans = by_resource.get(id(resource))
            if resource_spans is None:
                resource_spans = by_resource[id(resource)] = request.resource_spans.add()
                resource_spans.resource.CopyFrom(_encode_resource(resource))
                resource_spans.schema_url = resource.schema_url
            scope_spans = by_scope[key] = resource_spans.scope_spans.add()
            if scope is not None:
                scope_spans.scope.CopyFrom(_encode_instrumentation_scope(scope))
                scope_spans.schema_url = scope.schema_url or ""
        if isinstance(span, CallSpan):
            _fill_call_span(scope_spans.spans.add(), span)
        else:
            _fill_span(scope_spans.spans.add(), span)
    return request


def _fill_call_span(out: Span, span: CallSpan) -> None:
    """A tool call's span: a SERVER span without events, its attributes strings."""
    assert span.context is not None, "a queued call span has its context"
    _fill_identity(out, span.context, span.parent)
    out.name = span.name
    out.kind = Span.SpanKind.SPAN_KIND_SERVER
    out.start_time_unix_nano = span.start_ns
    out.end_time_unix_nano = span.end_ns
    _fill_attributes(out.attributes, span.attributes)
    for link in span.links:
        out.links.add(
            trace_id=link.context.trace_id.to_bytes(16, "big"),
            span_id=link.context.span_id.to_bytes(8, "big"),
            flags=_flags(link.context),
        )
    out.status.SetInParent()  # present even when unset, as the SDK sends it
    if span.status is not None:
        out.status.code = span.status.status_code.value  # type: ignore[assignment]
        if span.status.description:
            out.status.message = span.status.description


def _fill_span(out: Span, span: ReadableSpan) -> None:
    context = span.get_span_context()
    assert context is not None, "a finished span has a context"
    _fill_identity(out, context, span.parent)
    out.name = span.name
    out.kind = KINDS[span.kind]
    out.start_time_unix_nano = span.start_time or 0
    out.end_time_unix_nano = span.end_time or 0
    _fill_attributes(out.attributes, span.attributes)
    for event in span.events:
        encoded = out.events.add(name=event.name, time_unix_nano=event.timestamp)
        _fill_attributes(encoded.attributes, event.attributes)
        encoded.dropped_attributes_count = event.dropped_attributes
    for link in span.links:
        encoded_link = out.links.add(
            trace_id=link.context.trace_id.to_bytes(16, "big"),
            span_id=link.context.span_id.to_bytes(8, "big"),
            flags=_flags(link.context),
        )
        _fill_attributes(encoded_link.attributes, link.attributes)
        encoded_link.dropped_attributes_count = link.dropped_attributes
    out.status.code = span.status.status_code.value  # type: ignore[assignment]
    if span.status.description:
        out.status.message = span.status.description
    out.dropped_attributes_count = span.dropped_attributes
    out.dropped_events_count = span.dropped_events
    out.dropped_links_count = span.dropped_links


def _fill_identity(out: Span, context: SpanContext, parent: SpanContext | None) -> None:
    out.trace_id = context.trace_id.to_bytes(16, "big")
    out.span_id = context.span_id.to_bytes(8, "big")
    if context.trace_state:
        out.trace_state = ",".join(f"{key}={value}" for key, value in context.trace_state.items())
    if parent is not None:
        out.parent_span_id = parent.span_id.to_bytes(8, "big")
    out.flags = _flags(parent)


def _flags(parent: SpanContext | None) -> int:
    return REMOTE_PARENT if parent is not None and parent.is_remote else LOCAL_PARENT


def _fill_attributes(out: Any, attributes: Mapping[str, Any] | None) -> None:
    for key, value in (attributes or {}).items():
        _fill_value(out.add(key=key).value, value)


def _fill_value(out: AnyValue, value: Any) -> None:
    # bool before int: a bool is an int.
    if isinstance(value, str):
        out.string_value = value
    elif isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, int):
        out.int_value = value
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, bytes):
        out.bytes_value = value
    elif isinstance(value, Sequence):
        values = out.array_value.values
        for item in value:
            _fill_value(values.add(), item)
    else:
        out.string_value = str(value)
