#!/usr/bin/env python3
"""RPC latency of the daemon against a bare connectrpc server, printed as JSON.

Measures Ping (unary) and one ExecStream round trip (a read_todos call, one at a time on one open
stream) against (1) the real daemon started as a subprocess and (2) a bare connectrpc server built
from the same generated agent.v1 ASGI applications with trivial handlers, no auth and no
compression, served by hypercorn with the daemon's settings in its own subprocess. Each client
drives both servers, in alternating rounds so that noise from other work on the machine falls on
both alike: connect-python (exec_daemon.client, the Connect protocol over h2c) and grpcio (gRPC,
whose C core leaves more of the time to the server). Besides p50/p99 latency it reports the
server's CPU time per call (from /proc/PID/task/*/schedstat), which other load on the machine
disturbs far less than latency. The ratios daemon/bare are the cost of the spine (auth, routing,
dispatch and its middleware, the ExecStream session); the goal is <= 1.3 (judged on p50 latency).

Every answer is checked (Ping's version, read_todos' success); a wrong one ends the run with an
error. `--quick` (the test suite): 2 rounds of 30 calls after 20 to warm up.

    .venv/bin/python scripts/bench_rpc.py [--iterations N] [--rounds R] [--client connect|grpc|both]
        [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.daemon_process when run as a script

import grpc
from connectrpc.request import RequestContext

from agent.v1.control_connect import ControlService, ControlServiceASGIApplication
from agent.v1.control_pb2 import PingRequest, PingResponse
from agent.v1.exec_connect import ExecService, ExecServiceASGIApplication
from agent.v1.exec_pb2 import (
    ExecClientMessage,
    ExecServerMessage,
    ExecStreamElement,
)
from agent.v1.todos_pb2 import (
    ReadTodosResult,
    ReadTodosSuccess,
    ReadTodosToolCall,
)
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from scripts.benchmarking import add_quick_flag, expect, tool_success
from tests.daemon_process import STARTUP_SECONDS, free_port, running_daemon

GOAL_RATIO = 1.3
READ_TODOS = ToolCall(read_todos_tool_call=ReadTodosToolCall())
ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


# --- the bare server ----------------------------------------------------------------------------


class BareControl(ControlService):
    async def ping(
        self, request: PingRequest, ctx: RequestContext[PingRequest, PingResponse]
    ) -> PingResponse:
        return PingResponse(version="bare")


class BareExec(ExecService):
    async def exec_stream(
        self,
        request: AsyncIterator[ExecStreamElement],
        ctx: RequestContext[ExecStreamElement, ExecServerMessage],
    ) -> AsyncIterator[ExecServerMessage]:
        """Echoes every call with an empty read_todos answer; ends when the client does."""
        async for element in request:
            if element.WhichOneof("element") != "exec_client_message":
                continue
            message = element.exec_client_message
            answer = ToolCall(
                read_todos_tool_call=ReadTodosToolCall(
                    args=message.tool_call.read_todos_tool_call.args,
                    result=ReadTodosResult(success=ReadTodosSuccess()),
                )
            )
            yield ExecServerMessage(id=message.id, tool_call_result=answer)


def bare_app() -> ASGIApp:
    # No compression, as the daemon by default: otherwise every bare response would be gzipped.
    routes: dict[str, ASGIApp] = {
        "/agent.v1.ControlService/": ControlServiceASGIApplication(BareControl(), compressions=()),  # type: ignore[dict-item]
        "/agent.v1.ExecService/": ExecServiceASGIApplication(BareExec(), compressions=()),  # type: ignore[dict-item]
    }

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                event = (await receive())["type"].removeprefix("lifespan.")
                await send({"type": f"lifespan.{event}.complete"})
                if event == "shutdown":
                    return
        for prefix, routed in routes.items():
            if scope["path"].startswith(prefix):
                await routed(scope, receive, send)
                return
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return app


def serve_bare(port: int) -> None:
    """Serves the bare app with the daemon's hypercorn settings until SIGTERM."""
    from hypercorn.asyncio import serve

    from exec_daemon.kernel.config import DaemonConfig
    from exec_daemon.rpc import hypercorn_fixes
    from exec_daemon.server import hypercorn_config

    async def main() -> None:
        hypercorn_fixes.install()
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        config = hypercorn_config(DaemonConfig(auth_token="", workspace=REPO, port=port))
        await serve(bare_app(), config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]

    asyncio.run(main())


def start_bare(port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve-bare", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the bare server did not start")


# --- the measurements -------------------------------------------------------------------------


class Timer:
    """Latency samples of one kind of call, plus the server's CPU time spent on them."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.samples: list[float] = []
        self.server_cpu_seconds = 0.0

    def cpu(self) -> float:
        """CPU seconds the server process has used, all threads, in nanosecond resolution."""
        total_ns = 0
        for task in Path(f"/proc/{self.server_pid}/task").iterdir():
            try:
                total_ns += int((task / "schedstat").read_text().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                pass  # a worker thread that just ended
        return total_ns / 1e9

    async def run(self, calls: Callable[[int], Awaitable[list[float]]], count: int) -> None:
        before = self.cpu()
        self.samples += await calls(count)
        self.server_cpu_seconds += self.cpu() - before


class ConnectClient:
    """exec_daemon.client: connect-python (pyqwest), the Connect protocol over h2c."""

    name = "connect-python"

    def __init__(self, url: str, token: str) -> None:
        self._client = ExecDaemonClient(url, token)

    async def pings(self, count: int) -> list[float]:
        samples = []
        for _ in range(count):
            started = time.perf_counter()
            answer = await self._client.ping()
            samples.append(time.perf_counter() - started)
            expect(bool(answer.version), f"Ping answered no version: {answer}")
        return samples

    async def exec_stream(self, count: int) -> list[float]:
        samples = []
        async with self._client.exec_stream() as stream:
            for _ in range(count):
                started = time.perf_counter()
                outcome = await (await stream.start(READ_TODOS)).wait()
                samples.append(time.perf_counter() - started)
                tool_success(outcome)
        return samples

    async def close(self) -> None:
        await self._client.close()


class GrpcClient:
    """grpcio (grpc.aio, C core): the gRPC protocol over h2c, with far less client-side CPU."""

    name = "grpcio"

    def __init__(self, url: str, token: str) -> None:
        self._channel = grpc.aio.insecure_channel(url.removeprefix("http://"))
        self._metadata = [("authorization", f"Bearer {token}")]
        self._ping = self._channel.unary_unary(
            "/agent.v1.ControlService/Ping",
            request_serializer=PingRequest.SerializeToString,
            response_deserializer=PingResponse.FromString,
        )
        self._exec_stream = self._channel.stream_stream(
            "/agent.v1.ExecService/ExecStream",
            request_serializer=ExecStreamElement.SerializeToString,
            response_deserializer=ExecServerMessage.FromString,
        )

    async def pings(self, count: int) -> list[float]:
        samples = []
        for _ in range(count):
            started = time.perf_counter()
            answer = await self._ping(PingRequest(), metadata=self._metadata)
            samples.append(time.perf_counter() - started)
            expect(bool(answer.version), f"Ping answered no version: {answer}")
        return samples

    async def exec_stream(self, count: int) -> list[float]:
        samples = []
        stream = self._exec_stream(metadata=self._metadata)
        for call_id in range(1, count + 1):
            started = time.perf_counter()
            await stream.write(
                ExecStreamElement(
                    exec_client_message=ExecClientMessage(id=call_id, tool_call=READ_TODOS)
                )
            )
            while (answer := await stream.read()).WhichOneof("message") == "heartbeat":
                pass
            samples.append(time.perf_counter() - started)
            expect(answer.id == call_id, f"answer {answer.id} to call {call_id}")
            result = answer.tool_call_result.read_todos_tool_call.result
            expect(result.WhichOneof("result") == "success", f"the call failed: {answer}")
        await stream.done_writing()
        while await stream.read() is not grpc.aio.EOF:
            pass
        return samples

    async def close(self) -> None:
        await self._channel.close()


Target = tuple[str, str, int]  # url, token, server pid
Results = dict[str, dict[str, dict[str, Timer]]]  # client -> target -> kind -> timer


async def measure(
    targets: dict[str, Target], client_kinds: list[type[Any]], args: argparse.Namespace
) -> Results:
    results: Results = {}
    for client_kind in client_kinds:
        clients = {name: client_kind(url, token) for name, (url, token, _pid) in targets.items()}
        timers = {
            name: {"ping": Timer(pid), "exec_stream": Timer(pid)}
            for name, (_url, _token, pid) in targets.items()
        }
        try:
            for client in clients.values():
                await client.pings(args.warmup)
                await client.exec_stream(args.warmup)
            # Alternate between the servers so that noise from the machine falls on both alike.
            for _ in range(args.rounds):
                for name, client in clients.items():
                    await timers[name]["ping"].run(client.pings, args.iterations)
                    await timers[name]["exec_stream"].run(client.exec_stream, args.iterations)
        finally:
            for client in clients.values():
                await client.close()
        results[client_kind.name] = timers
    return results


def summary(timer: Timer) -> dict[str, float]:
    cuts = statistics.quantiles(timer.samples, n=100, method="inclusive")
    return {
        "p50": round(statistics.median(timer.samples) * 1000, 4),
        "p99": round(cuts[98] * 1000, 4),
        "server_cpu_us_per_call": round(timer.server_cpu_seconds / len(timer.samples) * 1e6, 1),
        "count": len(timer.samples),
    }


def report(results: Results, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "iterations_per_round": args.iterations,
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "goal_ratio": GOAL_RATIO,
    }
    within_goal = True
    for client_name, timers in results.items():
        by_target = {
            target: {f"{kind}_ms": summary(timer) for kind, timer in kinds.items()}
            for target, kinds in timers.items()
        }
        ratios = {
            f"{kind}_{cut}": round(
                by_target["daemon"][f"{kind}_ms"][cut] / by_target["bare"][f"{kind}_ms"][cut], 3
            )
            for kind in ("ping", "exec_stream")
            for cut in ("p50", "p99", "server_cpu_us_per_call")
        }
        within_goal &= all(v <= GOAL_RATIO for k, v in ratios.items() if k.endswith("p50"))
        result[client_name] = {**by_target, "ratio_daemon_over_bare": ratios}
    result["p50_within_goal"] = within_goal
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=500, help="calls per kind per round")
    parser.add_argument("--rounds", type=int, default=4, help="alternating daemon/bare rounds")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument(
        "--client", choices=["connect", "grpc", "both"], default="both",
        help="connect-python (what the tests and Python users run) and/or grpcio",
    )  # fmt: skip
    parser.add_argument("--serve-bare", type=int, metavar="PORT", help=argparse.SUPPRESS)
    add_quick_flag(parser)
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.rounds, args.warmup = 30, 2, 20
    if args.serve_bare:
        serve_bare(args.serve_bare)
        return
    bare_port = free_port()
    bare = start_bare(bare_port)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            workspace = Path(scratch) / "workspace"
            workspace.mkdir()
            # Production log level: the test fixture's debug logging is not what users run.
            with running_daemon(
                workspace, Path(scratch) / "state", "--log-level", "info"
            ) as daemon:
                targets = {
                    "daemon": (daemon.url, daemon.token, daemon.process.pid),
                    "bare": (f"http://127.0.0.1:{bare_port}", "unused", bare.pid),
                }
                client_kinds: dict[str, list[type[Any]]] = {
                    "connect": [ConnectClient],
                    "grpc": [GrpcClient],
                    "both": [ConnectClient, GrpcClient],
                }
                clients = client_kinds[args.client]
                results = asyncio.run(measure(targets, clients, args))
    finally:
        bare.send_signal(signal.SIGTERM)
        try:
            bare.wait(5)
        except subprocess.TimeoutExpired:
            bare.kill()
    json.dump(report(results, args), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
