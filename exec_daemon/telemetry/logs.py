"""The daemon's log records: as JSON lines locally (--log-format json), and as OTLP logs.

`JsonFormatter` writes one JSON object per record: `time` (ISO 8601, UTC), `level`, `logger`,
`message`, and `exception` when there is one; plus `trace_id`/`span_id` (hex) when the record
was logged inside a traced tool call.

`otlp_log_handler` (only when telemetry is on) hands each record at or above --log-level to the
SDK's LoggingHandler, whose batch processor exports it, stamped with the trace and span ids of the
call it was logged in (`CURRENT_CALL`, which the tracing middleware sets while a call runs). The
body is the formatted message, redacted; the exporter's own records (`opentelemetry.*`, `grpc`,
`urllib3`) are never exported, so a failing export cannot feed itself.
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.trace import SpanContext

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
NOT_EXPORTED = ("opentelemetry", "grpc", "urllib3", "requests")


class TracedCall(Protocol):
    def span_context(self) -> SpanContext: ...


# The traced tool call running in this context (exec_daemon/telemetry/call_spans.py's CallSpan).
CURRENT_CALL: ContextVar[TracedCall | None] = ContextVar("exec_daemon_traced_call", default=None)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_trace_ids())
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def _trace_ids() -> dict[str, str]:
    """The ids of the traced call this record was logged in, if any."""
    call = CURRENT_CALL.get()
    if call is None:
        return {}
    context = call.span_context()
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


def formatter(log_format: str) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)


def _exported(record: logging.LogRecord) -> bool:
    return not record.name.startswith(NOT_EXPORTED)


def otlp_log_handler(
    provider: LoggerProvider, level: int, redact: Callable[[str], str]
) -> logging.Handler:
    """A handler exporting records through `provider`, their message redacted."""
    from opentelemetry import context as otel_context
    from opentelemetry.sdk._logs import LoggingHandler
    from opentelemetry.trace import NonRecordingSpan, set_span_in_context

    class RedactingHandler(LoggingHandler):
        def emit(self, record: logging.LogRecord) -> None:
            if not _exported(record):
                return
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            # A copy: the console's handler formats the same record object after this one.
            clean = logging.makeLogRecord(
                {**record.__dict__, "msg": redact(message), "args": None, "exc_info": None}
            )
            call = CURRENT_CALL.get()
            if call is None:
                super().emit(clean)
                return
            # The SDK takes the record's trace and span ids from OpenTelemetry's current span.
            span = NonRecordingSpan(call.span_context())
            token = otel_context.attach(set_span_in_context(span))
            try:
                super().emit(clean)
            finally:
                otel_context.detach(token)

    with warnings.catch_warnings():
        # Deprecated in favour of opentelemetry-instrumentation-logging, a dependency for a class.
        warnings.simplefilter("ignore", DeprecationWarning)
        return RedactingHandler(level=level, logger_provider=provider)
