"""What the kernel offers the sandbox: Landlock ABI, user namespaces, seccomp.

Probed once at start by running the helper's `--probe` (which really creates the namespaces,
mounts, and loads a filter). `EXEC_DAEMON_SANDBOX_SIMULATE_MISSING=landlock,namespaces,seccomp`
(any subset) makes the probe report those features missing, to test the degraded paths.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from dataclasses import dataclass, replace

from exec_daemon.kernel.runner import HelperFailed, run_helper
from exec_daemon.kernel.secrets import without_secrets

log = logging.getLogger(__name__)

SIMULATE_MISSING_ENV = "EXEC_DAEMON_SANDBOX_SIMULATE_MISSING"
# TRUNCATE (ABI 3) is the first ABI that controls every way to change a file's content.
MIN_LANDLOCK_ABI = 3
PROBE_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class KernelSupport:
    landlock_abi: int = 0
    namespaces: bool = False
    namespaces_error: str = ""
    seccomp: bool = False
    seccomp_error: str = ""
    proc_mount: bool = False
    # How the sandbox's process count is held: "rlimit" (RLIMIT_NPROC: a daemon not running as
    # root), "pids_cgroup" (root, which RLIMIT_NPROC exempts) or "none" (root without one).
    process_limit: str = "rlimit"
    helper_error: str = ""

    def missing(self) -> list[str]:
        """Why a sandboxed command cannot run here (empty when it can)."""
        if self.helper_error:
            return [f"the sandbox helper is unavailable ({self.helper_error})"]
        reasons = []
        if self.landlock_abi < MIN_LANDLOCK_ABI:
            found = f"ABI {self.landlock_abi}" if self.landlock_abi else "not available"
            reasons.append(f"Landlock ABI >= {MIN_LANDLOCK_ABI} is needed (kernel: {found})")
        if not self.namespaces:
            reasons.append(
                "unprivileged user/mount/pid/net namespaces are needed"
                + (f" ({self.namespaces_error})" if self.namespaces_error else "")
            )
        if not self.seccomp:
            reasons.append(
                "seccomp filters are needed"
                + (f" ({self.seccomp_error})" if self.seccomp_error else "")
            )
        return reasons

    def status_line(self, enabled: bool) -> str:
        features = (
            f"Landlock ABI {self.landlock_abi or 'none'} (needs >= {MIN_LANDLOCK_ABI}), "
            f"namespaces {'yes' if self.namespaces else 'no'}, "
            f"seccomp {'yes' if self.seccomp else 'no'}, "
            f"private /proc {'yes' if self.proc_mount else 'no'}, "
            f"process limit {self.process_limit.replace('_', ' ')}"
        )
        missing = self.missing()
        if not enabled:
            state = "disabled (--sandbox-enabled not set)"
        elif missing:
            state = "UNAVAILABLE, sandboxed calls will be rejected: " + "; ".join(missing)
        else:
            state = "enabled"
        return f"sandbox: {state}; kernel: {features}"


def simulate_missing(support: KernelSupport, names: str) -> KernelSupport:
    for name in (part.strip().lower() for part in names.split(",")):
        if name == "landlock":
            support = replace(support, landlock_abi=0)
        elif name in ("namespaces", "userns", "user_namespaces"):
            support = replace(
                support, namespaces=False, namespaces_error="simulated: " + SIMULATE_MISSING_ENV
            )
        elif name == "seccomp":
            support = replace(
                support, seccomp=False, seccomp_error="simulated: " + SIMULATE_MISSING_ENV
            )
    return support


async def probe_kernel(helper: str) -> KernelSupport:
    """Runs `helper --probe`; a helper that cannot run is reported, not raised."""
    try:
        done = await run_helper(
            [helper, "--probe"], env=os.environ, time_limit=PROBE_TIMEOUT_SECONDS
        )
        data = json.loads(done.stdout.data)
    except (HelperFailed, ValueError) as exc:
        log.warning("sandbox probe with %s failed: %s", helper, exc)
        return KernelSupport(helper_error=f"probe failed: {exc}")
    return _support_from(data)


def probe_kernel_sync(helper: str) -> KernelSupport:
    """`probe_kernel` for callers that cannot await (blocks ~10 ms)."""
    try:
        completed = subprocess.run(
            [helper, "--probe"],
            env=without_secrets(os.environ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            check=False,
        )
        data = json.loads(completed.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        log.warning("sandbox probe with %s failed: %s", helper, exc)
        return KernelSupport(helper_error=f"probe failed: {exc}")
    return _support_from(data)


def _support_from(data: dict[str, object]) -> KernelSupport:
    support = KernelSupport(
        landlock_abi=int(str(data.get("landlock_abi", 0))),
        namespaces=bool(data.get("namespaces")),
        namespaces_error=str(data.get("namespaces_error", "")),
        seccomp=bool(data.get("seccomp")),
        seccomp_error=str(data.get("seccomp_error", "")),
        proc_mount=bool(data.get("proc_mount")),
        process_limit=str(data.get("process_limit", "none")),
    )
    simulated = os.environ.get(SIMULATE_MISSING_ENV, "")
    return simulate_missing(support, simulated) if simulated else support
