"""exec_daemon/telemetry/: traces, metrics and logs reach a real OTLP receiver on loopback.

The receiver is a grpcio server implementing opentelemetry-proto's TraceService, MetricsService
and LogsService (and, for OTLP/HTTP, a plain HTTP server); it keeps every request and its headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import math
import re
import secrets
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from agent.v1.computer_pb2 import ComputerUseAction, ComputerUseArgs, ComputerUseToolCall
from agent.v1.mcp_pb2 import McpArgs, McpToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.kernel.metering import Metric
from exec_daemon.telemetry.metrics import (
    DURATION_BUCKETS,
    MAX_LABEL_SETS,
    Histograms,
    HistogramsExporter,
    OtlpMeter,
)
from exec_daemon.telemetry.tracing import EXPORT_TIMEOUT_SECONDS
from tests.daemon_process import RunningDaemon, running_daemon
from tests.loopback_http import serving_http
from tests.otlp_receiver import serving_grpc
from tests.polling import wait_until
from tests.shell_calls import shell_call
from tests.test_tracing import (
    NO_RIPGREP,
    TRACE_TOKEN,
    attributes,
    exec_error_call,
    loopback_grpc_flags,
    read_todos,
    traceparent,
    tracing_flags,
)

FAST = {
    "OTEL_BSP_SCHEDULE_DELAY": "100",
    "OTEL_BLRP_SCHEDULE_DELAY": "100",
    "OTEL_METRIC_EXPORT_INTERVAL": "300",
}
ARRIVAL_SECONDS = 15.0
REPO = Path(__file__).resolve().parent.parent
DEMO_MCP_SERVER = ("-m", "tests.mcp_servers.demo_server")
CUMULATIVE = AggregationTemporality.CUMULATIVE
SIGNALS = ("traces", "metrics", "logs")


@dataclass
class Receiver:
    """Every export request by signal, with its headers; `delay` slows the trace service (each
    export held that long, or until the collector closes)."""

    requests: dict[str, list[Message]] = field(default_factory=lambda: {s: [] for s in SIGNALS})
    headers: dict[str, list[dict[str, str]]] = field(
        default_factory=lambda: {s: [] for s in SIGNALS}
    )
    raw: list[bytes] = field(default_factory=list)
    delay: float = 0.0
    closing: threading.Event = field(default_factory=threading.Event)
    traces_begun: int = 0  # trace exports received, answered or not yet
    # The trace exports answered UNAVAILABLE (a collector restarting), their bodies kept.
    refuse_traces: int = 0
    refused: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, signal: str, headers: dict[str, str], request: Message) -> None:
        with self.lock:
            self.requests[signal].append(request)
            self.headers[signal].append(headers)
            self.raw.append(request.SerializeToString())

    def of(self, signal: str) -> list[Any]:
        with self.lock:
            return list(self.requests[signal])

    def items(self, signal: str, path: tuple[str, str, str]) -> list[Any]:
        """Every item under the requests of `signal` along (resource, scope, item) fields."""
        resources, scopes, items = path
        return [
            item
            for request in self.of(signal)
            for resource in getattr(request, resources)
            for scope in getattr(resource, scopes)
            for item in getattr(scope, items)
        ]

    def spans(self) -> list[Any]:
        return self.items("traces", ("resource_spans", "scope_spans", "spans"))

    def log_records(self) -> list[Any]:
        return self.items("logs", ("resource_logs", "scope_logs", "log_records"))

    def metrics(self) -> dict[str, Any]:
        """The latest data of each metric name (cumulative: the last export holds it all)."""
        path = ("resource_metrics", "scope_metrics", "metrics")
        return {metric.name: metric for metric in self.items("metrics", path)}

    def metrics_by_sender(self) -> dict[str, dict[str, Any]]:
        """metrics() of each daemon that sent some, by its `service.instance.id`."""
        senders: dict[str, dict[str, Any]] = {}
        for request in self.of("metrics"):
            for resource in request.resource_metrics:
                sender = attributes(resource.resource.attributes).get("service.instance.id")
                latest = senders.setdefault(str(sender), {})
                for scope in resource.scope_metrics:
                    latest.update((metric.name, metric) for metric in scope.metrics)
        return senders


def points(metric: Any) -> list[Any]:
    kind = metric.WhichOneof("data")
    return list(getattr(metric, kind).data_points)


def total(metric: Any, **labels: str) -> float:
    """The sum (counters) or count (histograms) or last value (gauges) over matching points."""
    found = 0.0
    for point in points(metric):
        if all(attributes(point.attributes).get(k) == v for k, v in labels.items()):
            if hasattr(point, "count") and metric.WhichOneof("data") == "histogram":
                found += point.count
            else:
                found += point.as_int or point.as_double
    return found


@contextlib.contextmanager
def grpc_collector(delay: float = 0.0) -> Iterator[tuple[int, Receiver]]:
    """A plaintext OTLP/gRPC collector (traces, metrics, logs) on a free loopback port."""
    received = Receiver(delay=delay)

    def metadata(context: Any) -> dict[str, str]:
        return {key: value for key, value in context.invocation_metadata()}

    class Traces(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            with received.lock:
                received.traces_begun += 1
            received.closing.wait(received.delay)  # a slow collector (its own thread)
            with received.lock:
                refuse = len(received.refused) < received.refuse_traces
                if refuse:
                    received.refused.append(request.SerializeToString())
            if refuse:
                context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
            received.add("traces", metadata(context), request)
            return trace_service_pb2.ExportTraceServiceResponse()

    class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            received.add("metrics", metadata(context), request)
            return metrics_service_pb2.ExportMetricsServiceResponse()

    class Logs(logs_service_pb2_grpc.LogsServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            received.add("logs", metadata(context), request)
            return logs_service_pb2.ExportLogsServiceResponse()

    def add_services(server: grpc.Server) -> None:
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)

    with serving_grpc(add_services) as port:
        try:
            yield port, received
        finally:
            received.closing.set()


REQUESTS = {
    "/v1/traces": ("traces", trace_service_pb2.ExportTraceServiceRequest),
    "/v1/metrics": ("metrics", metrics_service_pb2.ExportMetricsServiceRequest),
    "/v1/logs": ("logs", logs_service_pb2.ExportLogsServiceRequest),
}


@contextlib.contextmanager
def http_collector() -> Iterator[tuple[int, Receiver]]:
    received = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            signal, request_class = REQUESTS.get(self.path, ("", None))
            if request_class is None:
                self.send_response(404)
                self.end_headers()
                return
            headers = {key.lower(): value for key, value in self.headers.items()}
            received.add(signal, headers, request_class.FromString(body))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serving_http(Handler) as server:
        yield server.server_address[1], received


def computer_use() -> ToolCall:
    action = ComputerUseAction()
    action.screenshot.SetInParent()
    return ToolCall(
        computer_use_tool_call=ComputerUseToolCall(args=ComputerUseArgs(actions=[action]))
    )


def failing_hook(workspace: Path, secret: str) -> None:
    """A beforeShellExecution hook that fails (logged as a warning inside the call), its
    command holding `secret`: the log record names the command."""
    config = workspace / ".cursor" / "hooks.json"
    config.parent.mkdir(exist_ok=True)
    hooks = {"beforeShellExecution": [{"command": f"exit 1 # {secret}"}]}
    config.write_text(json.dumps({"version": 1, "hooks": hooks}))


async def test_traces_metrics_and_logs_over_grpc(workspace: Path, tmp_path: Path) -> None:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    injected = "injected-" + secrets.token_hex(8)
    failing_hook(workspace, f"{TRACE_TOKEN} {injected}")
    with (
        grpc_collector() as (port, received),
        running_daemon(
            workspace,
            tmp_path / "state",
            *loopback_grpc_flags(port),
            env=FAST | {"CLOUD_AGENT_INJECTED_SECRET_NAMES": "API_KEY", "API_KEY": injected},
        ) as daemon,
    ):
        async with daemon.client() as client:
            client.headers["traceparent"] = traceparent(trace_id, parent_id)
            assert (await client.run(read_todos(), agent_id=f"agent-{TRACE_TOKEN}")).result
            async with client.exec_stream():
                shelled = await client.run(shell_call("printf 'hello telemetry\\n'"))
                assert "hello telemetry" in shelled.result.shell_tool_call.result.success.stdout
                assert (await client.run(exec_error_call())).error is not None
                assert (await client.run(computer_use())).result is not None

                def stream_counted() -> bool:
                    metric = received.metrics().get("exec_daemon.exec_streams")
                    return metric is not None and total(metric) >= 1

                wait_until(stream_counted, ARRIVAL_SECONDS, "a live ExecStream")

        def all_arrived() -> bool:
            names = {span.name for span in received.spans()}
            metric = received.metrics().get("exec_daemon.tool.calls")
            return (
                {"read_todos_tool_call", "shell_tool_call", "grep_tool_call"} <= names
                and metric is not None
                and total(metric) >= 4
                and "computer_use.session.result" in received.metrics()
                and any(r.span_id for r in received.log_records())
            )

        wait_until(all_arrived, ARRIVAL_SECONDS, "spans, metrics and logs")

        def streams_closed() -> bool:
            metric = received.metrics().get("exec_daemon.exec_streams")
            return metric is not None and total(metric) == 0

        wait_until(streams_closed, ARRIVAL_SECONDS, "no live ExecStream once all have closed")
        daemon_token = daemon.token

    for signal in SIGNALS:
        assert received.headers[signal], f"no {signal} export"
        assert all(h["authorization"] == f"Bearer {TRACE_TOKEN}" for h in received.headers[signal])

    spans = {span.name: span for span in received.spans()}
    assert spans["read_todos_tool_call"].trace_id.hex() == trace_id
    assert spans["read_todos_tool_call"].parent_span_id.hex() == parent_id
    assert attributes(spans["read_todos_tool_call"].attributes)["agent.id"] == "agent-[REDACTED]"
    assert attributes(spans["grep_tool_call"].attributes)["tool.result"] == "exec_error"

    metrics = received.metrics()
    calls = metrics["exec_daemon.tool.calls"]
    assert total(calls, tool="read_todos_tool_call", outcome="success") == 1
    assert total(calls, tool="grep_tool_call", outcome="exec_error") == 1
    assert total(calls, tool="shell_tool_call") == 1
    duration = metrics["exec_daemon.tool.call.duration"]
    assert metrics["exec_daemon.tool.call.duration"].unit == "s"
    for point in points(duration):
        assert point.count == sum(point.bucket_counts) >= 1
        assert 0 < point.min <= point.max and point.min * point.count <= point.sum
        assert point.sum <= point.max * point.count
    assert total(duration, tool="read_todos_tool_call", outcome="success") == 1
    assert total(metrics["exec_daemon.shell.streamed.bytes"], stream="stdout") >= len(
        "hello telemetry\n"
    )
    assert total(metrics["exec_daemon.sandbox.decisions"], outcome="unconfined") >= 1
    assert total(metrics["exec_daemon.hook.runs"], outcome="failed") == 1
    assert "exec_daemon.shell.sessions" in metrics
    assert "exec_daemon.terminals" in metrics
    rss = total(metrics["process.memory.usage"])
    assert 10e6 < rss < 4e9, rss
    fds = total(metrics["process.unix.file_descriptor.count"])
    assert 3 < fds < 10_000, fds
    # The sandbox's resources, as GetSandboxInfo reports them.
    assert total(metrics["system.cpu.logical.count"]) >= 1
    memory = total(metrics["system.memory.usage"], **{"system.memory.state": "used"})
    assert 0 < memory <= total(metrics["system.memory.limit"])
    disk = total(metrics["system.filesystem.usage"], **{"system.filesystem.state": "used"})
    assert 0 < disk <= total(metrics["system.filesystem.limit"])
    assert total(metrics["system.process.count"]) >= 2
    # The seed's computer-use metrics: the display is off, so the session failed "unavailable".
    assert total(metrics["computer_use.session.result"], outcome="unavailable") == 1
    assert total(metrics["computer_use.session.duration"]) == 1
    assert total(metrics["computer_use.session.action_count"]) == 1

    # The hook's failure was logged inside the shell call: the record carries its span's ids.
    shell_span = spans["shell_tool_call"]
    linked = [r for r in received.log_records() if r.span_id == shell_span.span_id]
    assert linked and all(r.trace_id == shell_span.trace_id for r in linked)
    assert any("[REDACTED]" in r.body.string_value for r in linked)

    everything = b"".join(received.raw)
    assert TRACE_TOKEN.encode() not in everything
    assert daemon_token.encode() not in everything
    assert injected.encode() not in everything


async def test_an_mcp_call_continues_the_trace_to_the_mcp_server(
    workspace: Path, tmp_path: Path
) -> None:
    """The MCP server's request carries the call's span as its parent (`traceparent` in _meta);
    in ghost mode it carries nothing."""
    trace_id = secrets.token_hex(16)
    servers = {"mcpServers": {"demo": {"command": sys.executable, "args": [*DEMO_MCP_SERVER]}}}
    mcp_flags = ("--mcp-config", json.dumps(servers))
    call = ToolCall(mcp_tool_call=McpToolCall(args=McpArgs(name="demo-traceparent")))

    async def mcp_server_saw(daemon: RunningDaemon) -> str:
        async with daemon.client() as client:
            client.headers["traceparent"] = traceparent(trace_id, secrets.token_hex(8))
            outcome = await client.run(call)
        assert outcome.result is not None, outcome.error
        result = outcome.result.mcp_tool_call.result
        assert result.WhichOneof("result") == "success", result
        return str(result.success.content[0].text) if result.success.content else ""

    with (
        grpc_collector() as (port, received),
        running_daemon(
            workspace,
            tmp_path / "state",
            *loopback_grpc_flags(port),
            *mcp_flags,
            env=FAST | {"PYTHONPATH": str(REPO)},
        ) as daemon,
    ):
        seen = await mcp_server_saw(daemon)
        wait_until(lambda: received.spans(), ARRIVAL_SECONDS, "the MCP call's span")
        (span,) = received.spans()
    assert span.name == "mcp_tool_call"
    assert seen == f"{trace_id}-{span.span_id.hex()}"
    assert span.trace_id.hex() == trace_id

    with running_daemon(
        workspace, tmp_path / "ghost", *mcp_flags, env={"PYTHONPATH": str(REPO)}
    ) as ghost:
        assert await mcp_server_saw(ghost) == ""


async def test_http_protobuf_sends_every_signal(workspace: Path, tmp_path: Path) -> None:
    with (
        http_collector() as (port, received),
        running_daemon(
            workspace,
            tmp_path / "state",
            *tracing_flags(f"http://127.0.0.1:{port}"),
            env=FAST | {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
        ) as daemon,
    ):
        async with daemon.client() as client:
            assert (await client.run(exec_error_call())).error is not None
        wait_until(
            lambda: all(received.of(signal) for signal in SIGNALS),
            ARRIVAL_SECONDS,
            "traces, metrics and logs over HTTP",
        )
    for signal in SIGNALS:
        assert received.headers[signal][0]["authorization"] == f"Bearer {TRACE_TOKEN}"
    assert [span.name for span in received.spans()] == ["grep_tool_call"]


async def test_ghost_mode_sends_nothing_not_even_a_connection(
    workspace: Path, tmp_path: Path
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        port = listener.getsockname()[1]
        flags = [flag for flag in tracing_flags(f"grpc://127.0.0.1:{port}") if flag != "false"]
        flags.remove("--ghost-mode")  # the default: ghost mode on
        with running_daemon(workspace, tmp_path / "state", *flags, env=FAST) as daemon:
            async with daemon.client() as client:
                assert (await client.run(read_todos())).result is not None
                assert (await client.run(exec_error_call())).error is not None
            assert daemon.stop() == 0
        try:
            connection, _ = listener.accept()
        except BlockingIOError:
            return
        connection.close()
        raise AssertionError("ghost mode connected to the trace endpoint")


async def test_a_slow_collector_drops_counted_spans_and_calls_keep_their_pace(
    workspace: Path, tmp_path: Path
) -> None:
    small_queue = FAST | {"OTEL_BSP_MAX_QUEUE_SIZE": "4", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1"}
    calls = 60
    with (
        # Each export held past the exporter's timeout: a call that waited for one would take
        # EXPORT_TIMEOUT_SECONDS, the whole run minutes.
        grpc_collector(delay=600) as (port, received),
        running_daemon(
            workspace,
            tmp_path / "state",
            *loopback_grpc_flags(port),
            env=small_queue,
        ) as daemon,
    ):

        async def make_calls() -> None:
            async with daemon.client() as client, client.exec_stream():
                for _ in range(calls):
                    assert (await client.run(read_todos())).result is not None

        await asyncio.wait_for(make_calls(), calls * EXPORT_TIMEOUT_SECONDS / 4)

        def drops_counted() -> float:
            metric = received.metrics().get("otel.sdk.processor.span.processed")
            return 0 if metric is None else total(metric, **{"error.type": "queue_full"})

        wait_until(lambda: drops_counted() > 0, ARRIVAL_SECONDS, "dropped spans counted")
        assert "Queue full" not in daemon.log(), "drops are counted, not logged one by one"
        queue = received.metrics().get("otel.sdk.processor.span.queue.size")
        assert queue is not None and total(queue) <= 4  # bounded by the queue's size
        # Shutdown does not wait for the held export (stop() allows SHUTDOWN_SECONDS).
        assert daemon.stop() == 0
    assert drops_counted() <= calls


async def test_the_last_call_counts_reach_a_collector_whose_trace_service_is_slow(
    workspace: Path, tmp_path: Path
) -> None:
    """At shutdown each signal flushes on its own: spans held up by a slow trace service do not
    keep the metrics since the last export (here the only one) from being sent."""
    one_span_per_export = {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1"}
    metrics_only_at_shutdown = (
        FAST | one_span_per_export | {"OTEL_METRIC_EXPORT_INTERVAL": "600000"}
    )
    with (
        grpc_collector(delay=2.0) as (port, received),
        running_daemon(
            workspace,
            tmp_path / "state",
            *loopback_grpc_flags(port),
            env=metrics_only_at_shutdown,
        ) as daemon,
    ):
        async with daemon.client() as client:
            for _ in range(3):
                assert (await client.run(read_todos())).result is not None
        # The first span's export (2 s of 6) is under way when the daemon is asked to stop.
        wait_until(lambda: received.traces_begun, ARRIVAL_SECONDS, "the first trace export")
        assert daemon.stop() == 0
        calls = received.metrics().get("exec_daemon.tool.calls")
    assert calls is not None and total(calls, tool="read_todos_tool_call") == 3


async def test_log_format_json_writes_one_object_per_line_with_the_calls_ids(
    workspace: Path, tmp_path: Path
) -> None:
    failing_hook(workspace, "json-log-check")
    with (
        grpc_collector() as (port, received),
        running_daemon(
            workspace,
            tmp_path / "state",
            "--log-format",
            "json",
            *loopback_grpc_flags(port),
            env=FAST,
        ) as daemon,
    ):
        async with daemon.client() as client:
            assert (await client.run(shell_call("true"))).result is not None
        wait_until(lambda: "json-log-check" in daemon.log(), ARRIVAL_SECONDS, "the hook's warning")
        wait_until(lambda: received.spans(), ARRIVAL_SECONDS, "the shell span")
        assert daemon.stop() == 0
        lines = [json.loads(line) for line in daemon.log().splitlines() if line.strip()]
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    warning = next(
        line for line in lines if line["level"] == "WARNING" and "json-log-check" in line["message"]
    )
    assert warning["span_id"] == received.spans()[0].span_id.hex()
    assert warning["trace_id"] == received.spans()[0].trace_id.hex()


def call_records(daemon: RunningDaemon) -> list[dict[str, Any]]:
    """The daemon's JSON log records about tool calls."""
    lines = [json.loads(line) for line in daemon.log().splitlines() if line.strip()]
    return [line for line in lines if line["logger"] == "exec_daemon.tool_calls"]


async def test_debug_logs_each_calls_start_and_end_with_its_trace_ids(
    workspace: Path, tmp_path: Path
) -> None:
    with (
        grpc_collector() as (port, received),
        running_daemon(
            workspace,
            tmp_path / "state",
            "--log-level", "debug",
            "--log-format", "json",
            *NO_RIPGREP,
            *loopback_grpc_flags(port),
            env=FAST,
        ) as daemon,
    ):  # fmt: skip
        async with daemon.client() as client:
            assert (await client.run(shell_call("echo hi"))).result is not None
            await client.run(exec_error_call())
        wait_until(lambda: len(received.spans()) >= 2, ARRIVAL_SECONDS, "the two spans")
        assert daemon.stop() == 0
        records = call_records(daemon)
    spans = {span.name: span for span in received.spans()}
    for tool, end_level, outcome in (
        ("shell_tool_call", "DEBUG", "ended: success"),
        ("grep_tool_call", "WARNING", "failed: unavailable"),
    ):
        span = spans[tool]
        own = [r for r in records if f"tool call {tool} " in r["message"]]
        assert [r["level"] for r in own] == ["DEBUG", end_level], own
        start, end = own
        assert "started" in start["message"] and outcome in end["message"], own
        assert re.search(r"\(call \d+, agent '[^']*', \d+\.\d ms\)$", end["message"]), end
        for record in own:
            assert record["trace_id"] == span.trace_id.hex(), record
            assert record["span_id"] == span.span_id.hex(), record


async def test_below_debug_only_failed_calls_are_logged(workspace: Path, tmp_path: Path) -> None:
    with running_daemon(
        workspace, tmp_path / "state", "--log-level", "info", "--log-format", "json", *NO_RIPGREP
    ) as daemon:
        async with daemon.client() as client:
            assert (await client.run(shell_call("echo hi"))).result is not None
            await client.run(exec_error_call())
        assert daemon.stop() == 0
        records = call_records(daemon)
    assert [(r["level"], r["message"].split(":")[0]) for r in records] == [
        ("WARNING", "tool call grep_tool_call failed")
    ], records


class KeptMetrics(MetricExporter):
    """The in-memory end of a metric reader: keeps each export (delta histograms when asked)."""

    def __init__(self, temporality: AggregationTemporality) -> None:
        super().__init__(preferred_temporality={Histogram: temporality})
        self.exports: list[MetricsData] = []

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self.exports.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        pass


@dataclass
class ScriptedMeter:
    reader: PeriodicExportingMetricReader
    kept: KeptMetrics

    def metrics(self) -> dict[str, Any]:
        """Exports now, and returns each metric of that export by name."""
        self.reader.force_flush()
        return {
            metric.name: metric
            for resource in self.kept.exports[-1].resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        }


@contextlib.contextmanager
def meter_exporting_to(
    kept: KeptMetrics, redact: Any = lambda text: text
) -> Iterator[tuple[OtlpMeter, ScriptedMeter]]:
    """An OtlpMeter wired as the daemon wires it (its histograms added by a
    HistogramsExporter), exporting when asked."""
    histograms = Histograms()
    scope = InstrumentationScope("exec_daemon")
    exporter = HistogramsExporter(kept, histograms, Resource.create({}), scope)
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=math.inf)
    provider = MeterProvider(metric_readers=[reader])
    try:
        yield (
            OtlpMeter(provider.get_meter(scope.name), redact, histograms),
            ScriptedMeter(reader, kept),
        )
    finally:
        provider.shutdown()


def test_label_sets_past_the_limit_count_as_overflow_and_durations_use_second_buckets() -> None:
    """Sums kept by the daemon: nothing counted is lost past MAX_LABEL_SETS label sets (the
    rest count under otel.metric.overflow, as the SDK's cardinality limit does)."""
    with meter_exporting_to(KeptMetrics(CUMULATIVE)) as (meter, exported):
        for index in range(MAX_LABEL_SETS + 10):
            meter.add(Metric.HOOK_RUNS, outcome=f"outcome-{index}")
        meter.add(Metric.HOOK_RUNS, 5, outcome="outcome-0")
        meter.add(Metric.LIVE_EXEC_STREAMS, 1)
        meter.add(Metric.LIVE_EXEC_STREAMS, -1)
        meter.tool_call("read_todos_tool_call", "success", 0.003)
        metrics = exported.metrics()
        runs = {
            tuple(sorted((point.attributes or {}).items())): point.value
            for point in metrics[Metric.HOOK_RUNS.value.name].data.data_points
        }
        assert len(runs) == MAX_LABEL_SETS + 1
        assert runs[(("otel.metric.overflow", "true"),)] == 10
        assert runs[(("outcome", "outcome-0"),)] == 6
        assert sum(runs.values()) == MAX_LABEL_SETS + 15
        streams = metrics[Metric.LIVE_EXEC_STREAMS.value.name].data
        assert [point.value for point in streams.data_points] == [0] and not streams.is_monotonic
        duration = metrics["exec_daemon.tool.call.duration"].data.data_points[0]
        assert tuple(duration.explicit_bounds) == DURATION_BUCKETS
        assert duration.bucket_counts[0] == 1 and duration.count == 1  # 3 ms <= 5 ms


def test_metric_labels_are_redacted_and_bounded() -> None:
    with meter_exporting_to(
        KeptMetrics(CUMULATIVE), lambda text: text.replace("s3cret", "[REDACTED]")
    ) as (meter, exported):
        meter.add(Metric.HOOK_RUNS, outcome="deny-s3cret-" + "x" * 500)
        meter.tool_call("shell_tool_call", "error-s3cret", 0.5)
        meter.computer_use("s3cret", 1.0, 3)
        labels = [
            value
            for metric in exported.metrics().values()
            for point in metric.data.data_points
            for value in (point.attributes or {}).values()
        ]
        assert "[REDACTED]" in " ".join(map(str, labels))
        assert all("s3cret" not in str(value) and len(str(value)) <= 64 for value in labels)


def duration_points(metrics: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """The tool-call duration's points by (tool, outcome)."""
    return {
        (point.attributes["tool"], point.attributes["outcome"]): point
        for point in metrics["exec_daemon.tool.call.duration"].data.data_points
    }


def test_the_tool_call_histogram_counts_each_call_in_its_bucket_and_accumulates() -> None:
    with meter_exporting_to(KeptMetrics(CUMULATIVE)) as (meter, exported):
        for seconds in (0.003, 0.005, 0.02, 0.3, 12.0):
            meter.tool_call("shell_tool_call", "success", seconds)
        meter.tool_call("read_todos_tool_call", "success", 0.001)
        meter.add(Metric.HOOK_RUNS, outcome="allow")
        first = exported.metrics()
        # Sent with the meter's other metrics, under its one scope.
        scopes = exported.kept.exports[-1].resource_metrics[0].scope_metrics
        assert [scope.scope.name for scope in scopes] == ["exec_daemon"]
        assert first["exec_daemon.tool.call.duration"].unit == "s"
        shell = duration_points(first)["shell_tool_call", "success"]
        assert tuple(shell.explicit_bounds) == DURATION_BUCKETS
        # (.., 0.005] holds 3 ms and 5 ms (a bound is in its bucket), (0.01, 0.025] 20 ms,
        # (0.25, 0.5] 300 ms and the bucket past 10 s holds 12 s.
        assert list(shell.bucket_counts) == [2, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1]
        assert shell.count == 5 and math.isclose(shell.sum, 12.328)
        assert (shell.min, shell.max) == (0.003, 12.0)
        assert duration_points(first)["read_todos_tool_call", "success"].count == 1

        meter.tool_call("shell_tool_call", "success", 0.05)
        later = duration_points(exported.metrics())
        shell_later = later["shell_tool_call", "success"]
        assert shell_later.count == 6 and math.isclose(shell_later.sum, 12.378)
        assert shell_later.bucket_counts[3] == 1  # (0.025, 0.05]
        assert shell_later.start_time_unix_nano == shell.start_time_unix_nano
        assert later["read_todos_tool_call", "success"].count == 1


def test_histograms_follow_the_exporters_delta_temporality() -> None:
    delta = AggregationTemporality.DELTA
    with meter_exporting_to(KeptMetrics(delta)) as (meter, exported):
        meter.tool_call("shell_tool_call", "success", 0.2)
        meter.tool_call("read_todos_tool_call", "success", 0.001)
        first = duration_points(exported.metrics())
        assert first["shell_tool_call", "success"].count == 1
        meter.tool_call("shell_tool_call", "success", 0.4)
        second_export = exported.metrics()
        second = duration_points(second_export)
        assert list(second) == [("shell_tool_call", "success")]  # nothing new for read_todos
        point = second["shell_tool_call", "success"]
        assert (point.count, point.sum, point.min, point.max) == (1, 0.4, 0.4, 0.4)
        assert point.start_time_unix_nano == first["shell_tool_call", "success"].time_unix_nano
        histogram = second_export["exec_daemon.tool.call.duration"].data
        assert histogram.aggregation_temporality == delta


def test_histogram_label_sets_past_the_limit_count_as_overflow() -> None:
    with meter_exporting_to(KeptMetrics(CUMULATIVE)) as (meter, exported):
        for index in range(MAX_LABEL_SETS + 3):
            meter.tool_call(f"tool-{index}", "success", 0.001)
        points = exported.metrics()["exec_daemon.tool.call.duration"].data.data_points
        assert len(points) == MAX_LABEL_SETS + 1
        overflow = [p for p in points if p.attributes == {"otel.metric.overflow": "true"}]
        assert overflow[0].count == 3


def test_a_batch_retried_after_unavailable_arrives_once_as_first_sent() -> None:
    """The gRPC span exporter retries a batch the collector refused with the request it
    encoded for the first attempt (span_encoding.GrpcSpanExporter)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExportResult

    from exec_daemon.telemetry.span_encoding import GrpcSpanExporter

    provider = TracerProvider()
    tracer = provider.get_tracer("exec_daemon")
    batch = []
    for name in ("read_todos_tool_call", "shell_tool_call"):
        span = tracer.start_span(name, attributes={"tool.name": name})
        span.end()
        batch.append(span)
    with grpc_collector() as (port, received):
        received.refuse_traces = 1
        exporter = GrpcSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=10)
        try:
            assert exporter.export(batch) == SpanExportResult.SUCCESS
        finally:
            exporter.shutdown()
        assert [span.name for span in received.spans()] == [
            "read_todos_tool_call",
            "shell_tool_call",
        ]
        assert received.refused == received.raw


def test_ended_calls_past_the_bound_are_dropped_counted_and_the_rest_completed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """exec_daemon/telemetry/call_spans.py: while its thread lags, at most MAX_WAITING ended
    calls wait; later ones are dropped and counted in exec_daemon.telemetry.calls.dropped; the
    waiting ones still get their metrics and spans (here when it closes)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import DEFAULT_ON

    from exec_daemon.telemetry import call_spans

    exported: list[Any] = []

    class Keep(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            exported.extend(spans)
            return SpanExportResult.SUCCESS

    monkeypatch.setattr(call_spans, "MAX_WAITING", 3)
    with meter_exporting_to(KeptMetrics(CUMULATIVE)) as (meter, scripted):
        calls = call_spans.CallSpans(
            SimpleSpanProcessor(Keep()),
            DEFAULT_ON,
            Resource.create({}),
            InstrumentationScope("exec_daemon"),
            lambda _headers: (None, ()),
            on_complete=lambda span: meter.tool_call(span.name, span.outcome, span.seconds),
            complete_every=3600,  # the thread only wakes when it closes
        )
        meter.count_dropped_calls(lambda: calls.dropped)
        for call_id in range(5):
            span = calls.open("read_todos_tool_call", call_id, "", None)
            span.outcome = "success"
            span.end()
        assert calls.dropped == 2 and not exported
        calls.close(timeout=5)
        metrics = scripted.metrics()
    assert [span.attributes["tool.call_id"] for span in exported] == [0, 1, 2]
    assert [p.value for p in metrics["exec_daemon.telemetry.calls.dropped"].data.data_points] == [2]
    (counted,) = metrics["exec_daemon.tool.calls"].data.data_points
    assert counted.value == 3 and counted.attributes == {
        "tool": "read_todos_tool_call",
        "outcome": "success",
    }
