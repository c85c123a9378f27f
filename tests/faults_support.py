"""Killing the real daemon mid-work (kill -9) and counting what it left: temp files, torn files,
processes. Shared by tests/test_faults.py and scripts/bench_faults.py."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from agent.v1.control_pb2 import ExecRequest, WriteTextFileRequest
from agent.v1.files_pb2 import ApplyAgentDiffArgs, ApplyAgentDiffToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.kernel.state_root import default_base
from tests.daemon_process import RunningDaemon
from tests.interop import frame, http1_post

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


@contextlib.contextmanager
def private_state_base() -> Iterator[Path]:
    """A `--state-base` of the caller's own, removed after: on the machine's default base, any
    other daemon starting (another test's) would end a killed daemon's world first."""
    base = default_base().with_name(f"exec-daemon-test-{secrets.token_hex(4)}")
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


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


CONTROL_EXEC = "/agent.v1.ControlService/Exec"


def apply_diff_body(diff: str) -> bytes:
    call = ToolCall(
        apply_agent_diff_tool_call=ApplyAgentDiffToolCall(args=ApplyAgentDiffArgs(diff=diff))
    )
    return frame(ExecRequest(tool_call=call).SerializeToString())


@dataclass
class DiffTrial:
    """A workspace of `files` files of `file_bytes` each, and a diff that creates `created.txt`
    first, changes the first line of every file, and deletes `gone.txt` last."""

    workspace: Path
    files: int
    file_bytes: int

    def names(self) -> list[str]:
        return [f"f{index:03}.txt" for index in range(self.files)]

    def old_text(self, name: str) -> str:
        line = f"{name} unchanged line\n"
        return f"first line of {name}\n" + line * (self.file_bytes // len(line))

    def reset(self) -> None:
        """Every file as it was before the diff."""
        (self.workspace / "created.txt").unlink(missing_ok=True)
        (self.workspace / "gone.txt").write_text("bye\n")
        for name in self.names():
            (self.workspace / name).write_text(self.old_text(name))

    def diff(self) -> str:
        parts = ["--- /dev/null\n+++ b/created.txt\n@@ -0,0 +1,1 @@\n+new\n"]
        for name in self.names():
            parts.append(
                f"--- a/{name}\n+++ b/{name}\n@@ -1,1 +1,1 @@\n"
                f"-first line of {name}\n+changed first line of {name}\n"
            )
        parts.append("--- a/gone.txt\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-bye\n")
        return "".join(parts)

    def applied(self) -> list[bool]:
        """For each change of the diff (create, each file, delete): whether it is on disk."""
        created = (self.workspace / "created.txt").exists()
        changed = [
            (self.workspace / name).read_text().startswith("changed") for name in self.names()
        ]
        deleted = not (self.workspace / "gone.txt").exists()
        return [created, *changed, deleted]

    def torn(self) -> bool:
        """Some changes of the diff applied and some not."""
        return len(set(self.applied())) == 2


def kill_mid_apply(daemon: RunningDaemon, trial: DiffTrial) -> bool:
    """Applies `trial`'s diff and kills the daemon once its first change is on disk; True when
    the kill left the diff partly applied."""
    body = apply_diff_body(trial.diff())
    kill_when(
        daemon,
        lambda: http1_post(daemon, CONTROL_EXEC, body, "application/connect+proto", timeout=120),
        lambda: (trial.workspace / "created.txt").exists(),
    )
    return trial.torn()
