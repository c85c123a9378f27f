"""OpenTelemetry traces of tool calls, sent over OTLP (off by default: ghost mode).

Tracing is on only with `--ghost-mode false` AND `--trace-endpoint` AND `--trace-auth-token`
(as in the reference daemon); otherwise nothing is built, nothing is imported from the SDK and
no middleware is added to the call chain, so ghost mode costs nothing.

Where spans go (`--trace-endpoint`):
- `http://host:port[/path]` or `https://...`: OTLP/HTTP with protobuf bodies, POSTed to the
  URL's path, or to `/v1/traces` when it has none. `--trace-insecure` skips the certificate
  check of an https endpoint.
- `grpc://host[:port]` or a bare `host[:port]` (port 4317 by default): OTLP/gRPC over TLS;
  `--trace-insecure` makes it a plaintext channel (gRPC has no "TLS without verification").
- The standard `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` (or `OTEL_EXPORTER_OTLP_PROTOCOL`) = `grpc`
  or `http/protobuf` overrides the choice by scheme: the reference daemon speaks gRPC to an
  `https://` endpoint, which is `https://host` + `..._PROTOCOL=grpc` here (TLS, port 443).
Every export carries `authorization: Bearer <token>`. A bad endpoint is logged and tracing stays
off: telemetry never stops the daemon from serving.

Each tool call is one SERVER span named after its ToolCall variant (e.g. `shell_tool_call`),
made by the outermost middleware so it covers the guards' time too. Its parent is the W3C
`traceparent` (+ `tracestate`) header of the RPC that carried the call (ExecStream or
ControlService.Exec); without one, the `backend-traceparent` header is the parent; with both,
the backend one becomes a span link. Attributes: `tool.name`, `tool.call_id`, `agent.id`,
`tool.result` (the result's oneof case, or `aborted`/`exec_error`), `tool.error_code` (a
ToolError's or ExecError's code). Status ERROR only when the call could not be run (an
ExecError, including `internal` for a crashed handler); a typed `error` result is the tool's
answer, not a daemon failure. Messages are never recorded: they can hold user data.

Spans are batched (BatchSpanProcessor: a background thread exports, the event loop only queues)
and flushed at shutdown within SHUTDOWN_SECONDS.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from google.protobuf.message import Message

from exec_daemon import __version__
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.context import Invocation, Middleware, Next
from exec_daemon.kernel.desktop_control import ControlState, DesktopControl
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.state import Daemon

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Link, Tracer

log = logging.getLogger(__name__)

# The RPC headers a call's span continues; carried to the middleware in CallContext.extras.
TRACE_HEADERS = ("traceparent", "tracestate", "backend-traceparent", "backend-tracestate")
EXTRAS_KEY = "trace_headers"

GRPC = "grpc"
HTTP_PROTOBUF = "http/protobuf"
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
DEFAULT_GRPC_PORT = 4317
DEFAULT_HTTP_PATH = "/v1/traces"
# One export attempt (with the gRPC exporter's retries) gives up after this long.
EXPORT_TIMEOUT_SECONDS = 5.0
# Daemon shutdown waits at most this long for the last spans to be sent (Daemon.aclose allows 3 s).
SHUTDOWN_SECONDS = 2.5

ATTR_TOOL = "tool.name"
ATTR_CALL_ID = "tool.call_id"
ATTR_AGENT_ID = "agent.id"
ATTR_RESULT = "tool.result"
ATTR_ERROR_CODE = "tool.error_code"
ATTR_PERSON_IN_CONTROL = "desktop.person_in_control"


def incoming_trace_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The trace-context headers of an RPC request (names lower-case), for CallContext.extras."""
    found: dict[str, str] = {}
    for name in TRACE_HEADERS:
        value = headers.get(name)
        if value:
            found[name] = value
    return found


@dataclass(frozen=True)
class ExportTarget:
    protocol: str  # GRPC or HTTP_PROTOBUF
    # gRPC: "host:port"; HTTP: the URL spans are POSTed to.
    endpoint: str
    # gRPC: a plaintext channel; HTTPS: no certificate verification.
    insecure: bool


def export_target(endpoint: str, insecure: bool, protocol: str | None = None) -> ExportTarget:
    """Where and how to send spans, from --trace-endpoint (rules in the module docstring).

    Raises ValueError for an endpoint or protocol this cannot use.
    """
    url = urlsplit(endpoint.strip() if "://" in endpoint else f"grpc://{endpoint.strip()}")
    scheme = url.scheme.lower()
    if scheme not in ("grpc", "http", "https"):
        raise ValueError(f"unsupported scheme {scheme!r} (use http, https or grpc)")
    if not url.hostname:
        raise ValueError("no host")
    chosen = protocol or (HTTP_PROTOBUF if scheme in ("http", "https") else GRPC)
    if chosen == HTTP_PROTOBUF:
        if scheme == "grpc":
            raise ValueError("OTLP/HTTP needs an http:// or https:// endpoint")
        path = url.path if url.path not in ("", "/") else DEFAULT_HTTP_PATH
        return ExportTarget(
            HTTP_PROTOBUF, urlunsplit((scheme, url.netloc, path, url.query, "")), insecure
        )
    if chosen != GRPC:
        raise ValueError(f"unsupported OTLP protocol {chosen!r} (use grpc or http/protobuf)")
    port = url.port or (443 if scheme == "https" else DEFAULT_GRPC_PORT)
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    return ExportTarget(GRPC, f"{host}:{port}", insecure or scheme == "http")


def protocol_from_environment() -> str | None:
    for name in PROTOCOL_VARIABLES:
        value = os.environ.get(name, "").strip().lower()
        if value:
            return value
    return None


def tracing_target(config: DaemonConfig) -> ExportTarget | None:
    """The export target when tracing is on, else None (and the reason is logged)."""
    if config.ghost_mode:
        log.debug("tracing off: ghost mode")
        return None
    if not config.trace_endpoint or not config.trace_auth_token:
        log.warning(
            "tracing off: --ghost-mode false needs both --trace-endpoint and --trace-auth-token"
        )
        return None
    try:
        return export_target(
            config.trace_endpoint, config.trace_insecure, protocol_from_environment()
        )
    except ValueError as exc:
        log.error("tracing off: --trace-endpoint %r: %s", config.trace_endpoint, exc)
        return None


def tracing_middlewares(daemon: Daemon) -> list[Middleware]:
    """[the tracing middleware] when tracing is on; [] otherwise, so ghost mode costs nothing."""
    target = tracing_target(daemon.config)
    if target is None:
        return []
    tracing = daemon.service(Tracing)
    tracing.start(target)
    daemon.service(DesktopControl).listen(tracing.desktop_control_changed)
    log.info(
        "tracing: spans go to %s over OTLP/%s%s",
        target.endpoint,
        "gRPC" if target.protocol == GRPC else "HTTP",
        " (insecure)" if target.insecure else "",
    )
    return [tracing.middleware()]


class Tracing:
    """The daemon's TracerProvider (`daemon.service(Tracing)`); flushed and shut down by aclose."""

    def __init__(self, daemon: Daemon) -> None:
        self._config = daemon.config
        self._provider: TracerProvider | None = None

    def start(self, target: ExportTarget) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        if self._provider is not None:
            return
        token = self._config.trace_auth_token or ""
        resource = Resource.create(
            {
                "service.name": "exec-daemon",
                "service.version": __version__,
                "host.name": socket.gethostname(),
                "process.pid": os.getpid(),
            }
        )
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        provider.add_span_processor(BatchSpanProcessor(_exporter(target, token)))
        # Not made the global provider: the spans are the daemon's own, not those of the
        # libraries it uses (the MCP SDK, pyqwest) that speak the OpenTelemetry API.
        self._provider = provider

    def middleware(self) -> Middleware:
        assert self._provider is not None, "start() first"
        return tracing_middleware(self._provider.get_tracer("exec_daemon", __version__))

    def desktop_control_changed(self, state: ControlState) -> None:
        """A span `desktop.take_over` / `desktop.hand_back` when a person takes or returns control."""
        if self._provider is None:
            return
        tracer = self._provider.get_tracer("exec_daemon", __version__)
        name = "desktop.take_over" if state.person_in_control else "desktop.hand_back"
        tracer.start_span(name, attributes={ATTR_PERSON_IN_CONTROL: state.person_in_control}).end()

    async def aclose(self) -> None:
        """Sends the queued spans, bounded: an unreachable collector must not hold up shutdown."""
        provider, self._provider = self._provider, None
        if provider is None:
            return
        # The SDK's shutdown may wait on exports far longer than we allow; a daemon thread
        # that overstays is simply left behind (it cannot keep the process alive).
        worker = threading.Thread(target=provider.shutdown, name="tracing-shutdown", daemon=True)
        worker.start()
        await asyncio.to_thread(worker.join, SHUTDOWN_SECONDS)
        if worker.is_alive():
            log.warning("tracing: spans not sent within %ss of shutdown are lost", SHUTDOWN_SECONDS)


def _exporter(target: ExportTarget, token: str) -> SpanExporter:
    headers = {"authorization": f"Bearer {token}"}
    if target.protocol == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(
            endpoint=target.endpoint,
            insecure=target.insecure,
            headers=headers,
            timeout=EXPORT_TIMEOUT_SECONDS,
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    session = _unverified_session() if target.insecure else None
    return HttpSpanExporter(
        endpoint=target.endpoint, headers=headers, timeout=EXPORT_TIMEOUT_SECONDS, session=session
    )


def _unverified_session() -> Any:
    """A requests Session that never checks certificates (the exporter resets `verify`)."""
    import warnings

    import requests
    from urllib3.exceptions import InsecureRequestWarning

    warnings.simplefilter("ignore", InsecureRequestWarning)

    class UnverifiedSession(requests.Session):
        def request(self, *args: Any, **kwargs: Any) -> requests.Response:
            kwargs["verify"] = False
            return super().request(*args, **kwargs)

    return UnverifiedSession()


def parent_of(headers: Mapping[str, str]) -> tuple[Context | None, tuple[Link, ...]]:
    """The parent context and links of a call's span, from its RPC's trace headers."""
    return _parent_of(tuple(headers.get(name, "") for name in TRACE_HEADERS))


# The calls of one stream share its headers: each distinct set is parsed once.
@functools.lru_cache(maxsize=256)
def _parent_of(values: tuple[str, ...]) -> tuple[Context | None, tuple[Link, ...]]:
    from opentelemetry.trace import Link, get_current_span
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    propagator = TraceContextTextMapPropagator()
    traceparent, tracestate, backend_traceparent, backend_tracestate = values

    def extract(parent: str, state: str) -> Context | None:
        if not parent:
            return None
        context = propagator.extract({"traceparent": parent, "tracestate": state})
        return context if get_current_span(context).get_span_context().is_valid else None

    direct = extract(traceparent, tracestate)
    backend = extract(backend_traceparent, backend_tracestate)
    if direct is None:
        return backend, ()
    if backend is None:
        return direct, ()
    return direct, (Link(get_current_span(backend).get_span_context()),)


def tracing_middleware(tracer: Tracer) -> Middleware:
    from opentelemetry.trace import SpanKind, Status, StatusCode

    async def trace_call(inv: Invocation, call_next: Next) -> Message:
        ctx = inv.ctx
        headers = ctx.extras.get(EXTRAS_KEY)
        parent, links = parent_of(headers) if headers else (None, ())
        attributes: dict[str, Any] = {ATTR_TOOL: inv.tool, ATTR_CALL_ID: ctx.call_id}
        if ctx.agent_id:
            attributes[ATTR_AGENT_ID] = ctx.agent_id
        # Not made the current span: nothing under the call reports to this tracer, and
        # attaching a context to the task costs more than the span itself.
        span = tracer.start_span(
            inv.tool, context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links
        )
        try:
            result = await call_next(inv)
        except CodedError as exc:
            span.set_attributes({ATTR_RESULT: "exec_error", ATTR_ERROR_CODE: exc.code})
            span.set_status(Status(StatusCode.ERROR, exc.code))
            raise
        except asyncio.CancelledError:
            span.set_attribute(ATTR_RESULT, "aborted")
            raise
        except Exception as exc:
            # Dispatcher.run answers this as ExecError `internal` (and logs the traceback).
            span.set_attributes(
                {
                    ATTR_RESULT: "exec_error",
                    ATTR_ERROR_CODE: "internal",
                    "exception.type": type(exc).__qualname__,
                }
            )
            span.set_status(Status(StatusCode.ERROR, "internal"))
            raise
        else:
            case = (
                result.WhichOneof("result")
                if "result" in result.DESCRIPTOR.oneofs_by_name
                else None
            )
            span.set_attribute(ATTR_RESULT, case or "unset")
            if case == "error" and result.error.code:  # type: ignore[attr-defined]
                span.set_attribute(ATTR_ERROR_CODE, result.error.code)  # type: ignore[attr-defined]
            return result
        finally:
            span.end()

    return trace_call
