from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon, running_daemon
from tests.model_servers import ScriptedModel, served_model


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def daemon(workspace: Path, tmp_path: Path) -> Iterator[RunningDaemon]:
    """The real daemon, as a subprocess serving `workspace` on free loopback ports."""
    with running_daemon(workspace, tmp_path / "state") as running:
        yield running


@pytest.fixture
async def client(daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with daemon.client() as connected:
        yield connected


@pytest.fixture(scope="module")
def scripted() -> Iterator[tuple[ScriptedModel, str]]:
    """One ScriptedModel on loopback for a module's tests, and its base URL (a daemon's
    --model-endpoint)."""
    with served_model() as served:
        yield served


@pytest.fixture
def escape_target() -> Iterator[Path]:
    """A file in the daemon's home, outside every writable area of the sandbox."""
    target = Path.home() / f".exec-daemon-escape-{secrets.token_hex(4)}"
    yield target
    target.unlink(missing_ok=True)


@pytest.fixture
async def sandboxed_client(tmp_path: Path) -> AsyncIterator[tuple[RunningDaemon, ExecDaemonClient]]:
    """A daemon of its own with --sandbox-enabled on an empty workspace, and a client of it."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with running_daemon(workspace, tmp_path / "state", "--sandbox-enabled") as running:
        async with running.client() as connected:
            yield running, connected
