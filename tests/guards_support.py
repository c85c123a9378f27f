"""Helpers for the guard tests (permissions, hooks, redaction).

Two ways to run calls through the real guard middleware:
- the real daemon subprocess (`running_daemon`) and the real tools, for what a client sees;
- `GuardedDispatcher`: the real Dispatcher and guards in the test's process, around handlers the
  test chooses (e.g. a shell that streams what real bash prints one byte per delta), for what
  a tool not built yet would do.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.v1.shell_pb2 import ShellArgs, ShellResult, ShellToolCallDelta
from agent.v1.tool_call_pb2 import ToolCall, ToolCallDelta
from exec_daemon.client import CallOutcome
from exec_daemon.guards import guard_middlewares
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.context import CallContext, Handler
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.state import Daemon
from exec_daemon.rpc.dispatch import Dispatcher
from exec_daemon.server import new_daemon
from tests.inprocess import stand_in_specs

PYTHON = sys.executable


def call(tool: str, **args: Any) -> ToolCall:
    """ToolCall(tool_call={"args": args}), e.g. call("read_tool_call", path="a.txt")."""
    return ToolCall(**{tool: {"args": args}})


def shell(command: str, **args: Any) -> ToolCall:
    return call("shell_tool_call", command=command, **args)


def result_of(outcome: CallOutcome) -> Any:
    """The tool's result message of an answered call (fails on an ExecError)."""
    assert outcome.error is None, outcome.error
    assert outcome.result is not None
    variant = outcome.result.WhichOneof("tool")
    assert variant is not None
    return getattr(outcome.result, variant).result


def case(result: Any) -> str:
    return str(result.WhichOneof("result"))


def write_config(path: Path, content: Any) -> None:
    """Writes a JSON config file atomically (a new inode, so the daemon sees the change)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = content if isinstance(content, str) else json.dumps(content)
    handle, temporary = tempfile.mkstemp(dir=path.parent)
    with os.fdopen(handle, "w") as file:
        file.write(text)
    os.replace(temporary, path)


def hook_script(folder: Path, name: str, body: str) -> str:
    """A Python hook script in `folder`; returns the command that runs it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text("import json, os, sys, time\n" + body)
    return f"{PYTHON} {path}"


def shell_output(deltas: list[ToolCallDelta], stream: str = "stdout") -> str:
    return "".join(
        getattr(d.shell_tool_call_delta, stream)
        for d in deltas
        if d.WhichOneof("delta") == "shell_tool_call_delta"
        and d.shell_tool_call_delta.WhichOneof("delta") == stream
    )


async def bash_one_byte_per_delta(args: ShellArgs, ctx: CallContext) -> ShellResult:
    """A stand-in shell handler: real bash, every byte it prints sent as its own delta."""
    process = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        args.command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ctx.daemon.workspace,
        env=ctx.daemon.env.snapshot(),
    )
    collected = {"stdout": bytearray(), "stderr": bytearray()}

    async def pump(stream: asyncio.StreamReader | None, name: str) -> None:
        assert stream is not None
        while byte := await stream.read(1):
            collected[name] += byte
            delta = ShellToolCallDelta(**{name: byte.decode("latin-1")})
            await ctx.emit(ToolCallDelta(shell_tool_call_delta=delta))

    await asyncio.gather(pump(process.stdout, "stdout"), pump(process.stderr, "stderr"))
    code = await process.wait()
    outcome = "success" if code == 0 else "failure"
    return ShellResult(
        **{
            outcome: {
                "command": args.command,
                "exit_code": code,
                "stdout": collected["stdout"].decode(),
                "stderr": collected["stderr"].decode(),
            }
        }
    )


async def fails_with_message(args: Any, ctx: CallContext) -> Any:
    raise CodedError(ErrorCode.INVALID_ARGUMENT, f"cannot use {ctx.daemon.env.get('SECRET_A')}")


@dataclass
class GuardedDispatcher:
    """The real Dispatcher with the real guards, run in the test's process."""

    daemon: Daemon
    dispatcher: Dispatcher
    deltas: list[ToolCallDelta] = field(default_factory=list)

    @classmethod
    def create(
        cls,
        workspace: Path,
        handlers: Mapping[str, Handler],
        env: Mapping[str, str] | None = None,
        **config: Any,
    ) -> GuardedDispatcher:
        daemon = new_daemon(DaemonConfig(auth_token="t", workspace=workspace, **config))
        if env:
            daemon.env.update(dict(env))
        dispatcher = Dispatcher(daemon, stand_in_specs(handlers), guard_middlewares(daemon))
        return cls(daemon, dispatcher)

    async def run(self, tool_call: ToolCall, agent_id: str = "", run_mode: int = 0) -> ToolCall:
        self.deltas = []

        async def collect(delta: ToolCallDelta) -> None:
            self.deltas.append(delta)

        ctx = CallContext(daemon=self.daemon, agent_id=agent_id, emit=collect, run_mode=run_mode)
        return await self.dispatcher.run(tool_call, replace(ctx))
