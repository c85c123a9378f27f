"""The one sandbox decision of a shell call.

`Sandboxing.decide` takes what the call asked for (`requested_sandbox_policy`), what the guards
demand on top of it (a read-only agent: read-only; a command nobody approved in auto_review:
confined or not at all) and the daemon's sandbox settings (--sandbox-enabled, sandbox.json, what
the kernel supports), and answers once: the call is refused, or it runs under this
`Confinement` and reports this effective policy. The permissions guard decides and hands the
answer to the shell handler in `CallContext.sandbox`; the handler decides itself only when no
guard ran.

sandbox/service.py implements it; the composition root (exec_daemon/server.py) wires it with
`daemon.provide(Sandboxing, ...)`, so no layer below the root imports the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent.v1.shell_pb2 import SandboxPolicy
from exec_daemon.kernel.processes import UNCONFINED, Confinement


@dataclass(frozen=True)
class SandboxDemand:
    """What the guards require of a call's confinement, beyond what the call asked for."""

    # Confined read-only when the sandbox is up (a read-only agent); unconfined otherwise.
    read_only: bool = False
    # Confined, or not run at all (auto_review: a command nobody approved).
    confined: bool = False
    # A daemon helper parsing what the agent supplied (a linter, ffmpeg reading a video): when
    # the sandbox is up, confined with no network and no writes but to a few devices (/dev/null,
    # ...) whatever the call or sandbox.json asks; unconfined when it is off.
    isolated: bool = False
    # With `isolated`: reads nothing of the file system but what running a system program
    # needs (the dynamic loader, the libraries, the programs) and the files open on the
    # descriptors passed in (its input): not the daemon's state, not the home or workspace.
    reads_input_only: bool = False


AS_REQUESTED = SandboxDemand()
ISOLATED = SandboxDemand(isolated=True)
# A helper that parses one input it gets as a descriptor (ffmpeg on an attached video).
ISOLATED_INPUT_ONLY = SandboxDemand(isolated=True, reads_input_only=True)


@dataclass(frozen=True)
class SandboxDecision:
    """Either a refusal, or how the call runs."""

    confinement: Confinement = UNCONFINED
    # What the result reports: the policy the command runs under; None when the call asked for
    # nothing and runs unconfined.
    effective_policy: SandboxPolicy | None = None
    # The requested policy after what the demand imposed, when it changed (the answer's args
    # show it); None when the call runs as it asked.
    imposed: SandboxPolicy | None = None
    # Non-empty: the call must not run, and this says why (for the user).
    refusal: str = ""
    # The refusal is because the demanded confinement cannot be had (the sandbox is off or the
    # kernel lacks what it needs, or the call asks for full access): someone must review it.
    needs_review: bool = False


class Sandboxing(Protocol):
    async def decide(
        self, requested: SandboxPolicy | None, demand: SandboxDemand = AS_REQUESTED
    ) -> SandboxDecision:
        """The decision for a call that asked for `requested` (None: asked for nothing)."""
        ...

    def keep_private(self, path: Path | str) -> None:
        """Makes `path` read-only inside every sandbox: the daemon's own files that a confined
        command must not change (e.g. shell state that unconfined shells source)."""
        ...
