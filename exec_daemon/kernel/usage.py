"""What the sandbox (the VM, or the container) has and uses: CPUs, memory, disk, processes.

GetSandboxInfo and the metrics of exec_daemon/telemetry/metrics.py report it. Memory is the
cgroup's (v2) when it has a limit, which is what a container or a Kubernetes pod may use,
else the machine's (/proc/meminfo: in a VM, the VM's). Reads are small /proc and /sys files:
callers on the event loop run `sandbox_usage` in a thread.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

_CGROUP = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class SandboxUsage:
    cpu_count: int
    memory_used_bytes: int
    memory_total_bytes: int
    disk_used_bytes: int
    disk_total_bytes: int
    process_count: int


def cpu_count() -> int:
    """CPUs this process may run on, fewer when the cgroup's quota (cpu.max) allows less."""
    allowed = len(os.sched_getaffinity(0))
    try:
        quota, period = (_CGROUP / "cpu.max").read_text().split()
        if quota != "max":
            return max(1, min(allowed, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return allowed


def memory_bytes() -> tuple[int, int]:
    """(used, total): the cgroup's current use and limit when it has one, else the machine's."""
    try:
        limit = (_CGROUP / "memory.max").read_text().strip()
        if limit != "max":
            return int((_CGROUP / "memory.current").read_text()), int(limit)
    except (OSError, ValueError):
        pass
    info: dict[str, int] = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            name, _, rest = line.partition(":")
            info[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return 0, 0
    total = info.get("MemTotal", 0)
    return total - info.get("MemAvailable", total), total


def disk_bytes(path: Path) -> tuple[int, int]:
    """(used, total) of the file system holding `path`."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return 0, 0
    return usage.total - usage.free, usage.total


def process_count() -> int:
    """The processes this PID namespace shows (the VM's, or the container's)."""
    try:
        return sum(1 for entry in os.scandir("/proc") if entry.name.isdigit())
    except OSError:
        return 0


def sandbox_usage(workspace: Path) -> SandboxUsage:
    memory_used, memory_total = memory_bytes()
    disk_used, disk_total = disk_bytes(workspace)
    return SandboxUsage(
        cpu_count=cpu_count(),
        memory_used_bytes=memory_used,
        memory_total_bytes=memory_total,
        disk_used_bytes=disk_used,
        disk_total_bytes=disk_total,
        process_count=process_count(),
    )
