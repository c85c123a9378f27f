"""The daemon's telemetry: traces, metrics and logs of tool calls over OTLP (off by default).

Telemetry is on only with `--ghost-mode false` AND `--trace-endpoint` AND `--trace-auth-token`
(as in the reference daemon); otherwise nothing is built, nothing is imported from the SDK, no
connection is made, no middleware is added to the call chain and the layers' `Meter`
(exec_daemon/kernel/metering.py) is the no-op one, so ghost mode costs nothing.

Where it goes (`--trace-endpoint`), all three signals to the same place:
- OTLP/gRPC by default, as the reference daemon: `https://host[:port]` (TLS, port 443),
  `grpc://host[:port]` or a bare `host[:port]` (TLS, port 4317), `http://host[:port]`
  (plaintext). `--trace-insecure` makes any of them a plaintext channel (gRPC has no "TLS
  without verification").
- OTLP/HTTP with protobuf bodies when the operator sets the standard
  `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` (or `OTEL_EXPORTER_OTLP_PROTOCOL`) = `http/protobuf`:
  each signal is POSTed to the URL's path + `/v1/traces`, `/v1/metrics` or `/v1/logs` (a URL
  already ending in one of them is taken as its base). `--trace-insecure` skips the certificate
  check of an https endpoint.
Every export carries `authorization: Bearer <token>`. A bad endpoint is logged and telemetry
stays off: it never stops the daemon from serving.

Traces. Each tool call is one SERVER span named after its ToolCall variant (e.g.
`shell_tool_call`), made by the outermost middleware so it covers the guards' time too, and
current while the call runs: its log records carry its ids (logs.CURRENT_CALL), and for the
tools whose spec says `continues_trace` (MCP: its SDK sends `traceparent` to the server) it is
OpenTelemetry's current span too. Its parent is the W3C
`traceparent` (+ `tracestate`) header of the RPC that carried the call (ExecStream or
ControlService.Exec); without one, the `backend-traceparent` header is the parent; with both,
the backend one becomes a span link. Attributes: `tool.name`, `tool.call_id`, `agent.id`,
`tool.result` (the result's oneof case, or `aborted`/`exec_error`), `tool.error_code` (a
ToolError's or ExecError's code). Status ERROR only when the call could not be run (an
ExecError, including `internal` for a crashed handler); a typed `error` result is the tool's
answer, not a daemon failure. Messages are never recorded: they can hold user data.

Metrics: exec_daemon/telemetry/metrics.py (names, units, which follow semantic conventions,
and how they are kept cheaply). Logs: exec_daemon/telemetry/logs.py. Resource:
`daemon_resource`. The spans of tool calls: exec_daemon/telemetry/call_spans.py; their OTLP/gRPC
encoding: exec_daemon/telemetry/span_encoding.py.

Redaction: string span attributes, metric labels and log bodies pass through `redact` (the
composition root gives the injected-secret matcher) after the daemon's auth and trace tokens
are replaced by `[REDACTED]`.

Export never slows or fails a call: a call leaves a record on a bounded queue, made into its
span and metrics by a thread (exec_daemon/telemetry/call_spans.py); spans and log records go to
bounded queues (the SDK's batch processors; a full queue drops, and the SDK's
`otel.sdk.processor.*.processed` metric counts it with `error.type=queue_full`, switched on here)
exported by background threads; metrics are read and sent by another. Everything is flushed at
shutdown within SHUTDOWN_SECONDS. What a call pays is kept small because those threads share the
GIL with the event loop: scripts/bench_tracing.py measures it (export on vs off, the goal of
issue #16 being <= 5 %).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from google.protobuf.message import Message

from agent.v1.tool_call_pb2 import ToolCallDelta
from exec_daemon import __version__
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.context import Emit, Invocation, Middleware, Next
from exec_daemon.kernel.desktop_control import ControlState, DesktopControl
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.metering import Meter, Metric
from exec_daemon.kernel.state import Daemon
from exec_daemon.telemetry.logs import CURRENT_CALL, otlp_log_handler

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk._logs.export import LogRecordExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricExporter
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Link, Tracer

    from exec_daemon.telemetry.call_spans import CallSpans
    from exec_daemon.telemetry.metrics import OtlpMeter
    from exec_daemon.telemetry.resource import RenewableResource

Redact = Callable[[str], str]
INTERNAL_METRICS_VARIABLE = "OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED"
REDACTED = "[REDACTED]"
SHELL_TOOL = "shell_tool_call"
COMPUTER_USE_TOOL = "computer_use_tool_call"

log = logging.getLogger(__name__)

# The RPC headers a call's span continues; carried to the middleware in CallContext.extras.
TRACE_HEADERS = ("traceparent", "tracestate", "backend-traceparent", "backend-tracestate")
EXTRAS_KEY = "trace_headers"

GRPC = "grpc"
HTTP_PROTOBUF = "http/protobuf"
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
DEFAULT_GRPC_PORT = 4317
# OTLP/HTTP: each signal is POSTed to the endpoint's base URL + its path.
SIGNAL_PATHS = {"traces": "/v1/traces", "metrics": "/v1/metrics", "logs": "/v1/logs"}
# One export attempt (with the gRPC exporter's retries) gives up after this long.
EXPORT_TIMEOUT_SECONDS = 5.0
# Ended tool calls wait at most this long for their spans and metrics to be made (call_spans.py).
COMPLETE_SECONDS = 0.5
# Daemon shutdown waits at most this long for the last spans to be sent (Daemon.aclose allows 3 s).
SHUTDOWN_SECONDS = 2.5

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
    # gRPC: "host:port"; HTTP: the base URL (each signal goes to its SIGNAL_PATHS under it).
    endpoint: str
    # gRPC: a plaintext channel; HTTPS: no certificate verification.
    insecure: bool

    def url(self, signal: str) -> str:
        """Where one signal ("traces", "metrics", "logs") is sent."""
        if self.protocol == GRPC:
            return self.endpoint
        scheme, netloc, path, query, _ = urlsplit(self.endpoint)
        return urlunsplit((scheme, netloc, path + SIGNAL_PATHS[signal], query, ""))


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
    chosen = protocol or GRPC
    if chosen == HTTP_PROTOBUF:
        if scheme == "grpc":
            raise ValueError("OTLP/HTTP needs an http:// or https:// endpoint")
        base = url.path.rstrip("/")
        for signal_path in SIGNAL_PATHS.values():
            base = base.removesuffix(signal_path)
        return ExportTarget(
            HTTP_PROTOBUF, urlunsplit((scheme, url.netloc, base, url.query, "")), insecure
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
    """[the tracing middleware] when telemetry is on; [] otherwise, so ghost mode costs nothing."""
    telemetry = start_telemetry(daemon)
    return [] if telemetry is None else [telemetry.middleware()]


def start_telemetry(daemon: Daemon, redact: Redact | None = None) -> Telemetry | None:
    """Starts the daemon's telemetry (once) when it is on, and makes its OTLP meter the
    daemon's `Meter`; None when it is off. `redact` cleans every exported string (the daemon's
    tokens are always removed too)."""
    telemetry = daemon.service(Telemetry)
    if telemetry.started:
        return telemetry
    if telemetry.off:
        return None
    target = tracing_target(daemon.config)
    if target is None:
        telemetry.off = True
        return None
    telemetry.start(target, redact or _unchanged)
    telemetry.meter.watch_sandbox(daemon.config.workspace)
    daemon.provide(Meter, lambda _daemon: telemetry.meter)
    daemon.service(DesktopControl).listen(telemetry.desktop_control_changed)
    log.info(
        "telemetry: traces, metrics and logs go to %s over OTLP/%s%s",
        target.endpoint,
        "gRPC" if target.protocol == GRPC else "HTTP",
        " (insecure)" if target.insecure else "",
    )
    return telemetry


def _unchanged(text: str) -> str:
    return text


def daemon_resource(config: DaemonConfig) -> dict[str, Any]:
    """Who sends: the service, and the VM and workspace the orchestrator correlates with
    (OTEL_RESOURCE_ATTRIBUTES adds to these, e.g. an orchestrator-assigned `vm.id`)."""
    attributes: dict[str, Any] = {
        "service.name": "exec-daemon",
        "service.version": __version__,
        "service.instance.id": str(uuid.uuid4()),
        "host.name": socket.gethostname(),
        "process.pid": os.getpid(),
        "exec_daemon.workspace": str(config.workspace),
    }
    try:
        attributes["host.id"] = Path("/etc/machine-id").read_text().strip()
    except OSError:
        pass
    return attributes


class Telemetry:
    """The daemon's tracer, meter and logger providers (`daemon.service(Telemetry)`), started by
    `start_telemetry`; flushed and shut down by aclose."""

    def __init__(self, daemon: Daemon) -> None:
        self._config = daemon.config
        self.off = False
        self._providers: list[Any] = []
        self._tracer: Tracer | None = None
        self._call_spans: CallSpans | None = None
        self._meter: OtlpMeter | None = None
        self._log_handler: logging.Handler | None = None
        self._resource: RenewableResource | None = None

    @property
    def started(self) -> bool:
        return bool(self._providers)

    @property
    def meter(self) -> OtlpMeter:
        assert self._meter is not None, "start() first"
        return self._meter

    def start(self, target: ExportTarget, redact: Redact) -> None:
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        from exec_daemon.telemetry.call_spans import CallSpans
        from exec_daemon.telemetry.metrics import Histograms, HistogramsExporter, OtlpMeter
        from exec_daemon.telemetry.resource import RenewableResource

        if self.started:
            return
        config = self._config
        clean = _token_scrubber(config, redact)
        # Counted instead (below): a warning per dropped span would flood the console, and be
        # written from the call's own path.
        logging.getLogger("opentelemetry.sdk._shared_internal").setLevel(logging.ERROR)
        exporters = _Exporters(target, config.trace_auth_token or "")
        resource = self._resource = RenewableResource.of(Resource.create(daemon_resource(config)))
        tracers = TracerProvider(resource=resource, shutdown_on_exit=False)
        loggers = LoggerProvider(resource=resource, shutdown_on_exit=False)
        scope = InstrumentationScope("exec_daemon", __version__)
        histograms = Histograms()
        metrics = HistogramsExporter(exporters.metrics(), histograms, resource, scope)
        # The SDK counts, in `meters`, the spans and records it drops or fails to send.
        with _sdk_counting_drops():
            meters = MeterProvider(
                resource=resource,
                metric_readers=[PeriodicExportingMetricReader(metrics)],
                shutdown_on_exit=False,
            )
            spans = BatchSpanProcessor(exporters.spans(meters), meter_provider=meters)
            tracers.add_span_processor(spans)
            loggers.add_log_record_processor(
                BatchLogRecordProcessor(exporters.logs(meters), meter_provider=meters)
            )
        # None is made the global provider: the telemetry is the daemon's own, not that of
        # the libraries it uses (the MCP SDK, pyqwest) that speak the OpenTelemetry API.
        self._providers = [tracers, loggers, meters]
        self._tracer = tracers.get_tracer(scope.name, scope.version)
        meter = OtlpMeter(meters.get_meter(scope.name, scope.version), clean, histograms)
        call_spans = self._call_spans = CallSpans(
            spans,
            tracers.sampler,
            resource,
            scope,
            parent_of,
            on_complete=lambda span: meter.tool_call(span.name, span.outcome, span.seconds),
            clean=clean,
            complete_every=min(COMPLETE_SECONDS, _schedule_delay_seconds()),
        )
        meter.count_dropped_calls(lambda: call_spans.dropped)
        self._meter = meter
        level = logging.getLevelNamesMapping().get(config.log_level.upper(), logging.WARNING)
        self._log_handler = otlp_log_handler(loggers, level, clean)
        logging.getLogger().addHandler(self._log_handler)

    def middleware(self) -> Middleware:
        assert self._call_spans is not None and self._meter is not None, "start() first"
        return tracing_middleware(self._call_spans, self._meter)

    def restored(self) -> None:
        """The VM was restored from a snapshot: what is exported from now on carries a fresh
        `service.instance.id` (the snapshot's other restores share the old one)."""
        if self._resource is not None:
            log.info("telemetry: service.instance.id is now %s", self._resource.renew_instance_id())

    def complete_calls(self) -> None:
        """Makes the spans and metrics of the calls ended so far now, on this thread, instead of
        on the telemetry-calls thread (scripts/bench_tracing.py bills them to their calls)."""
        if self._call_spans is not None:
            self._call_spans.complete_ended()

    def desktop_control_changed(self, state: ControlState) -> None:
        """A span `desktop.take_over` / `desktop.hand_back` when a person takes or returns control."""
        if self._tracer is None or not self.started:
            return
        name = "desktop.take_over" if state.person_in_control else "desktop.hand_back"
        attributes = {ATTR_PERSON_IN_CONTROL: state.person_in_control}
        self._tracer.start_span(name, attributes=attributes).end()

    async def aclose(self) -> None:
        """Sends what is queued, bounded: an unreachable collector must not hold up shutdown."""
        providers, self._providers = self._providers, []
        call_spans, self._call_spans = self._call_spans, None
        if self._log_handler is not None:
            logging.getLogger().removeHandler(self._log_handler)
            self._log_handler = None
        if not providers:
            return

        def shut_down() -> None:
            if call_spans is not None:
                call_spans.close(SHUTDOWN_SECONDS / 2)
            # Each signal flushes on its own thread: spans stuck on a slow collector must not
            # keep the last metrics (the call counts since the previous export) from being sent.
            flushing = [
                threading.Thread(target=provider.shutdown, name="telemetry-flush", daemon=True)
                for provider in providers
            ]
            for thread in flushing:
                thread.start()
            for thread in flushing:
                thread.join()

        # The SDK's shutdown may wait on exports far longer than we allow; a daemon thread
        # that overstays is simply left behind (it cannot keep the process alive).
        worker = threading.Thread(target=shut_down, name="telemetry-shutdown", daemon=True)
        worker.start()
        await asyncio.to_thread(worker.join, SHUTDOWN_SECONDS)
        if worker.is_alive():
            log.warning("telemetry: data not sent within %ss of shutdown is lost", SHUTDOWN_SECONDS)


def _token_scrubber(config: DaemonConfig, redact: Redact) -> Redact:
    tokens = [token for token in (config.auth_token, config.trace_auth_token) if token]

    def clean(text: str) -> str:
        for token in tokens:
            if token in text:
                text = text.replace(token, REDACTED)
        return redact(text)

    return clean


class _Exporters:
    """The OTLP exporters of the three signals, to one target with one bearer token."""

    def __init__(self, target: ExportTarget, token: str) -> None:
        self._target = target
        self._headers = {"authorization": f"Bearer {token}"}

    def _grpc(self) -> dict[str, Any]:
        return {
            "endpoint": self._target.endpoint,
            "insecure": self._target.insecure,
            "headers": self._headers,
            "timeout": EXPORT_TIMEOUT_SECONDS,
        }

    def _http(self, signal: str) -> dict[str, Any]:
        session = _unverified_session() if self._target.insecure else None
        return {
            "endpoint": self._target.url(signal),
            "headers": self._headers,
            "timeout": EXPORT_TIMEOUT_SECONDS,
            "session": session,
        }

    def spans(self, meters: MeterProvider) -> SpanExporter:
        if self._target.protocol == GRPC:
            from exec_daemon.telemetry.span_encoding import GrpcSpanExporter

            return GrpcSpanExporter(**self._grpc(), meter_provider=meters)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpSpanExporter,
        )

        from exec_daemon.telemetry.call_spans import ReadableSpans

        return ReadableSpans(HttpSpanExporter(**self._http("traces"), meter_provider=meters))

    def metrics(self) -> MetricExporter:
        if self._target.protocol == GRPC:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                OTLPMetricExporter,
            )

            return OTLPMetricExporter(**self._grpc())
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
            OTLPMetricExporter as HttpMetricExporter,
        )

        return HttpMetricExporter(**self._http("metrics"))

    def logs(self, meters: MeterProvider) -> LogRecordExporter:
        if self._target.protocol == GRPC:
            from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter

            return OTLPLogExporter(**self._grpc(), meter_provider=meters)
        from opentelemetry.exporter.otlp.proto.http._log_exporter import (
            OTLPLogExporter as HttpLogExporter,
        )

        return HttpLogExporter(**self._http("logs"), meter_provider=meters)


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


def _schedule_delay_seconds() -> float:
    """How often the SDK's span processor exports (OTEL_BSP_SCHEDULE_DELAY, ms; default 5 s)."""
    try:
        return max(int(os.environ.get("OTEL_BSP_SCHEDULE_DELAY", "5000")), 1) / 1000
    except ValueError:
        return 5.0


@contextlib.contextmanager
def _sdk_counting_drops() -> Iterator[None]:
    """The SDK's processors and exporters count what they drop (queue full) or fail to send only
    when OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED says so as they are built; so it does while they
    are, unless the operator set it. Tracers made later keep the operator's setting (off by
    default): their per-span counters (spans started, live) cost ~8 µs a span."""
    if INTERNAL_METRICS_VARIABLE in os.environ:
        yield
        return
    os.environ[INTERNAL_METRICS_VARIABLE] = "true"
    try:
        yield
    finally:
        os.environ.pop(INTERNAL_METRICS_VARIABLE, None)


def tracing_middleware(spans: CallSpans, meter: OtlpMeter) -> Middleware:
    from opentelemetry import context as otel_context
    from opentelemetry.trace import NonRecordingSpan, set_span_in_context

    from exec_daemon.telemetry.call_spans import ABORTED

    async def trace_call(inv: Invocation, call_next: Next) -> Message:
        ctx = inv.ctx
        span = spans.open(inv.tool, ctx.call_id, ctx.agent_id, ctx.extras.get(EXTRAS_KEY))
        # Current while the call runs, so the records it logs carry its trace and span ids; and
        # OpenTelemetry's current span for tools whose requests continue the trace (MCP).
        current = CURRENT_CALL.set(span)
        attached = (
            otel_context.attach(set_span_in_context(NonRecordingSpan(span.span_context())))
            if inv.spec.continues_trace
            else None
        )
        if inv.tool == SHELL_TOOL:
            inv = replace(inv, ctx=ctx.with_emit(_counting_shell_bytes(ctx.emit, meter)))
        try:
            result = await call_next(inv)
        except CodedError as exc:
            span.fail(exc.code)
            raise
        except asyncio.CancelledError:
            span.outcome = ABORTED
            raise
        except Exception as exc:
            # Dispatcher.run answers this as ExecError `internal` (and logs the traceback).
            span.fail("internal", type(exc).__qualname__)
            raise
        else:
            case = (
                result.WhichOneof("result")
                if "result" in result.DESCRIPTOR.oneofs_by_name
                else None
            )
            if case is not None:
                span.outcome = case
                if case == "error":
                    span.error_code = result.error.code  # type: ignore[attr-defined]
            if inv.tool == COMPUTER_USE_TOOL:
                seconds = time.perf_counter() - span.started
                _record_computer_use(meter, inv.args, result, seconds)
            return result
        finally:
            if attached is not None:
                otel_context.detach(attached)
            CURRENT_CALL.reset(current)
            span.end()

    return trace_call


def _counting_shell_bytes(emit: Emit, meter: OtlpMeter) -> Emit:
    async def counting_emit(delta: ToolCallDelta) -> None:
        if delta.WhichOneof("delta") == "shell_tool_call_delta":
            shell = delta.shell_tool_call_delta
            stream = shell.WhichOneof("delta")
            if stream in ("stdout", "stderr"):
                data: str = getattr(shell, stream)
                meter.add(Metric.SHELL_BYTES, len(data.encode()), stream=stream)
        await emit(delta)

    return counting_emit


def _record_computer_use(meter: OtlpMeter, args: Message, result: Message, seconds: float) -> None:
    """The seed's computer-use metrics: one call is one session."""
    outcome = result.WhichOneof("result") or "unset"  # type: ignore[attr-defined]
    actions = len(args.actions)  # type: ignore[attr-defined]
    if outcome == "success":
        actions = result.success.action_count  # type: ignore[attr-defined]
    elif outcome == "error" and result.error.code:  # type: ignore[attr-defined]
        outcome = result.error.code  # type: ignore[attr-defined]
    meter.computer_use(outcome, seconds, actions)
