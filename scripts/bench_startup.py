#!/usr/bin/env python3
"""Start-up of the daemon: from spawning `python -m exec_daemon serve` to the first answered
Ping, against a bare connectrpc server started the same way, printed as JSON.

The bare server (`--serve-bare PORT`, below) is the generated agent.v1 ControlService with a
trivial Ping under hypercorn, importing nothing of the daemon: what any Python Connect server
pays to start. The ratio daemon/bare is what the daemon adds (importing its tools and layers,
its start-up work); the VM image's goal is Ping <= 3 s after its daemon phase starts, on a loaded
machine. Runs alternate daemon and bare so that load on the machine falls on both alike. Also
reported: a bare `python -c pass` (the interpreter's own floor) and the daemon's import time
(`-X importtime` of exec_daemon.server, one run). One uncounted warm-up start of each writes the
bytecode caches first (the VM image compiles them at build), whatever PYTHONDONTWRITEBYTECODE says.

Every Ping's answer is checked (the daemon's version, the bare server's "bare").
`--quick` (the test suite): 2 runs of each.

    python scripts/bench_startup.py [--runs N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for scripts.benchmarking when run as a script

STARTUP_SECONDS = 30.0
STOP_SECONDS = 5.0


def serve_bare(port: int) -> None:
    """A trivial Connect Ping server under hypercorn, until SIGTERM; imports nothing of the daemon."""
    from connectrpc.request import RequestContext
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    from agent.v1.control_connect import ControlService, ControlServiceASGIApplication
    from agent.v1.control_pb2 import PingRequest, PingResponse

    class BareControl(ControlService):
        async def ping(
            self, request: PingRequest, ctx: RequestContext[PingRequest, PingResponse]
        ) -> PingResponse:
            return PingResponse(version="bare")

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        app = ControlServiceASGIApplication(BareControl())
        await serve(app, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]

    asyncio.run(main())


def free_port() -> int:
    """A port no other test process hands out (imported late: this script keeps its own
    imports light)."""
    from tests.daemon_process import free_port as reserved_port

    return reserved_port()


async def first_ping(url: str, token: str, deadline: float) -> str:
    """The version answered by the first Ping that succeeds before `deadline` (polled)."""
    from exec_daemon.client import ExecDaemonClient

    host, port = url.removeprefix("http://").split(":")
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), 0.2):
                break
        except OSError:
            await asyncio.sleep(0.005)
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            async with ExecDaemonClient(url, token) as client:
                return (await client.ping()).version
        except Exception as error:  # the server is still starting: poll again
            last_error = error
            await asyncio.sleep(0.005)
    raise TimeoutError(f"no Ping answered within {STARTUP_SECONDS}s (last: {last_error})")


@contextlib.contextmanager
def started(
    command: list[str], env: dict[str, str], cwd: Path
) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def time_to_ping(kind: str, scratch: Path) -> tuple[float, float]:
    """Seconds from spawning the daemon ("daemon") or the bare server ("bare") to its first
    Ping, and the CPU seconds the server used until then."""
    from exec_daemon import __version__
    from scripts.benchmarking import expect, process_cpu_seconds

    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # Bytecode cached as in the VM image (compiled at build): the warm-up run writes it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if kind == "daemon":
        workspace = scratch / "workspace"
        workspace.mkdir(exist_ok=True)
        env["EXEC_DAEMON_AUTH_TOKEN"] = token
        command = [
            sys.executable, "-m", "exec_daemon", "serve", "--host", "127.0.0.1",
            "--port", str(port), "--pty-websocket-port", str(free_port()),
            "--workspace", str(workspace),
            "--terminals-folder", str(scratch / "terminals"),
            "--artifacts-folder", str(scratch / "artifacts"),
        ]  # fmt: skip
        expected = __version__
    else:
        command = [sys.executable, __file__, "--serve-bare", str(port)]
        expected = "bare"
    began = time.monotonic()
    with started(command, env, scratch) as process:
        deadline = began + STARTUP_SECONDS
        version = asyncio.run(first_ping(f"http://127.0.0.1:{port}", token, deadline))
        elapsed = time.monotonic() - began
        expect(process.poll() is None, f"the {kind} server exited after answering")
        cpu = process_cpu_seconds(process.pid)
    expect(version == expected, f"the {kind} server answered version {version!r}")
    return elapsed, cpu


def python_floor_seconds() -> float:
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.monotonic() - began


def daemon_import_ms() -> float:
    """exec_daemon.server's cumulative import time, from `-X importtime` (microseconds in)."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import exec_daemon.server"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": ""},
    )
    found = re.search(r"\|\s*(\d+) \| exec_daemon\.server$", run.stderr, re.MULTILINE)
    assert found, "no import time for exec_daemon.server"
    return int(found.group(1)) / 1000


def summary(seconds: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(seconds) * 1000, 1),
        "min_ms": round(min(seconds) * 1000, 1),
        "max_ms": round(max(seconds) * 1000, 1),
    }


def main() -> None:
    from scripts.benchmarking import add_quick_flag

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="starts of each server")
    parser.add_argument("--serve-bare", type=int, metavar="PORT", help=argparse.SUPPRESS)
    add_quick_flag(parser)
    args = parser.parse_args()
    if args.serve_bare:
        serve_bare(args.serve_bare)
        return
    runs = 2 if args.quick else args.runs
    times: dict[str, list[float]] = {"daemon": [], "bare": [], "python": []}
    cpu: dict[str, list[float]] = {"daemon": [], "bare": []}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as scratch:
        for kind in ("daemon", "bare"):  # warm-up, not counted: caches bytecode and files
            time_to_ping(kind, Path(scratch))
        for _ in range(runs):
            for kind in ("daemon", "bare"):
                elapsed, used = time_to_ping(kind, Path(scratch))
                times[kind].append(elapsed)
                cpu[kind].append(used)
            times["python"].append(python_floor_seconds())
    report: dict[str, Any] = {
        "runs": runs,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "daemon_start_to_ping": summary(times["daemon"]),
        "bare_connectrpc_start_to_ping": summary(times["bare"]),
        "python_c_pass": summary(times["python"]),
        "daemon_import_ms": round(daemon_import_ms(), 1),
        "daemon_over_bare_median_ratio": round(
            statistics.median(times["daemon"]) / statistics.median(times["bare"]), 2
        ),
        # CPU used until the first Ping (10 ms steps): hardly moved by load from other work.
        "daemon_cpu_ms_to_ping": round(statistics.median(cpu["daemon"]) * 1000),
        "bare_cpu_ms_to_ping": round(statistics.median(cpu["bare"]) * 1000),
        "daemon_over_bare_cpu_ratio": round(sum(cpu["daemon"]) / sum(cpu["bare"]), 3),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    try:
        main()
    except AssertionError as failure:
        print(f"bench_startup: {failure}", file=sys.stderr)
        sys.exit(1)
