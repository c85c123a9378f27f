"""The daemon's log records: as JSON lines locally (--log-format json), and as OTLP logs.

`JsonFormatter` writes one JSON object per record: `time` (ISO 8601, UTC), `level`, `logger`,
`message`, and `exception` when there is one; plus `trace_id`/`span_id` (hex) when the record
was logged inside a traced tool call.

`otlp_log_handler` (only when telemetry is on) hands each record at or above --log-level to the
SDK's LoggingHandler, whose batch processor exports it; the SDK stamps it with the trace and span
ids of the call it was logged in (the tracing middleware makes a call's span current). The body
is the formatted message, redacted; the exporter's own records (`opentelemetry.*`, `grpc`,
`urllib3`) are never exported, so a failing export cannot feed itself.
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import LoggerProvider

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
NOT_EXPORTED = ("opentelemetry", "grpc", "urllib3", "requests")


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
    """The current span's ids, without importing the SDK when tracing never started."""
    import sys

    if "opentelemetry.trace" not in sys.modules:
        return {}
    from opentelemetry.trace import get_current_span

    context = get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


def formatter(log_format: str) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)


def _exported(record: logging.LogRecord) -> bool:
    return not record.name.startswith(NOT_EXPORTED)


def otlp_log_handler(
    provider: LoggerProvider, level: int, redact: Callable[[str], str]
) -> logging.Handler:
    """A handler exporting records through `provider`, their message redacted."""
    from opentelemetry.sdk._logs import LoggingHandler

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
            super().emit(clean)

    with warnings.catch_warnings():
        # Deprecated in favour of opentelemetry-instrumentation-logging, a dependency for a class.
        warnings.simplefilter("ignore", DeprecationWarning)
        return RedactingHandler(level=level, logger_provider=provider)
