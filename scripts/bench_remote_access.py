#!/usr/bin/env python3
"""WarmRemoteAccessServer: the cold start of the browser IDE (code-server behind the daemon's
token, exec_daemon/rpc/ide.py) and the warm call once it runs, printed as JSON.

Cold: a fresh daemon's first WarmRemoteAccessServer, which starts code-server from the install in
the default --ide-folder (linked into a folder of the run's own) and waits for it to answer.
Warm: the same call again (goal: <= 100 ms). Each answer is checked: ready, the same address
each time, and that address answering through the token-checking proxy (bearer token: 200,
none: 401).

    python scripts/bench_remote_access.py [--cold N] [--warm N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.v1.control_pb2 import WarmRemoteAccessServerRequest
from exec_daemon.kernel.config import DEFAULT_IDE_FOLDER
from exec_daemon.rpc.ide import installed_versions
from scripts.benchmarking import add_quick_flag, expect
from tests.daemon_process import free_port, running_daemon


def status_of(url: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as answered:
        return answered.code


async def one_daemon(version: str, warm_calls: int) -> tuple[float, list[float]]:
    """(cold seconds, warm seconds each) of one fresh daemon."""
    with tempfile.TemporaryDirectory(prefix="bench-ide-") as scratch:
        root = Path(scratch)
        (root / "workspace").mkdir()
        (root / "workspace" / "hello.txt").write_text("hello\n")
        folder = root / "ide"
        folder.mkdir(mode=0o700)
        (folder / f"code-server-{version}").symlink_to(
            DEFAULT_IDE_FOLDER / f"code-server-{version}"
        )
        port = free_port()
        flags = ("--ide-port", str(port), "--ide-folder", str(folder), "--log-level", "warn")
        with running_daemon(root / "workspace", root / "state", *flags) as daemon:
            async with daemon.client() as client:
                request = WarmRemoteAccessServerRequest()
                started = time.perf_counter()
                first = await client.control.warm_remote_access_server(
                    request, headers=client.headers
                )
                cold = time.perf_counter() - started
                expect(first.ready, f"not ready: {first}")
                expect(f"127.0.0.1:{port}/" in first.message, f"no address: {first.message}")
                warm = []
                for _ in range(warm_calls):
                    started = time.perf_counter()
                    again = await client.control.warm_remote_access_server(
                        request, headers=client.headers
                    )
                    warm.append(time.perf_counter() - started)
                    expect(again == first, f"a warm call answered otherwise: {again}")
            base = f"http://127.0.0.1:{port}"
            expect(status_of(base + "/healthz", daemon.token) == 200, "the IDE does not answer")
            expect(status_of(base + "/", None) == 401, "the IDE answered without the token")
    return cold, warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cold", type=int, default=5, help="fresh daemons (cold starts)")
    parser.add_argument("--warm", type=int, default=50, help="warm calls per daemon")
    add_quick_flag(parser)
    args = parser.parse_args()
    if args.quick:
        args.cold, args.warm = 1, 10
    versions = installed_versions(DEFAULT_IDE_FOLDER)
    if not versions:
        sys.exit(
            f"code-server is not installed in {DEFAULT_IDE_FOLDER}: "
            "python -m exec_daemon.rpc.ide install 4.139.1"
        )
    colds: list[float] = []
    warms: list[float] = []
    for _ in range(args.cold):
        cold, warm = asyncio.run(one_daemon(versions[0], args.warm))
        colds.append(cold)
        warms += warm
    warm_p50 = statistics.median(warms)
    report: dict[str, Any] = {
        "code_server": versions[0],
        "cold_start": {"runs": len(colds), "median_ms": round(statistics.median(colds) * 1000, 1),
                       "max_ms": round(max(colds) * 1000, 1)},
        "warm_call": {"calls": len(warms), "p50_ms": round(warm_p50 * 1000, 2),
                      "max_ms": round(max(warms) * 1000, 2), "goal_ms": 100},
        "cold_over_warm_ratio": round(statistics.median(colds) / warm_p50, 1),
    }  # fmt: skip
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
