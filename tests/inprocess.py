"""Serves the daemon's app inside the test's event loop, with handlers the test chooses.

For tests of the spine itself (stream semantics, auth, traps): the transport, the front door and
the dispatcher are the real ones, over a real loopback socket; only the tool handlers are the
test's, so a test can make a call that sleeps, streams, records its cancellation or crashes.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hypercorn.asyncio import serve as hypercorn_serve

from exec_daemon.client import ExecDaemonClient
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.context import Handler
from exec_daemon.kernel.spec import ToolSpec
from exec_daemon.kernel.state import Daemon
from exec_daemon.registry import SPECS
from exec_daemon.rpc import hypercorn_fixes
from exec_daemon.server import build_app, hypercorn_config, new_daemon
from tests.daemon_process import STARTUP_SECONDS, free_port


def stand_in_specs(handlers: Mapping[str, Handler]) -> list[ToolSpec]:
    """The registry's specs of these variants, each with the test's handler in place of its own
    (so the guards treat the stand-in as the tool it stands for)."""
    by_variant = {spec.variant: spec for spec in SPECS}
    return [replace(by_variant[variant], handler=handler) for variant, handler in handlers.items()]


@dataclass
class InProcessDaemon:
    daemon: Daemon
    url: str
    token: str

    @property
    def port(self) -> int:
        return self.daemon.config.port

    def client(self, **kwargs: Any) -> ExecDaemonClient:
        return ExecDaemonClient(self.url, self.token, **kwargs)


@contextlib.asynccontextmanager
async def serve_in_process(
    handlers: Mapping[str, Handler], **overrides: Any
) -> AsyncIterator[InProcessDaemon]:
    hypercorn_fixes.install()
    token = secrets.token_hex(32)
    with tempfile.TemporaryDirectory() as workspace:
        config = DaemonConfig(auth_token=token, workspace=Path(workspace), host="127.0.0.1")
        config = replace(config, port=free_port(), **overrides)
        daemon = new_daemon(config)
        stop = asyncio.Event()
        server = asyncio.create_task(
            hypercorn_serve(
                build_app(daemon, stand_in_specs(handlers)),  # type: ignore[arg-type]
                hypercorn_config(config),
                shutdown_trigger=stop.wait,
            )
        )
        try:
            await _wait_listening(config.port)
            yield InProcessDaemon(daemon, f"http://127.0.0.1:{config.port}", token)
        finally:
            stop.set()
            await asyncio.wait_for(server, 10)
            await daemon.aclose()


async def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            await writer.wait_closed()
            return
        await asyncio.sleep(0.02)
    raise RuntimeError(f"in-process daemon did not listen on {port} within {STARTUP_SECONDS} s")
