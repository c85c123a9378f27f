"""Where the daemon is in its life: waiting to be claimed, serving, draining, stopped.

Health checks (/readyz, grpc.health.v1), GetSandboxInfo and the front door read it; the
composition root (exec_daemon/server.py) moves it along. A daemon started with its agent's token
is serving from the start; one started with `--wait-for-init` waits for InitSandbox.
Drain: calls in flight are counted (`calls`), so SIGTERM can let them finish before the end;
every answer being written is counted too (`answers`), streams included, so the port closes
only once the calls ended at shutdown have sent their last answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from collections.abc import AsyncIterator, Iterator
from types import MappingProxyType


class Phase(enum.Enum):
    UNCLAIMED = "unclaimed"  # --wait-for-init: only health and InitSandbox are answered
    STARTING = "starting"  # InitSandbox accepted; the daemon is being set up for its agent
    SERVING = "serving"
    DRAINING = "draining"  # SIGTERM: calls in flight finish, new ones are refused
    STOPPED = "stopped"


class Count:
    """A count of what is under way that can be waited down to zero."""

    def __init__(self) -> None:
        self.value = 0
        self._zero = asyncio.Event()
        self._zero.set()

    @contextlib.contextmanager
    def counted(self) -> Iterator[None]:
        self.value += 1
        self._zero.clear()
        try:
            yield
        finally:
            self.value -= 1
            if not self.value:
                self._zero.set()

    async def zero(self, seconds: float) -> bool:
        """Waits up to `seconds` for the count to reach zero; True when it has."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._zero.wait()
        return not self.value


class Lifecycle:
    def __init__(self, _daemon: object = None, *, wait_for_init: bool = False) -> None:
        self.phase = Phase.UNCLAIMED if wait_for_init else Phase.SERVING
        self.started_monotonic = time.monotonic()
        self.waited_for_init = wait_for_init
        self.metadata: MappingProxyType[str, str] = MappingProxyType({})
        self.user = ""
        self._claimed = not wait_for_init
        # Calls in flight, for as long as they run: a drain (SIGTERM) waits for them.
        self.calls = Count()
        # Answers being written, streams' included, until their last byte is sent.
        self.answers = Count()
        # Replaced by a fresh one at each change, after being set: whoever waits wakes up.
        self._changed = asyncio.Event()

    def uptime_ms(self) -> int:
        """Since the daemon started (a pool's daemon: since before its claim)."""
        return int((time.monotonic() - self.started_monotonic) * 1000)

    @property
    def ready(self) -> bool:
        return self.phase is Phase.SERVING

    @property
    def claimed(self) -> bool:
        """Bound to its agent: started with its token, or InitSandbox answered."""
        return self._claimed

    @property
    def accepts_calls(self) -> bool:
        return self.phase is Phase.SERVING

    def begin_claim(self) -> bool:
        """True for the one InitSandbox that may bind this daemon (checked and set at once)."""
        if self.phase is not Phase.UNCLAIMED:
            return False
        self._move(Phase.STARTING)
        return True

    def abandon_claim(self) -> None:
        """The claim could not be set up before it changed anything: back to waiting."""
        if self.phase is Phase.STARTING:
            self._move(Phase.UNCLAIMED)

    def bound(self, metadata: dict[str, str], user: str) -> None:
        self.metadata = MappingProxyType(dict(metadata))
        self.user = user

    def serving(self) -> None:
        if self.phase in (Phase.UNCLAIMED, Phase.STARTING):
            self._claimed = True
            self._move(Phase.SERVING)

    def draining(self) -> None:
        if self.phase is not Phase.STOPPED:
            self._move(Phase.DRAINING)

    def stopped(self) -> None:
        self._move(Phase.STOPPED)

    async def phases(self) -> AsyncIterator[Phase]:
        """The phase now, then each new one, until the daemon has stopped."""
        seen: Phase | None = None
        while seen is not Phase.STOPPED:
            while self.phase is seen:
                await self._changed.wait()
            seen = self.phase
            yield seen

    def _move(self, phase: Phase) -> None:
        self.phase = phase
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
