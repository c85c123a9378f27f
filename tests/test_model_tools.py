"""The model-backed tools on the real daemon, against loopback servers speaking the real protocols
(tests/model_servers.py): Task's subagent loop, and without endpoints their `unavailable`."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.v1.agent_pb2 import SubagentType, TaskArgs
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient, ExecStream
from tests.daemon_process import RunningDaemon, running_daemon
from tests.model_servers import Final, ScriptedModel, ToolCalls, serving_model, url_of
from tests.polling import eventually

API_KEY = "sk-test-" + uuid.uuid4().hex


@pytest.fixture
def model() -> Iterator[tuple[ScriptedModel, str]]:
    scripted = ScriptedModel()
    with serving_model(scripted) as server:
        yield scripted, url_of(server, "/v1")


@pytest.fixture
def model_daemon(
    workspace: Path, tmp_path: Path, model: tuple[ScriptedModel, str]
) -> Iterator[RunningDaemon]:
    _scripted, endpoint = model
    flags = ["--model-endpoint", endpoint, "--model", "main-model", "--fast-model", "fast-model"]
    flags += ["--subagent-max-steps", "4"]
    env = {"EXEC_DAEMON_MODEL_API_KEY": API_KEY}
    with running_daemon(workspace, tmp_path / "state", *flags, env=env) as running:
        yield running


@pytest.fixture
async def model_client(model_daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with model_daemon.client() as connected:
        yield connected


def task_call(prompt: str, **args: Any) -> ToolCall:
    return ToolCall(task_tool_call={"args": TaskArgs(prompt=prompt, **args)})


async def run_task(client: ExecDaemonClient, call: ToolCall, agent_id: str = "main") -> Any:
    """Runs the Task over an ExecStream: (its result, the text its deltas streamed)."""
    async with client.exec_stream() as stream:
        running = await stream.start(call, agent_id=agent_id)
        outcome = await running.wait()
    assert outcome.error is None, outcome.error
    assert outcome.result is not None
    streamed = "".join(delta.task_tool_call_delta.text for delta in outcome.deltas)
    return outcome.result.task_tool_call.result, streamed


async def test_a_task_lists_files_reads_one_and_streams_its_final_message(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient, workspace: Path
) -> None:
    scripted, _ = model
    (workspace / "notes").mkdir()
    (workspace / "notes" / "todo.txt").write_text("buy more tea\n")
    scripted.turns = [
        ToolCalls((("ls", {"path": str(workspace)}),)),
        ToolCalls((("read", {"path": str(workspace / "notes" / "todo.txt")}),)),
        Final("The todo list says: buy more tea."),
    ]
    result, streamed = await run_task(
        model_client, task_call("What is on the todo list?", agent_id="sub-1")
    )
    assert result.WhichOneof("result") == "success", result
    assert result.success.final_message == "The todo list says: buy more tea."
    assert result.success.agent_id == "sub-1"
    assert "→ ls" in streamed and "→ read" in streamed
    assert streamed.endswith("The todo list says: buy more tea.")
    requests = scripted.chat_requests()
    assert [body["model"] for body in requests] == ["main-model"] * 3
    assert all(body["stream"] for body in requests)
    tool_answers = [m["content"] for m in requests[2]["messages"] if m["role"] == "tool"]
    assert "notes" in tool_answers[0], "the ls result reached the model"
    assert "buy more tea" in tool_answers[1], "the file's content reached the model"
    offered = {tool["function"]["name"] for tool in requests[0]["tools"]}
    assert {"ls", "read", "edit", "shell"} <= offered
    assert "task" not in offered, "a subagent starts no subagents"
    assert scripted.authorizations[0] == f"Bearer {API_KEY}"


async def test_a_readonly_task_is_offered_no_write_tool_and_its_edit_is_refused(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient, workspace: Path
) -> None:
    scripted, _ = model
    target = workspace / "keep.txt"
    target.write_text("original\n")
    scripted.turns = [
        ToolCalls((("edit", {"path": str(target), "contents": "overwritten\n"}),)),
        ToolCalls((("shell", {"command": f"echo pwned > {target}"}),)),
        Final("I could not change the file."),
    ]
    result, _ = await run_task(model_client, task_call("Rewrite keep.txt", readonly=True))
    assert result.success.readonly
    assert result.success.final_message == "I could not change the file."
    assert target.read_text() == "original\n"
    requests = scripted.chat_requests()
    offered = {tool["function"]["name"] for tool in requests[0]["tools"]}
    assert "read" in offered and not {"edit", "shell", "delete"} & offered
    answers = [m["content"] for m in requests[2]["messages"] if m["role"] == "tool"]
    assert all("readonly_agent" in answer for answer in answers), answers


async def test_an_explore_task_is_read_only_by_its_type(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient, workspace: Path
) -> None:
    scripted, _ = model
    scripted.turns = [
        ToolCalls((("edit", {"path": str(workspace / "new.txt"), "contents": "x"}),)),
        Final("done"),
    ]
    call = task_call("Look around", subagent_type=SubagentType.SUBAGENT_TYPE_EXPLORE)
    result, _ = await run_task(model_client, call)
    assert result.success.readonly
    assert not (workspace / "new.txt").exists()


async def test_a_resumed_debug_task_sees_its_earlier_context(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient
) -> None:
    scripted, _ = model
    debug = SubagentType.SUBAGENT_TYPE_DEBUG
    scripted.turns = [Final("The crash comes from parse()."), Final("Yes: parse() again.")]
    first, _ = await run_task(
        model_client, task_call("Why does it crash?", subagent_type=debug, agent_id="dbg")
    )
    assert first.success.final_message == "The crash comes from parse()."
    again, _ = await run_task(model_client, task_call("Still parse()?", resume="dbg"))
    assert again.success.resumed and again.success.final_message == "Yes: parse() again."
    messages = scripted.chat_requests()[1]["messages"]
    said = [(m["role"], m["content"]) for m in messages]
    assert said[1:] == [
        ("user", "Why does it crash?"),
        ("assistant", "The crash comes from parse()."),
        ("user", "Still parse()?"),
    ]
    assert "bug" in messages[0]["content"], "the debug type's prompt"


async def test_a_fast_task_runs_on_the_fast_model(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient
) -> None:
    scripted, _ = model
    scripted.turns = [Final("quick")]
    result, _ = await run_task(model_client, task_call("Hurry", model="fast"))
    assert result.success.final_message == "quick"
    assert scripted.chat_requests()[0]["model"] == "fast-model"


async def test_a_model_that_loops_hits_the_step_budget(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient, workspace: Path
) -> None:
    scripted, _ = model
    scripted.turns = [ToolCalls((("ls", {"path": str(workspace)}),))]
    scripted.repeat_last = True
    result, _ = await run_task(model_client, task_call("List forever"))
    assert result.error.code == "resource_exhausted"
    assert "4 model turns" in result.error.message
    assert "--subagent-max-steps" in result.error.message
    assert len(scripted.chat_requests()) == 4


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry))
    return found


async def test_an_aborted_task_ends_its_loop_and_leaves_no_process(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient
) -> None:
    scripted, _ = model
    # sleep's own command line carries the marker: a duration no other process uses.
    marker = f"300.{uuid.uuid4().int % 10**12:012d}"
    command = f"sleep {marker}"
    scripted.turns = [ToolCalls((("shell", {"command": command}),)), Final("never")]
    stream: ExecStream
    async with model_client.exec_stream() as stream:
        running = await stream.start(task_call("Wait a long time"), agent_id="main")
        await eventually(lambda: _processes_with(marker), what="the subagent's shell command")
        await stream.abort(running.id)
        outcome = await running.wait()
    assert outcome.result is not None
    assert outcome.result.task_tool_call.result.WhichOneof("result") == "aborted"
    await eventually(lambda: not _processes_with(marker), what="no process left")
    assert len(scripted.chat_requests()) == 1, "the loop asked the model nothing more"


async def test_a_task_without_an_endpoint_only_registers_the_subagent(
    client: ExecDaemonClient,
) -> None:
    result, streamed = await run_task(client, task_call("Do something", agent_id="plain"))
    assert result.success.agent_id == "plain"
    assert result.success.final_message == "" and streamed == ""
