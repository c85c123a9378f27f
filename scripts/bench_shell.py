#!/usr/bin/env python3
"""Shell benchmark: prints one JSON object; every number is measured in this run.

- `true` in a warm session through ExecStream (p50/p99) vs a bare bash round trip over pipes
  measured in-process (goal: p50 <= 1 ms);
- `echo ok` the same way, next to `true` (p50/p99, ratio to `true`; goal: p50 <= `true`'s
  p50 + 1 ms: a small output is not held back by the batching of large ones);
- 100 MB of output (`head -c 75000000 /dev/urandom | base64`) through ExecStream: seconds,
  MB/s, peak RSS growth of the daemon (goals: >= 80 MB/s, <= 64 MB);
- 50 concurrent `sleep 0.2; echo x` on one stream: wall time (goal <= 0.6 s);
- the same `true` and output cases against swe-rex's `swerex-remote` (run_in_session and
  execute), installed into a throwaway venv under /tmp; when it cannot be installed or
  measured the report says why and the run fails (`--no-swerex` leaves it out on purpose).

Every timed call's answer is checked (exit code, output, every byte of the 100 MB streamed);
a wrong one ends the run with an error instead of a number. `--quick` (the test suite): 30
rounds, 10 MB of output, no swe-rex.

Usage: .venv/bin/python scripts/bench_shell.py [--rounds N] [--no-swerex] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.v1.shell_pb2 import ShellArgs, ShellToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecStream
from scripts.benchmarking import add_quick_flag, expect, shell_output
from tests.daemon_process import free_port, running_daemon

OUTPUT_RANDOM_BYTES = 75_000_000  # 100 MB once base64-encoded
QUICK_OUTPUT_RANDOM_BYTES = 7_500_000
# A call that prints a little may cost this much more than one that prints nothing (the delta
# carrying its output), never the output batching's hold (tools/shell/foreground.py).
ECHO_EXTRA_MS = 1.0
SWEREX_VENV = Path(tempfile.gettempdir()) / "exec-daemon-bench-swerex"


def output_command(random_bytes: int) -> str:
    return f"head -c {random_bytes} /dev/urandom | base64"


def base64_output_bytes(random_bytes: int) -> int:
    """What `base64` prints for that many bytes: 4 characters per 3, and a newline every 76."""
    characters = -(-random_bytes // 3) * 4
    return characters + -(-characters // 76)


def shell_call(command: str, **kwargs: Any) -> ToolCall:
    return ToolCall(shell_tool_call=ShellToolCall(args=ShellArgs(command=command, **kwargs)))


def summary_ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 4),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 4),
        "n": len(ordered),
    }


# -- the in-process baseline ------------------------------------------------------------------


def bare_bash_round_trip(rounds: int) -> dict[str, float]:
    """`true` sent to a bash over pipes, answered by a marker line: no daemon, no RPC."""
    bash = subprocess.Popen(
        ["bash", "--noprofile", "--norc"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        bufsize=0,
    )
    assert bash.stdin is not None and bash.stdout is not None
    request = b"true; echo $?\n"
    samples = []
    for index in range(rounds + 50):
        started = time.perf_counter()
        bash.stdin.write(request)
        reply = b""
        while not reply.endswith(b"\n"):
            reply += bash.stdout.read(64)
        if index >= 50:
            samples.append(time.perf_counter() - started)
    bash.stdin.close()
    bash.wait()
    return summary_ms(samples)


# -- the daemon -------------------------------------------------------------------------------


class RssWatch:
    """Peak resident memory of a process while a block runs (sampled every 2 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start_kib = self.read_kib()
        self.peak_kib = self.start_kib
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def read_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self.peak_kib = max(self.peak_kib, self.read_kib())

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth_mb(self) -> float:
        return round((self.peak_kib - self.start_kib) / 1024, 1)


async def stream_command(
    stream: ExecStream, command: str, stdout: str, rounds: int
) -> dict[str, Any]:
    """`command` in a warm session, each answer checked to have printed exactly `stdout`."""
    for _ in range(50):
        outcome = await (await stream.start(shell_call(command), agent_id="bench")).wait()
        shell_output(outcome, stdout=stdout)
    samples = []
    inside = []
    for _ in range(rounds):
        started = time.perf_counter()
        outcome = await (await stream.start(shell_call(command), agent_id="bench")).wait()
        samples.append(time.perf_counter() - started)
        inside.append(shell_output(outcome, stdout=stdout).execution_time)
    return {**summary_ms(samples), "daemon_execution_time_p50_ms": statistics.median(inside)}


async def stream_output(stream: ExecStream, daemon_pid: int, random_bytes: int) -> dict[str, Any]:
    command = output_command(random_bytes)
    expected = base64_output_bytes(random_bytes)
    with RssWatch(daemon_pid) as rss:
        started = time.perf_counter()
        call = await stream.start(shell_call(command, timeout=120_000), agent_id="bench")
        received = 0
        async for message in call:
            if message.WhichOneof("message") == "tool_call_delta":
                received += len(message.tool_call_delta.shell_tool_call_delta.stdout)
        seconds = time.perf_counter() - started
    # The deltas carry the whole output; the result keeps only what fits in memory.
    success = shell_output(call.outcome, stdout=None)
    expect(received == expected, f"streamed {received} bytes of output, not {expected}")
    return {
        "seconds": round(seconds, 3),
        "mb_per_s": round(received / seconds / 1e6, 1),
        "bytes_streamed": received,
        "spilled_bytes": success.output_location.size_bytes,
        "daemon_rss_growth_mb": rss.growth_mb,
    }


async def concurrent_sleeps(stream: ExecStream, count: int = 50) -> dict[str, Any]:
    started = time.perf_counter()
    calls = [
        await stream.start(shell_call("sleep 0.2; echo x"), agent_id="bench") for _ in range(count)
    ]
    outcomes = await asyncio.gather(*(call.wait() for call in calls))
    wall = time.perf_counter() - started
    for outcome in outcomes:
        shell_output(outcome, stdout="x\n")
    return {"calls": count, "wall_s": round(wall, 3)}


async def bench_daemon(rounds: int, output_random_bytes: int) -> dict[str, Any]:
    workspace = Path(tempfile.mkdtemp(prefix="bench-shell-"))
    with running_daemon(workspace, workspace / ".state", "--log-level", "warn") as daemon:
        async with daemon.client() as client, client.exec_stream() as stream:
            true_stats = await stream_command(stream, "true", "", rounds)
            echo_stats = await stream_command(stream, "echo ok", "ok\n", rounds)
            output = await stream_output(stream, daemon.process.pid, output_random_bytes)
            concurrent = await concurrent_sleeps(stream)
    return {
        "true": true_stats,
        "echo": echo_stats,
        "output": output,
        "concurrent_50": concurrent,
    }


# -- swe-rex ------------------------------------------------------------------------------------

SWEREX_CLIENT = r"""
import asyncio, json, statistics, sys, time
from swerex.runtime.remote import RemoteRuntime
from swerex.runtime.abstract import BashAction, Command, CreateBashSessionRequest

port, token, rounds, output_command = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
output_bytes = int(sys.argv[5])

def check(answer, output_bytes=None):
    if answer.exit_code != 0:
        sys.exit(f"wrong answer from swe-rex: exit code {answer.exit_code}")
    text = answer.stdout if hasattr(answer, "stdout") else answer.output
    # run_in_session wraps the output in the pty's "\r\n"s; base64's output ends with one "\n".
    if output_bytes is not None and len(text.strip()) + 1 != output_bytes:
        sys.exit(f"wrong answer from swe-rex: {len(text)} bytes of output, not {output_bytes}")
    return text

def summary(samples):
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 3),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3),
            "n": len(ordered)}

async def main():
    runtime = RemoteRuntime(host="http://127.0.0.1", port=port, auth_token=token, timeout=300)
    while not await runtime.is_alive():
        await asyncio.sleep(0.1)
    await runtime.create_session(CreateBashSessionRequest())
    out = {}
    for name, make in (("run_in_session", lambda c: runtime.run_in_session(BashAction(command=c, check="silent"))),
                       ("execute", lambda c: runtime.execute(Command(command=c, shell=True)))):
        for _ in range(20):
            check(await make("true"))
        samples = []
        for _ in range(rounds):
            started = time.perf_counter()
            answer = await make("true")
            samples.append(time.perf_counter() - started)
            check(answer)
        out[name + "_true"] = summary(samples)
    started = time.perf_counter()
    result = await runtime.execute(Command(command=output_command, shell=True, timeout=300))
    seconds = time.perf_counter() - started
    check(result, output_bytes)
    out["execute_output"] = {"seconds": round(seconds, 3),
                             "mb_per_s": round(len(result.stdout) / seconds / 1e6, 1),
                             "bytes": len(result.stdout), "streaming": False}
    small = "head -c 7500000 /dev/urandom | base64"
    started = time.perf_counter()
    result = await runtime.run_in_session(BashAction(command=small, check="silent", timeout=300))
    seconds = time.perf_counter() - started
    check(result, 10_131_579)
    out["run_in_session_output_10mb"] = {"seconds": round(seconds, 3),
                                         "mb_per_s": round(len(result.output) / seconds / 1e6, 1),
                                         "bytes": len(result.output), "streaming": False}
    await runtime.close()
    print(json.dumps(out))

asyncio.run(main())
"""


def swerex_python() -> tuple[Path | None, str]:
    python = SWEREX_VENV / "bin" / "python"
    check = [str(python), "-c", "import swerex.runtime.remote"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python, ""
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", str(SWEREX_VENV)], check=True, capture_output=True
        )
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "swe-rex", "aiohttp"],
            check=True,
            capture_output=True,
            timeout=600,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"pip install swe-rex failed: {exc}"
    if subprocess.run(check, capture_output=True).returncode != 0:
        return None, "swe-rex installed but its client does not import"
    return python, ""


class PeerFailed(Exception):
    """The peer baseline (swe-rex) could not be measured: the run fails rather than leave the
    shell's figures without their peer (--no-swerex leaves it out on purpose)."""


def bench_swerex(rounds: int, random_bytes: int) -> dict[str, Any]:
    command = output_command(random_bytes)
    python, problem = swerex_python()
    if python is None:
        raise PeerFailed(problem)
    port, token = free_port(), secrets.token_hex(16)
    server = subprocess.Popen(
        [str(python.parent / "swerex-remote"), "--host", "127.0.0.1", "--port", str(port),
         "--auth-token", token],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with RssWatch(server.pid) as rss:
            client = subprocess.run(
                [
                    str(python),
                    "-c",
                    SWEREX_CLIENT,
                    str(port),
                    token,
                    str(rounds),
                    command,
                    str(base64_output_bytes(random_bytes)),
                ],
                capture_output=True,
                text=True,
                timeout=900,
            )
        if client.returncode != 0:
            raise PeerFailed(f"swe-rex client failed: {client.stderr[-500:]}")
        measured: dict[str, Any] = json.loads(client.stdout)
        measured["server_rss_growth_mb"] = rss.growth_mb
        return measured
    finally:
        server.terminate()
        server.wait(10)


def ratio(value: float, base: float) -> float:
    return round(value / base, 2) if base else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--no-swerex", action="store_true")
    add_quick_flag(parser)
    options = parser.parse_args()
    output_random_bytes = OUTPUT_RANDOM_BYTES
    if options.quick:
        options.rounds, options.no_swerex = 30, True
        output_random_bytes = QUICK_OUTPUT_RANDOM_BYTES
    baseline = bare_bash_round_trip(options.rounds)
    daemon = asyncio.run(bench_daemon(options.rounds, output_random_bytes))
    report: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "load_1m": os.getloadavg()[0]},
        "bare_bash_round_trip": baseline,
        "exec_daemon": daemon,
        "ratios": {
            "true_p50_vs_bare_bash": ratio(daemon["true"]["p50_ms"], baseline["p50_ms"]),
            "true_p99_vs_bare_bash": ratio(daemon["true"]["p99_ms"], baseline["p99_ms"]),
            "echo_p50_vs_true": ratio(daemon["echo"]["p50_ms"], daemon["true"]["p50_ms"]),
            "echo_p99_vs_true": ratio(daemon["echo"]["p99_ms"], daemon["true"]["p99_ms"]),
        },
        "goals": {
            "true_p50_le_1ms": daemon["true"]["p50_ms"] <= 1.0,
            "echo_p50_le_true_p50_plus_1ms": (
                daemon["echo"]["p50_ms"] <= daemon["true"]["p50_ms"] + ECHO_EXTRA_MS
            ),
            "output_ge_80_mb_s": daemon["output"]["mb_per_s"] >= 80,
            "output_rss_growth_le_64mb": daemon["output"]["daemon_rss_growth_mb"] <= 64,
            "concurrent_50_le_0_6s": daemon["concurrent_50"]["wall_s"] <= 0.6,
        },
    }
    peer_failed = ""
    if not options.no_swerex:
        try:
            swerex = bench_swerex(min(options.rounds, 300), output_random_bytes)
        except PeerFailed as failure:
            peer_failed = str(failure)
            swerex = {"failed": peer_failed}
        report["swerex"] = swerex
        if not peer_failed:
            report["ratios"]["true_p50_vs_swerex_run_in_session"] = ratio(
                daemon["true"]["p50_ms"], swerex["run_in_session_true"]["p50_ms"]
            )
            report["ratios"]["true_p50_vs_swerex_execute"] = ratio(
                daemon["true"]["p50_ms"], swerex["execute_true"]["p50_ms"]
            )
            report["ratios"]["output_mb_s_vs_swerex_execute"] = ratio(
                daemon["output"]["mb_per_s"], swerex["execute_output"]["mb_per_s"]
            )
    print(json.dumps(report, indent=2))
    if peer_failed:
        sys.exit(f"bench_shell: the swe-rex baseline could not run: {peer_failed}")


if __name__ == "__main__":
    main()
