"""Daemon-wide state shared by every service and tool: config, environment, long-lived services."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from exec_daemon.kernel.config import DaemonConfig

log = logging.getLogger(__name__)

S = TypeVar("S")


class EnvironmentStore:
    """The environment given to every process the daemon starts from now on."""

    def __init__(self, base: dict[str, str]) -> None:
        self._env = dict(base)
        self._listeners: list[Callable[[dict[str, str]], None]] = []

    def snapshot(self) -> dict[str, str]:
        return dict(self._env)

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._env.get(name, default)

    def update(
        self, values: dict[str, str], *, replace: bool = False, unset: list[str] | None = None
    ) -> int:
        self._env = dict(values) if replace else {**self._env, **values}
        for name in unset or []:
            self._env.pop(name, None)
        for listener in self._listeners:
            listener(self.snapshot())
        return len(self._env)

    def subscribe(self, listener: Callable[[dict[str, str]], None]) -> None:
        """Call `listener` with the new environment after every update."""
        self._listeners.append(listener)


def initial_environment(config: DaemonConfig) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "CURSOR_AGENT": "1",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "MANPAGER": "cat",
            "SYSTEMD_PAGER": "",
            "GIT_TERMINAL_PROMPT": "0",
            "DEBIAN_FRONTEND": "noninteractive",
            "NO_COLOR": "1",
            "FORCE_COLOR": "0",
        }
    )
    # The daemon's own secret must not leak into the agent's processes.
    env.pop("EXEC_DAEMON_AUTH_TOKEN", None)
    return env


class Daemon:
    """Everything a running daemon holds. Tools reach it through their call context.

    Long-lived per-daemon services (shell sessions, PTYs, MCP clients, ...) are created on first
    use with `daemon.service(Cls)` — `Cls(daemon)` — and closed on shutdown when they have an
    async `aclose()`; so a tool family owns its state without this class knowing about it.
    A kernel protocol (e.g. `Sandboxing`) is served by the implementation the composition root
    named with `daemon.provide(Protocol, factory)`.
    """

    def __init__(self, config: DaemonConfig) -> None:
        self.config = config
        self.started_monotonic = time.monotonic()
        self.env = EnvironmentStore(initial_environment(config))
        # Set when the daemon begins to shut down: streams end and their calls are cancelled.
        self.stopping = asyncio.Event()
        self._services: dict[type, Any] = {}
        self._factories: dict[type, Callable[[Daemon], Any]] = {}

    @property
    def workspace(self) -> str:
        return str(self.config.workspace)

    def uptime_ms(self) -> int:
        return int((time.monotonic() - self.started_monotonic) * 1000)

    def provide(self, key: type[S], factory: Callable[[Daemon], S]) -> None:
        """Makes `service(key)` the object `factory(daemon)` builds (once)."""
        self._factories[key] = factory

    def service(self, cls: type[S]) -> S:
        existing = self._services.get(cls)
        if existing is None:
            existing = self._services[cls] = self._build(cls)
        return existing  # type: ignore[no-any-return]

    def _build(self, cls: type[S]) -> S:
        factory = self._factories.get(cls)
        if factory is not None:
            return factory(self)  # type: ignore[no-any-return]
        if getattr(cls, "_is_protocol", False):
            raise LookupError(
                f"no implementation of {cls.__name__} was provided "
                "(the composition root, exec_daemon/server.py, provides them)"
            )
        return cls(self)  # type: ignore[call-arg]

    async def aclose(self) -> None:
        """Close every service, newest first, each bounded so shutdown stays fast."""
        for service in reversed(list(self._services.values())):
            close = getattr(service, "aclose", None)
            if close is None:
                continue
            try:
                result = close()
                if inspect.isawaitable(result):
                    await asyncio.wait_for(result, timeout=3.0)
            except Exception:
                log.exception("closing %s failed", type(service).__name__)
        self._services.clear()
