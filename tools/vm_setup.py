"""setup_vm_environment_tool_call (SetupVmEnvironment): the install script of future VM sessions.

The agent's `update_script` becomes the `install` key of `<workspace>/.cursor/environment.json`
(other keys kept), which `exec-daemon install` runs when the next VM session starts.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from agent.v1.agent_pb2 import (
    SetupVmEnvironmentArgs,
    SetupVmEnvironmentResult,
    SetupVmEnvironmentSuccess,
)
from agent.v1.common_pb2 import ToolError
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.environment_file import EnvironmentConfigError, store_install_command
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, Subject, ToolSpec

log = logging.getLogger(__name__)


def _error(code: str, message: str) -> SetupVmEnvironmentResult:
    return SetupVmEnvironmentResult(error=ToolError(code=code, message=message))


async def setup_vm_environment(
    args: SetupVmEnvironmentArgs, ctx: CallContext
) -> SetupVmEnvironmentResult:
    command = args.install_command.strip()
    if not command:
        return _error("invalid_argument", "install_command (the update_script) is empty")
    workspace = Path(ctx.daemon.workspace)
    try:
        path = await asyncio.to_thread(store_install_command, workspace, command)
    except EnvironmentConfigError as exc:
        return _error("invalid_config", str(exc))
    except OSError as exc:
        log.warning("storing the install command failed: %s", exc)
        return _error("io_error", f"could not write .cursor/environment.json: {exc.strerror}")
    return SetupVmEnvironmentResult(
        success=SetupVmEnvironmentSuccess(config_path=str(path), install_command=command)
    )


SETUP_VM_ENVIRONMENT = ToolSpec(
    "setup_vm_environment_tool_call",
    setup_vm_environment,
    # It writes .cursor/environment.json (a path the daemon chooses, protected from the file
    # tools) whose install command the VM runs at its next set-up.
    effects=Effect.WORKSPACE | Effect.MACHINE,
    run_mode=RunModeRule.NEEDS_APPROVAL,
    hooks=Hooks("SetupVmEnvironment"),
    subject=lambda args: Subject(command=args.install_command),
)
