"""Command confinement: the sandbox policy model and the confinement helper.

- `policy`: `SandboxPolicy` (proto) + sandbox.json files -> `EffectivePolicy`.
- `protected`: the protected paths (one definition:
  `exec_daemon.kernel.protected.PROTECTED_PATH_RULES`) as mount targets.
- `plan`: `EffectivePolicy` -> the helper's command line.
- `helper.c` / `build`: the confinement helper (namespaces, mounts, Landlock, seccomp) in C,
  built once with gcc: a command's confinement costs a fork+exec of a small static binary,
  not an interpreter start.
- `probe`: what the kernel supports; one status line at start.
- `proxy`: the network allowlist proxy.
- `service`: `SandboxService`, the daemon's entry point: its `decide` is the kernel's
  `Sandboxing` protocol (exec_daemon/kernel/sandboxing.py), wired by exec_daemon/server.py.
"""

from sandbox.policy import (
    EffectivePolicy,
    NetworkMode,
    SandboxRejected,
    SandboxSetupFailed,
    SandboxType,
)
from sandbox.service import SandboxConfinement, SandboxRun, SandboxService

__all__ = [
    "EffectivePolicy",
    "NetworkMode",
    "SandboxConfinement",
    "SandboxRejected",
    "SandboxRun",
    "SandboxService",
    "SandboxSetupFailed",
    "SandboxType",
]
