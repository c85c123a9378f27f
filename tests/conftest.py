from __future__ import annotations

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
