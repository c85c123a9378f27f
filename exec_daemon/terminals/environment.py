"""Runs `<workspace>/.cursor/environment.json` (its format: exec_daemon/kernel/environment_file.py).

- `install` runs before the agent starts (`exec-daemon install`); it must be safe to run again.
- `user`: install, start and the terminals run as that user (terminals/accounts.py: a daemon
  started as root switches to it; otherwise, or for a user the machine does not know, they are
  not run and the error says why).
- `start` runs when the daemon starts, in a terminal named "start"; then every entry of
  `terminals` (`name`, `command`, `description`) runs in its own tmux session (terminals/tmux.py),
  which the person (web terminal) and the agent (tmux from its shell, and the terminal files)
  both see and type into; when its command ends (or is interrupted with Ctrl-C), a shell takes
  its place in the same pane, below its output.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from exec_daemon.kernel.environment_file import (
    ENVIRONMENT_FILE,
    EnvironmentConfig,
    EnvironmentConfigError,
    load_environment,
)
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.secrets import without_secrets
from exec_daemon.kernel.state import Daemon
from exec_daemon.terminals.accounts import AccountError, account_for
from exec_daemon.terminals.pty import PtyManager
from exec_daemon.terminals.tmux import SharedTerminals

log = logging.getLogger(__name__)

# The terminals start after `start` exited, or after this long if it is still running.
START_WAIT_SECONDS = 60.0


def run_install(workspace: Path) -> int:
    """`exec-daemon install`: runs `install` with its output on this process' stdout/stderr."""
    try:
        config = load_environment(workspace)
    except EnvironmentConfigError as exc:
        print(f"exec-daemon install: {exc}", file=sys.stderr)
        return 2
    if config is None or config.install is None:
        where = workspace / ENVIRONMENT_FILE
        print(f"exec-daemon install: no install command in {where}; nothing to do", file=sys.stderr)
        return 0
    try:
        account = account_for(config.user)
    except AccountError as exc:
        print(f"exec-daemon install: {config.path}: {exc}", file=sys.stderr)
        return 2
    argv = account.argv(config.install) if account else ["bash", "-c", config.install]
    who = f" as {account.name}" if account else ""
    print(f"exec-daemon install: running in {workspace}{who}: {config.install}", file=sys.stderr)
    sys.stderr.flush()
    completed = subprocess.run(
        argv,
        cwd=workspace,
        env=without_secrets(os.environ),
        stdin=subprocess.DEVNULL,
        check=False,
    )
    code = completed.returncode
    return 128 - code if code < 0 else code


async def start_environment(daemon: Daemon) -> None:
    """Runs `start`, then the `terminals`, of the workspace's environment.json (if any)."""
    workspace = Path(daemon.workspace)
    try:
        config = await asyncio.to_thread(load_environment, workspace)
    except EnvironmentConfigError as exc:
        log.error("not running environment.json: %s", exc)
        return
    if config is None:
        return
    _check_ports(config, daemon.config.own_ports())
    try:
        account = await asyncio.to_thread(account_for, config.user)
    except AccountError as exc:
        log.error("not running environment.json's start and terminals: %s: %s", config.path, exc)
        return
    manager = daemon.service(PtyManager)
    if config.start:
        start = shlex.join(account.argv(config.start)) if account else config.start
        await _run_start(manager, start)
    shared = daemon.service(SharedTerminals)
    for index, spec in enumerate(config.terminals, 1):
        try:
            terminal = await shared.create(
                command=spec.command,
                name=spec.name or f"terminal {index}",
                description=spec.description,
                shell_after=True,
                account=account,
            )
        except CodedError as exc:
            log.error("environment.json terminal %r did not start: %s", spec.name, exc.message)
            continue
        log.info("environment.json terminal %r is %s", terminal.name, terminal.id)


def _check_ports(config: EnvironmentConfig, own_ports: dict[int, str]) -> None:
    """`ports` are the project's servers, which the orchestrator exposes (the daemon forwards
    nothing); one the daemon itself listens on could never be served: said at start."""
    for index, entry in enumerate(config.data.get("ports", []), 1):
        port, name = entry["port"], entry.get("name") or f"ports[{index}]"
        if port in own_ports:
            log.error(
                "environment.json port %d (%s) is the exec daemon's own %s port: "
                "a server of the project cannot listen there",
                port,
                name,
                own_ports[port],
            )
        else:
            log.info("environment.json port %d (%s): exposed by the orchestrator", port, name)


async def _run_start(manager: PtyManager, command: str) -> None:
    try:
        terminal = manager.create(command=command, name="start")
    except CodedError as exc:
        log.error("environment.json start did not run: %s", exc.message)
        return
    try:
        code = await asyncio.wait_for(terminal.wait_exit(), START_WAIT_SECONDS)
    except TimeoutError:
        log.warning(
            "environment.json start still runs after %.0fs; starting the terminals anyway",
            START_WAIT_SECONDS,
        )
        return
    if code != 0:
        log.warning("environment.json start exited with code %d (see %s)", code, terminal.log_path)


@contextlib.asynccontextmanager
async def started(daemon: Daemon) -> AsyncIterator[None]:
    """Runs `start_environment` in the background for the duration of the block."""
    task = asyncio.create_task(start_environment(daemon))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
