"""Fixtures for test modules that share one daemon: `from tests.shared_daemon import *`.

Starting a daemon costs ~0.8 s, so the workspace tool tests run against one per module, each
test in its own directory of that workspace (`space`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon
from tests.interop import daemon_for_module
from tests.workspace_support import make_space

__all__ = ["client", "daemon", "space"]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with daemon_for_module(tmp_path_factory) as running:
        yield running


@pytest.fixture
def space(daemon: RunningDaemon, request: pytest.FixtureRequest) -> Path:
    return make_space(daemon, request)


@pytest.fixture
async def client(daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with daemon.client() as connected:
        yield connected
