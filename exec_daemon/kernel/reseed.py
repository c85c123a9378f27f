"""In-process randomness made fresh after the VM is restored from a snapshot.

Two VMs restored from one snapshot start with the same memory, so the same state of Python's
`random` (the tool-call span and trace ids, OpenTelemetry's `RandomIdGenerator`) and of
`tempfile`'s name generator (a `random.Random` of its own, made once per process): both would
draw the same values in each VM. The kernel's generator is reseeded first (PodService.Resumed,
scripts/image/pod-daemon); here both are seeded again from it. `secrets`, `uuid4` and `os.urandom`
read the kernel each time and need nothing.
"""

from __future__ import annotations

import os
import random
import tempfile


def reseed_process_randomness() -> None:
    """Seeds `random` and `tempfile`'s temp names from the kernel's (already reseeded) generator."""
    random.seed(os.urandom(32))
    with tempfile._once_lock:  # type: ignore[attr-defined]
        # Made again, from fresh seed material, at its next use.
        tempfile._name_sequence = None  # type: ignore[attr-defined]
