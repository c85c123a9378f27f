"""Killing the real daemon mid-work (kill -9) and counting what it left: temp files, torn files,
processes. Shared by tests/test_faults.py and scripts/bench_faults.py."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agent.v1.control_pb2 import WriteTextFileRequest
from tests.daemon_process import RunningDaemon
from tests.interop import http1_post

WRITE_TEXT_FILE = "/agent.v1.ControlService/WriteTextFile"


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def descendants(root: int) -> dict[int, str]:
    """Every process below `root` now, each with its start time (to tell a reused pid)."""
    children: dict[int, list[int]] = {}
    started: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat_fields(int(entry))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
            started[int(entry)] = fields[19]
    found: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found[pid] = started[pid]
        todo += children.get(pid, [])
    return found


def alive(processes: dict[int, str]) -> list[int]:
    """Those of `processes` still running (zombies count as gone)."""
    living = []
    for pid, start in processes.items():
        fields = _stat_fields(pid)
        if fields is not None and fields[19] == start and fields[0] != "Z":
            living.append(pid)
    return living


def end_processes(processes: dict[int, str]) -> None:
    """Kills what is left of `processes` (a killed daemon's world, which the test started)."""
    for pid in alive(processes):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def temp_files(folder: Path) -> list[str]:
    """The write path's temp files in `folder` (`.<name>.<...>.tmp`)."""
    return sorted(n for n in os.listdir(folder) if n.startswith(".") and n.endswith(".tmp"))


def kill_when(
    daemon: RunningDaemon, start: Callable[[], object], ready: Callable[[], bool]
) -> bool:
    """Runs `start` (a blocking request) in a thread and SIGKILLs the daemon as soon as
    `ready()` holds; False when `start` returned first (the kill would not land mid-way).
    Returns with the daemon dead either way, its descendants left as the kill left them."""
    thread = threading.Thread(target=lambda: _quietly(start), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    landed = False
    while time.monotonic() < deadline:
        if ready():
            daemon.process.send_signal(signal.SIGKILL)
            landed = True
            break
        if not thread.is_alive():
            break
        time.sleep(0.001)
    if not landed:
        daemon.process.send_signal(signal.SIGKILL)
    daemon.process.wait()
    thread.join(30)
    return landed


def _quietly(call: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        call()


def write_text_file_body(path: str, text: str) -> bytes:
    return WriteTextFileRequest(path=path, content=text).SerializeToString()


def kill_mid_write(daemon: RunningDaemon, relative: str, text: str) -> bool:
    """Writes `text` to `relative` (WriteTextFile) and kills the daemon once its temp file
    appeared; True when the kill landed while the temp file was there."""
    folder = (daemon.workspace / relative).parent
    body = write_text_file_body(relative, text)
    return kill_when(
        daemon,
        lambda: http1_post(daemon, WRITE_TEXT_FILE, body, "application/proto", timeout=60),
        lambda: bool(temp_files(folder)),
    )
