"""exec_daemon/telemetry/tracing.py: spans of tool calls reach a real OTLP receiver (gRPC and HTTP) on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import secrets
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from agent.v1.files_pb2 import GrepArgs, GrepToolCall, ReadToolArgs, ReadToolCall
from agent.v1.todos_pb2 import ReadTodosArgs, ReadTodosToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.state import Daemon
from exec_daemon.telemetry.tracing import (
    GRPC,
    HTTP_PROTOBUF,
    ExportTarget,
    export_target,
    tracing_middlewares,
)
from tests.daemon_process import RunningDaemon, running_daemon
from tests.inprocess import serve_in_process
from tests.loopback_http import serving_http
from tests.otlp_receiver import serving_grpc
from tests.polling import eventually, wait_until
from tests.scripted_tool import VARIANT, ScriptedTool, script

TRACE_TOKEN = "trace-token-" + secrets.token_hex(4)
# The daemon's batch processor sends every 100 ms instead of every 5 s (the SDK's variable).
FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "100"}
# ... or only when the daemon shuts down.
EXPORT_AT_SHUTDOWN = {"OTEL_BSP_SCHEDULE_DELAY": "600000"}
ARRIVAL_SECONDS = 10.0
# The operator's choice of OTLP/HTTP (gRPC is the default, as in the reference daemon).
HTTP_CHOSEN = {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}


@dataclass
class Received:
    """What an OTLP receiver got: one entry per export request."""

    headers: list[dict[str, str]] = field(default_factory=list)
    requests: list[trace_service_pb2.ExportTraceServiceRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, headers: dict[str, str], body: bytes) -> None:
        request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
        with self.lock:
            self.headers.append(headers)
            self.requests.append(request)

    def spans(self) -> list[tuple[dict[str, Any], Span]]:
        """(resource attributes, span) for every span received so far."""
        with self.lock:
            requests = list(self.requests)
        return [
            (attributes(resource_spans.resource.attributes), span)
            for request in requests
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]

    def span(self, name: str) -> Span:
        matching = [span for _resource, span in self.spans() if span.name == name]
        assert len(matching) == 1, f"{len(matching)} spans named {name}: {self.spans()}"
        return matching[0]

    def wait_for(self, count: int) -> None:
        wait_until(lambda: len(self.spans()) >= count, ARRIVAL_SECONDS, f"{count} spans")


def attributes(pairs: Any) -> dict[str, Any]:
    def value(pair: KeyValue) -> Any:
        kind = pair.value.WhichOneof("value")
        return getattr(pair.value, kind) if kind else None

    return {pair.key: value(pair) for pair in pairs}


@contextlib.contextmanager
def grpc_receiver() -> Iterator[tuple[int, Received]]:
    """A plaintext OTLP/gRPC TraceService on a free loopback port."""
    received = Received()

    class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            headers = {key: value for key, value in context.invocation_metadata()}
            received.add(headers, request.SerializeToString())
            return trace_service_pb2.ExportTraceServiceResponse()

    def add_services(server: grpc.Server) -> None:
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), server)

    with serving_grpc(add_services, workers=2) as port:
        yield port, received


@contextlib.contextmanager
def http_receiver(tls: ssl.SSLContext | None = None) -> Iterator[tuple[int, Received]]:
    """An OTLP/HTTP receiver (protobuf bodies) on a free loopback port; 404 outside /v1/traces."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                # Metrics and logs go to their own paths: accepted, not kept here.
                self.send_response(200 if self.path in ("/v1/metrics", "/v1/logs") else 404)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            received.add({key.lower(): value for key, value in self.headers.items()}, body)
            answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serving_http(Handler, tls) as server:
        yield server.server_address[1], received


def read_todos() -> ToolCall:
    return ToolCall(read_todos_tool_call=ReadTodosToolCall(args=ReadTodosArgs()))


def exec_error_call() -> ToolCall:
    """A call answered with an ExecError: grep, on a daemon whose ripgrep is missing."""
    return ToolCall(grep_tool_call=GrepToolCall(args=GrepArgs(pattern="x")))


# Every daemon here has no ripgrep, so `exec_error_call` fails with ExecError `unavailable`.
NO_RIPGREP = ("--rg-path", "/nonexistent/rg")


def traceparent(trace_id: str, span_id: str) -> str:
    return f"00-{trace_id}-{span_id}-01"


def tracing_flags(endpoint: str, *extra: str) -> tuple[str, ...]:
    return (
        "--ghost-mode",
        "false",
        "--trace-endpoint",
        endpoint,
        "--trace-auth-token",
        TRACE_TOKEN,
        *NO_RIPGREP,
        *extra,
    )


def loopback_grpc_flags(port: int, *extra: str) -> tuple[str, ...]:
    """tracing_flags for a plaintext OTLP/gRPC receiver on 127.0.0.1:`port`."""
    return tracing_flags(f"grpc://127.0.0.1:{port}", "--trace-insecure", *extra)


async def test_grpc_spans_of_tool_calls_continue_the_callers_trace(
    workspace: Path, tmp_path: Path
) -> None:
    """Also proves the flush at shutdown: nothing is sent before it."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    backend_trace_id, backend_span_id = secrets.token_hex(16), secrets.token_hex(8)
    with (
        grpc_receiver() as (port, received),
        running_daemon(
            workspace,
            tmp_path / "state",
            *loopback_grpc_flags(port),
            env=EXPORT_AT_SHUTDOWN,
        ) as daemon,
    ):
        async with daemon.client() as client:
            assert (await client.run(read_todos(), agent_id="agent-7")).result is not None
            failed = await client.run(exec_error_call())
            assert failed.error is not None and failed.error.code == "unavailable"
            missing = ToolCall(read_tool_call=ReadToolCall(args=ReadToolArgs(path="/nope/x")))
            assert (await client.run(missing)).result is not None
        async with daemon.client() as client:
            client.headers["traceparent"] = traceparent(trace_id, span_id)
            client.headers["backend-traceparent"] = traceparent(backend_trace_id, backend_span_id)
            async with client.exec_stream() as stream:
                call = await stream.start(read_todos(), agent_id="agent-8", call_id=41)
                assert (await call.wait()).result is not None
        assert received.spans() == [], "sent before the shutdown"
        assert daemon.stop() == 0

    assert {headers.get("authorization") for headers in received.headers} == {
        f"Bearer {TRACE_TOKEN}"
    }
    resource, _span = received.spans()[0]
    assert resource["service.name"] == "exec-daemon"
    assert resource["service.version"]
    assert resource["host.name"]
    spans = {
        (span.name, attributes(span.attributes).get("agent.id")): span
        for _resource, span in received.spans()
    }
    assert len(spans) == len(received.spans()) == 4

    plain = spans[("read_todos_tool_call", "agent-7")]
    assert attributes(plain.attributes) == {
        "tool.name": "read_todos_tool_call",
        "tool.call_id": 0,
        "agent.id": "agent-7",
        "tool.result": "success",
    }
    assert plain.kind == Span.SPAN_KIND_SERVER
    assert plain.parent_span_id == b""
    assert plain.status.code == Status.STATUS_CODE_UNSET

    exec_error = spans[("grep_tool_call", None)]
    assert attributes(exec_error.attributes)["tool.result"] == "exec_error"
    assert attributes(exec_error.attributes)["tool.error_code"] == "unavailable"
    assert exec_error.status.code == Status.STATUS_CODE_ERROR

    not_found = spans[("read_tool_call", None)]
    assert attributes(not_found.attributes)["tool.result"] == "file_not_found"
    assert not_found.status.code == Status.STATUS_CODE_UNSET

    continued = spans[("read_todos_tool_call", "agent-8")]
    assert continued.trace_id.hex() == trace_id
    assert continued.parent_span_id.hex() == span_id
    assert attributes(continued.attributes)["tool.call_id"] == 41
    assert [(link.trace_id.hex(), link.span_id.hex()) for link in continued.links] == [
        (backend_trace_id, backend_span_id)
    ]


@contextlib.contextmanager
def exporting_over_http(
    workspace: Path, tmp_path: Path
) -> Iterator[tuple[RunningDaemon, Received]]:
    """A daemon exporting OTLP/HTTP (protobuf) to a loopback receiver, sending often."""
    with (
        http_receiver() as (port, received),
        running_daemon(
            workspace,
            tmp_path / "state",
            *tracing_flags(f"http://127.0.0.1:{port}"),
            env=FAST_EXPORT | HTTP_CHOSEN,
        ) as daemon,
    ):
        yield daemon, received


async def test_http_protobuf_export_and_backend_traceparent(
    workspace: Path, tmp_path: Path
) -> None:
    backend_trace_id, backend_span_id = secrets.token_hex(16), secrets.token_hex(8)
    with exporting_over_http(workspace, tmp_path) as (daemon, received):
        async with daemon.client() as client:
            client.headers["backend-traceparent"] = traceparent(backend_trace_id, backend_span_id)
            assert (await client.run(read_todos())).result is not None
            # Sent while the daemon runs, not only when it stops.
            received.wait_for(1)
    span = received.span("read_todos_tool_call")
    assert span.trace_id.hex() == backend_trace_id
    assert span.parent_span_id.hex() == backend_span_id
    assert received.headers[0]["authorization"] == f"Bearer {TRACE_TOKEN}"
    assert received.headers[0]["content-type"] == "application/x-protobuf"


async def test_a_caller_that_does_not_sample_gets_no_span(workspace: Path, tmp_path: Path) -> None:
    """The sampler is parent-based: a traceparent whose sampled flag is off is followed."""
    with exporting_over_http(workspace, tmp_path) as (daemon, received):
        async with daemon.client() as client:
            client.headers["traceparent"] = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-00"
            assert (await client.run(read_todos(), agent_id="unsampled")).result is not None
        async with daemon.client() as client:
            assert (await client.run(read_todos(), agent_id="sampled")).result is not None
        assert daemon.stop() == 0
    agents = [attributes(span.attributes).get("agent.id") for _resource, span in received.spans()]
    assert agents == ["sampled"]


async def test_crashed_and_aborted_calls() -> None:
    """A crash is an `internal` ExecError span whose text is not recorded; an abort ends the span."""
    tool = ScriptedTool()
    with grpc_receiver() as (port, received):
        async with serve_in_process(
            tool.handlers(),
            ghost_mode=False,
            trace_endpoint=f"127.0.0.1:{port}",
            trace_auth_token=TRACE_TOKEN,
            trace_insecure=True,
        ) as server:
            async with server.client() as client, client.exec_stream() as stream:
                crashed = await stream.start(script("crash"))
                assert (await crashed.wait()).error is not None
                sleeping = await stream.start(script("sleep:30"))
                await eventually(lambda: sleeping.id in tool.started)
                await stream.abort(sleeping.id)
                # Half the call's 30 s: it ended at the abort, not at the sleep's end.
                assert (await asyncio.wait_for(sleeping.wait(), 15)).result is not None
        # serve_in_process closed the daemon: the spans were flushed.
        spans = {span.span_id: span for _resource, span in received.spans()}
    assert len(spans) == 2
    by_call = {attributes(span.attributes)["tool.call_id"]: span for span in spans.values()}
    crash = by_call[crashed.id]
    assert crash.name == VARIANT
    assert crash.status.code == Status.STATUS_CODE_ERROR
    assert attributes(crash.attributes)["tool.error_code"] == "internal"
    assert "secret-internal-detail" not in str(crash)
    abort = by_call[sleeping.id]
    assert attributes(abort.attributes)["tool.result"] == "aborted"
    assert abort.end_time_unix_nano - abort.start_time_unix_nano < 15 * 10**9


def self_signed_tls(directory: Path) -> ssl.SSLContext:
    cert, key = directory / "cert.pem", directory / "key.pem"
    command = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1".split()
    subprocess.run(
        [*command, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=30,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


async def test_trace_insecure_skips_the_certificate_check_of_https(
    workspace: Path, tmp_path: Path
) -> None:
    tls = self_signed_tls(tmp_path)
    for insecure in (False, True):
        with (
            http_receiver(tls) as (port, received),
            running_daemon(
                workspace,
                tmp_path / f"state-{insecure}",
                *tracing_flags(
                    f"https://127.0.0.1:{port}/v1/traces", *(["--trace-insecure"] * insecure)
                ),
                env=FAST_EXPORT | HTTP_CHOSEN,
            ) as daemon,
        ):
            async with daemon.client() as client:
                assert (await client.run(read_todos())).result is not None
            if insecure:
                received.wait_for(1)
                assert daemon.stop() == 0
            else:
                wait_until(lambda: "CERTIFICATE_VERIFY_FAILED" in daemon.log())
                assert received.spans() == [], "a self-signed certificate must be refused"
                # The exporter may still be retrying: shutdown must not wait for it (stop()
                # allows SHUTDOWN_SECONDS).
                assert daemon.stop() == 0
                assert received.spans() == []


@pytest.mark.parametrize(
    "flags",
    [
        # Ghost mode is on by default: an endpoint and a token alone send nothing.
        ("--trace-endpoint", "{endpoint}", "--trace-auth-token", TRACE_TOKEN),
        # As in the reference, tracing needs the token too.
        ("--ghost-mode", "false", "--trace-endpoint", "{endpoint}"),
    ],
    ids=["ghost-mode-default", "no-token"],
)
async def test_nothing_is_sent_without_tracing(
    workspace: Path, tmp_path: Path, flags: tuple[str, ...]
) -> None:
    with http_receiver() as (port, received):
        endpoint = f"http://127.0.0.1:{port}"
        args = [flag.format(endpoint=endpoint) for flag in flags]
        with running_daemon(
            workspace, tmp_path / "state", *args, *NO_RIPGREP, env=FAST_EXPORT
        ) as daemon:
            async with daemon.client() as client:
                assert (await client.run(read_todos())).result is not None
                assert (await client.run(exec_error_call())).error is not None
            assert daemon.stop() == 0  # a daemon that traced would send its spans now
        assert received.spans() == []
        assert "tracing: spans go to" not in daemon.log()


def test_ghost_mode_adds_no_middleware(workspace: Path) -> None:
    config = DaemonConfig(
        auth_token="t",
        workspace=workspace,
        trace_endpoint="http://127.0.0.1:9",
        trace_auth_token="x",
    )
    assert tracing_middlewares(Daemon(config)) == []


@pytest.mark.parametrize(
    ("endpoint", "insecure", "protocol", "target"),
    [
        ("http://collector:4318", False, "http/protobuf", ExportTarget(HTTP_PROTOBUF, "http://collector:4318", False)),
        ("https://api.example.com/otlp/v1/traces", True, "http/protobuf", ExportTarget(HTTP_PROTOBUF, "https://api.example.com/otlp", True)),
        ("https://api.example.com/otlp/", False, "http/protobuf", ExportTarget(HTTP_PROTOBUF, "https://api.example.com/otlp", False)),
        ("grpc://collector", False, None, ExportTarget(GRPC, "collector:4317", False)),
        ("collector:5555", True, None, ExportTarget(GRPC, "collector:5555", True)),
        ("[::1]:4317", False, None, ExportTarget(GRPC, "[::1]:4317", False)),
        # The reference's set-up: gRPC over TLS to an https:// endpoint, also by default.
        ("https://api.example.com", False, "grpc", ExportTarget(GRPC, "api.example.com:443", False)),
        ("https://api.example.com", False, None, ExportTarget(GRPC, "api.example.com:443", False)),
        ("http://collector:4317", False, None, ExportTarget(GRPC, "collector:4317", True)),
        ("http://127.0.0.1:4317", False, "grpc", ExportTarget(GRPC, "127.0.0.1:4317", True)),
    ],
)  # fmt: skip
def test_export_target(
    endpoint: str, insecure: bool, protocol: str | None, target: ExportTarget
) -> None:
    assert export_target(endpoint, insecure, protocol) == target


@pytest.mark.parametrize(
    ("endpoint", "protocol"),
    [
        ("ftp://host", None),
        ("grpc://host", "http/protobuf"),
        ("http://host", "http/json"),
        ("http://", None),
    ],
)
def test_export_target_refuses(endpoint: str, protocol: str | None) -> None:
    with pytest.raises(ValueError):
        export_target(endpoint, False, protocol)


async def test_bad_endpoint_leaves_the_daemon_serving(workspace: Path, tmp_path: Path) -> None:
    with running_daemon(
        workspace, tmp_path / "state", *tracing_flags("ftp://127.0.0.1:9")
    ) as daemon:
        async with daemon.client() as client:
            assert (await client.run(read_todos())).result is not None
        assert "tracing off: --trace-endpoint" in daemon.log()


def test_the_span_encoding_gives_the_sdks_message() -> None:
    """exec_daemon/telemetry/span_encoding.py: cheaper, the same bytes on the wire, for the
    call spans and for whatever the SDK's tracer makes (events, links, typed attributes)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import DEFAULT_ON
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import (
        Link,
        NonRecordingSpan,
        SpanContext,
        SpanKind,
        StatusCode,
        TraceFlags,
        TraceState,
        set_span_in_context,
    )
    from opentelemetry.trace import Status as SdkStatus

    from exec_daemon.telemetry.call_spans import CallSpan, CallSpans
    from exec_daemon.telemetry.span_encoding import encode_spans

    finished: list[ReadableSpan] = []

    class Keep(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            finished.extend(spans)
            return SpanExportResult.SUCCESS

    remote = SpanContext(
        0xA1, 0xB2, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("k", "v")])
    )
    for resource in (Resource.create({"service.name": "a"}), Resource.create({"n": 1})):
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(SimpleSpanProcessor(Keep()))
        tracer = provider.get_tracer("exec_daemon", "1.0")
        with tracer.start_as_current_span(
            "desktop.take_over",
            kind=SpanKind.SERVER,
            attributes={"s": "x", "b": True, "i": 3, "f": 0.5, "list": ["a", "b"], "n": [1, 2]},
            links=[Link(remote, {"why": "backend"})],
        ) as span:
            span.add_event("started", {"step": 1})
            with tracer.start_as_current_span("child") as child:
                child.set_status(SdkStatus(StatusCode.ERROR, "broke"))
        provider.shutdown()
    scope = InstrumentationScope("exec_daemon", "1.0")
    finished.append(
        ReadableSpan(
            "read_todos_tool_call",
            SpanContext(0xA1, 0xC3, is_remote=False, trace_flags=TraceFlags(1)),
            remote,
            finished[0].resource,
            {"tool.name": "read_todos_tool_call", "agent.id": "agent-1"},
            kind=SpanKind.SERVER,
            start_time=10,
            end_time=20,
            instrumentation_scope=finished[0].instrumentation_scope,
        )
    )
    assert encode_spans(finished) == sdk_encode(finished)
    assert len(encode_spans(finished).resource_spans) == 2

    # The tool calls' own spans, encoded as they are queued, and as the HTTP exporter gets them.
    parent = set_span_in_context(NonRecordingSpan(remote))
    calls = CallSpans(
        SimpleSpanProcessor(Keep()),
        DEFAULT_ON,
        finished[0].resource,
        scope,
        lambda _headers: (parent, ()),
    )
    for tool, fails in (("read_todos_tool_call", False), ("grep_tool_call", True)):
        span = calls.open(tool, 7, "agent-1", {"traceparent": "given by parent_of"})
        if fails:
            span.fail("internal", "RuntimeError")
        span.end()
    calls.close(timeout=5)
    queued = finished[-2:]
    assert all(isinstance(span, CallSpan) for span in queued)
    readable = [span.readable() for span in queued]  # type: ignore[attr-defined]
    assert encode_spans(queued) == sdk_encode(readable)
