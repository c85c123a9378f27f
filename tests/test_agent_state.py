"""tools/agent_state.py on the real daemon: reflect, switch_mode, truncated (the model-backed
tools are in tests/test_model_tools.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.v1 import agent_pb2 as agent
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from exec_daemon.kernel.agents import MAX_AGENTS, AgentModes
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.spec import EVERYTHING, Effect
from exec_daemon.kernel.state import Daemon
from tests.shared_daemon import *  # noqa: F403 (the daemon, space and client fixtures)
from tools.agent_state import REFLECTIONS_PER_AGENT


@pytest.fixture
def conversation(request: pytest.FixtureRequest) -> str:
    return request.node.name  # the daemon is shared: one conversation per test


async def run(client: ExecDaemonClient, variant: str, args: Any, agent_id: str = "") -> Any:
    call = ToolCall()
    getattr(call, variant).args.CopyFrom(args)
    outcome = await client.run(call, agent_id=agent_id)
    assert outcome.error is None, outcome.error
    assert outcome.result is not None
    return getattr(outcome.result, variant).result


async def switch(client: ExecDaemonClient, agent_id: str, mode: str) -> Any:
    return await run(
        client, "switch_mode_tool_call", agent.SwitchModeArgs(target_mode_id=mode), agent_id
    )


async def test_switch_mode_reports_the_previous_mode_per_agent(
    client: ExecDaemonClient, conversation: str
) -> None:
    first = await switch(client, conversation, "plan")
    assert (first.success.from_mode_id, first.success.to_mode_id) == ("agent", "plan")
    second = await switch(client, conversation, "Ask")
    assert (second.success.from_mode_id, second.success.to_mode_id) == ("plan", "ask")
    other = await switch(client, conversation + "-other", "debug")
    assert other.success.from_mode_id == "agent", "each conversation has its own mode"


async def test_an_unknown_mode_is_refused_and_the_valid_ones_are_named(
    client: ExecDaemonClient, conversation: str
) -> None:
    result = await switch(client, conversation, "yolo")
    assert result.WhichOneof("result") == "error"
    assert result.error.code == "invalid_argument"
    for mode in ("agent", "ask", "plan", "debug"):
        assert mode in result.error.message
    after = await switch(client, conversation, "agent")
    assert after.success.from_mode_id == "agent", "a refused switch changes nothing"


async def test_reflections_are_kept_per_agent_and_bounded(
    client: ExecDaemonClient, conversation: str
) -> None:
    reflection = agent.ReflectArgs(critical_synthesis="the test failed", next_steps="read it")
    first = await run(client, "reflect_tool_call", reflection, conversation)
    assert first.success.reflection_count == 1
    for _ in range(REFLECTIONS_PER_AGENT + 5):
        last = await run(client, "reflect_tool_call", reflection, conversation)
    assert last.success.reflection_count == REFLECTIONS_PER_AGENT
    other = await run(client, "reflect_tool_call", reflection, conversation + "-other")
    assert other.success.reflection_count == 1


async def test_an_empty_reflection_is_an_error(client: ExecDaemonClient) -> None:
    result = await run(client, "reflect_tool_call", agent.ReflectArgs())
    assert result.error.code == "invalid_argument"


async def test_a_truncated_call_names_the_tool_and_runs_nothing(client: ExecDaemonClient) -> None:
    args = agent.TruncatedToolCallArgs(original_tool_name="edit", reason="arguments over 1 MiB")
    result = await run(client, "truncated_tool_call", args)
    assert result.WhichOneof("result") == "error"
    assert result.error.code == "truncated"
    assert "edit" in result.error.message
    assert "arguments over 1 MiB" in result.error.message
    assert "nothing was run" in result.error.message


def test_a_restricting_mode_is_never_forgotten_to_make_room(tmp_path: Path) -> None:
    modes = AgentModes(Daemon(DaemonConfig(auth_token="t", workspace=tmp_path)))
    modes.set_mode("planner", "plan")
    for number in range(MAX_AGENTS + 5):
        modes.set_mode(f"debugger-{number}", "debug")
    assert modes.mode("planner") == "plan" and modes.allows("planner") == Effect.PLAN
    assert modes.mode("debugger-0") == "agent", "the oldest unrestricted ones go first"
    assert modes.mode(f"debugger-{MAX_AGENTS + 4}") == "debug"
    modes.set_mode("planner", "agent")
    assert modes.allows("planner") == EVERYTHING
