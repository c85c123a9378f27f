#!/usr/bin/env python3
"""PTY WebSocket benchmark: this daemon vs Jupyter's terminado, started in the same run.

For each server: throughput of `seq 1 2000000` to one attached client (MB/s of terminal bytes
received), and keystroke echo latency p50/p99 over 500 keystrokes typed into bash's readline.
terminado (+ tornado) is installed into a throwaway venv under /tmp, not the project's .venv.

    .venv/bin/python scripts/bench_pty.py [--runs 3] [--keystrokes 500] [--quick]

Prints one JSON object. Goals: throughput >= 2x terminado's, echo p50 <= terminado's. Each run
must deliver all of seq's output (a terminal adds a \r per line) and each keystroke its echo
within 10 s, or the run ends with an error. `--quick` (the test suite): `seq 1 100000`, 3
runs, 20 keystrokes. Also reported: the best run's MB/s over the raw PTY ceiling (the best of 3
reads of the same command from a bare PTY), which scripts/bench_all gates.
"""

from __future__ import annotations

import abc
import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import websockets
from ptyprocess import PtyProcess
from websockets.asyncio.client import ClientConnection

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.benchmarking import add_quick_flag, expect, thread_cpu_seconds
from tests.daemon_process import free_port, running_daemon

TERMINADO_VENV = Path(tempfile.gettempdir()) / "exec-daemon-bench-terminado"
SEQ_LAST = 2_000_000
QUICK_SEQ_LAST = 100_000
ANSWER_SECONDS = 10.0
TERMINADO_SERVER = textwrap.dedent(
    """
    import sys
    import tornado.ioloop
    import tornado.web
    from terminado import TermSocket, UniqueTermManager

    manager = UniqueTermManager(shell_command=["bash"])
    app = tornado.web.Application(
        [(r"/websocket", TermSocket, {"term_manager": manager})]
    )
    app.listen(int(sys.argv[1]), "127.0.0.1")
    print("ready", flush=True)
    tornado.ioloop.IOLoop.current().start()
    """
)


class Session(abc.ABC):
    """One attached client; `wait_for` reads output until a marker shows up."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.received = 0
        self._tail = b""

    @abc.abstractmethod
    async def send(self, data: bytes) -> None: ...

    @abc.abstractmethod
    async def _output(self) -> bytes: ...

    async def wait_for(self, marker: bytes) -> None:
        async with asyncio.timeout(ANSWER_SECONDS):
            await self._read_until(marker)

    async def _read_until(self, marker: bytes) -> None:
        while True:
            chunk = await self._output()
            self.received += len(chunk)
            window = self._tail + chunk
            if marker in window:
                self._tail = b""
                return
            self._tail = window[-len(marker) :]


class DaemonSession(Session):
    async def send(self, data: bytes) -> None:
        await self.ws.send(data)

    async def _output(self) -> bytes:
        while True:
            message = await self.ws.recv()
            if isinstance(message, bytes):
                return message


class TerminadoSession(Session):
    async def send(self, data: bytes) -> None:
        await self.ws.send(json.dumps(["stdin", data.decode()]))

    async def _output(self) -> bytes:
        while True:
            kind, *payload = json.loads(await self.ws.recv())
            if kind == "stdout":
                return str(payload[0]).encode()


async def ready(session: Session) -> None:
    await session.send(b"echo READY$((40+2))\r")
    await session.wait_for(b"READY42")


def seq_terminal_bytes(last: int) -> int:
    """What `seq 1 LAST` prints on a terminal: every number, then \r\n."""
    return sum(len(str(n)) + 2 for n in range(1, last + 1))


async def throughput(session: Session, server_pid: int, seq_last: int) -> dict[str, float]:
    await ready(session)
    session.received = 0
    cpu_before = thread_cpu_seconds(server_pid)
    started = time.perf_counter()
    await session.send(f"seq 1 {seq_last}; echo END$((2+2))\r".encode())
    await session.wait_for(b"END4")
    elapsed = time.perf_counter() - started
    expected = seq_terminal_bytes(seq_last)
    expect(
        session.received >= expected, f"{session.received} bytes received, seq printed {expected}"
    )
    return {
        "seconds": elapsed,
        "bytes": session.received,
        "mb_s": session.received / elapsed / 1e6,
        "server_cpu_s": thread_cpu_seconds(server_pid) - cpu_before,
    }


def raw_pty_ceiling(seq_last: int) -> float:
    """MB/s of the same command read from a bare PTY by a blocking loop: no server, no client.

    `seq` on a terminal writes one line per write(2) and the PTY hands out at most 4 KiB per
    read, so this bounds what any PTY server can deliver on this machine right now.
    """
    process = PtyProcess.spawn(["seq", "1", str(seq_last)], dimensions=(40, 120))
    received = 0
    started = time.perf_counter()
    while True:
        try:
            chunk = os.read(process.fd, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        received += len(chunk)
    elapsed = time.perf_counter() - started
    process.close()
    expected = seq_terminal_bytes(seq_last)
    expect(received == expected, f"{received} bytes from the bare PTY, seq printed {expected}")
    return received / elapsed / 1e6


async def echo_latencies(session: Session, keystrokes: int) -> list[float]:
    await ready(session)
    latencies = []
    for index in range(keystrokes + 20):
        started = time.perf_counter()
        await session.send(b"x")
        await session.wait_for(b"x")
        if index >= 20:  # warm-up
            latencies.append((time.perf_counter() - started) * 1000)
        await session.send(b"\x7f")  # erase it again, so the line stays short
        await session.wait_for(b"\x08")
    return latencies


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@asynccontextmanager
async def daemon_session(url: str) -> AsyncIterator[Session]:
    async with websockets.connect(url, compression=None, max_size=None) as ws:
        json.loads(await ws.recv())  # "attached"
        yield DaemonSession(ws)


@asynccontextmanager
async def terminado_session(url: str) -> AsyncIterator[Session]:
    async with websockets.connect(url, compression=None, max_size=None) as ws:
        yield TerminadoSession(ws)


def terminado_python() -> Path:
    python = TERMINADO_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(TERMINADO_VENV)], check=True)
    probe = subprocess.run([str(python), "-c", "import terminado, tornado"], capture_output=True)
    if probe.returncode != 0:
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "terminado", "tornado"], check=True
        )
    return python


def terminado_version(python: Path) -> str:
    return subprocess.run(
        [str(python), "-c", "import terminado; print(terminado.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def summary(runs: list[dict[str, float]], latencies: list[float]) -> dict[str, Any]:
    rates = [r["mb_s"] for r in runs]
    return {
        "throughput_mb_s": round(statistics.median(rates), 2),
        "throughput_runs_mb_s": [round(r, 2) for r in rates],
        "throughput_best_mb_s": round(max(rates), 2),
        "bytes_received": int(runs[0]["bytes"]),
        "server_cpu_s_per_run": round(statistics.median(r["server_cpu_s"] for r in runs), 4),
        "server_cpu_ns_per_byte": round(
            sum(r["server_cpu_s"] for r in runs) * 1e9 / sum(r["bytes"] for r in runs), 2
        ),
        "echo_p50_ms": round(percentile(latencies, 0.50), 3),
        "echo_p99_ms": round(percentile(latencies, 0.99), 3),
        "keystrokes": len(latencies),
    }


async def measure_both(
    servers: dict[str, tuple[str, int, Any]], runs: int, keystrokes: int, seq_last: int
) -> dict[str, dict[str, Any]]:
    """Throughput runs interleaved server by server, so a noisy neighbour hurts both alike."""
    throughputs: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
    for _ in range(runs):
        for name, (url, pid, session_factory) in servers.items():
            async with session_factory(url) as session:
                throughputs[name].append(await throughput(session, pid, seq_last))
    results = {}
    for name, (url, _pid, session_factory) in servers.items():
        async with session_factory(url) as session:
            latencies = await echo_latencies(session, keystrokes)
        results[name] = summary(throughputs[name], latencies)
    return results


def run(runs: int, keystrokes: int, seq_last: int) -> dict[str, Any]:
    python = terminado_python()
    workspace = Path(tempfile.mkdtemp(prefix="bench-pty-"))
    terminado_port = free_port()
    terminado = subprocess.Popen(
        [str(python), "-c", TERMINADO_SERVER, str(terminado_port)],
        stdout=subprocess.PIPE,
        cwd=workspace,
        env={**os.environ, "TERM": "xterm-256color"},
    )
    try:
        assert terminado.stdout is not None
        terminado.stdout.readline()
        with running_daemon(workspace, workspace / ".state", "--log-level", "warn") as daemon:
            ours_url = (
                f"ws://127.0.0.1:{daemon.pty_port}/terminals/new?cols=120&rows=40"
                f"&token={daemon.token}"
            )
            theirs_url = f"ws://127.0.0.1:{terminado_port}/websocket"
            servers = {
                "exec_daemon": (ours_url, daemon.process.pid, daemon_session),
                "terminado": (theirs_url, terminado.pid, terminado_session),
            }
            results = asyncio.run(measure_both(servers, runs, keystrokes, seq_last))
            ceiling = max(raw_pty_ceiling(seq_last) for _ in range(3))
    finally:
        terminado.terminate()
        terminado.wait(10)
        shutil.rmtree(workspace, ignore_errors=True)  # the daemon's state (~4 MB a run) too
    ours, theirs = results["exec_daemon"], results["terminado"]
    ratio = ours["throughput_mb_s"] / theirs["throughput_mb_s"]
    return {
        "benchmark": "pty_websocket",
        "command": f"seq 1 {seq_last}",
        "exec_daemon": ours,
        "terminado": theirs,
        "raw_pty_ceiling_mb_s": round(ceiling, 2),
        # The best run of each (the one least slowed by other work on the machine).
        "throughput_vs_raw_pty_ceiling": round(ours["throughput_best_mb_s"] / ceiling, 3),
        "throughput_ratio": round(ratio, 2),
        # CPU per byte relayed, of both servers: hardly moved by load from other work.
        "server_cpu_per_byte_vs_terminado": round(
            ours["server_cpu_ns_per_byte"] / theirs["server_cpu_ns_per_byte"], 3
        ),
        "echo_p50_ratio": round(ours["echo_p50_ms"] / theirs["echo_p50_ms"], 2),
        "goals": {
            "throughput_at_least_2x_terminado": ratio >= 2.0,
            "echo_p50_not_above_terminado": ours["echo_p50_ms"] <= theirs["echo_p50_ms"],
        },
        "environment": {
            "python": platform.python_version(),
            "terminado": terminado_version(python),
            "websockets": websockets.__version__,
            "cpus": os.cpu_count(),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="throughput runs per server")
    parser.add_argument("--keystrokes", type=int, default=500)
    add_quick_flag(parser)
    args = parser.parse_args()
    seq_last = SEQ_LAST
    if args.quick:
        args.runs, args.keystrokes, seq_last = 3, 20, QUICK_SEQ_LAST
    print(json.dumps(run(args.runs, args.keystrokes, seq_last), indent=2))


if __name__ == "__main__":
    main()
