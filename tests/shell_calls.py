"""Shell calls as the tests send them to a running daemon: the ToolCall of one command, its
result, and what it printed."""

from __future__ import annotations

from typing import Any

from agent.v1.shell_pb2 import ShellArgs, ShellResult, ShellToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient


def shell_call(command: str, **args: Any) -> ToolCall:
    """The ToolCall running `command` (`args`: the other ShellArgs fields)."""
    return ToolCall(shell_tool_call=ShellToolCall(args=ShellArgs(command=command, **args)))


async def shell(
    client: ExecDaemonClient, command: str, agent: str = "", **args: Any
) -> ShellResult:
    """The result of `command` run as a call of `agent` (fails on an ExecError)."""
    outcome = await client.run(shell_call(command, **args), agent_id=agent)
    assert outcome.result is not None, outcome.error
    return outcome.result.shell_tool_call.result


def printed(result: ShellResult, cases: tuple[str, ...] = ("success", "failure")) -> str:
    """What the command printed, stdout then stderr; its result's case must be one of `cases`."""
    case = result.WhichOneof("result")
    assert case in cases, result
    part: Any = getattr(result, case)
    return str(part.stdout) + str(part.stderr)
