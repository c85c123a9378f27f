"""The model-backed tools on the real daemon, against loopback servers speaking the real protocols
(tests/model_servers.py): Task's subagent loop, and without endpoints their `unavailable`."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from PIL import Image

from agent.v1.agent_pb2 import (
    AskQuestionArgs,
    GenerateImageArgs,
    Question,
    QuestionOption,
    StartGrindExecutionArgs,
    StartGrindPlanningArgs,
    SubagentType,
    TaskArgs,
)
from agent.v1.questions_pb2 import AnswerQuestionRequest, ListPendingQuestionsRequest
from agent.v1.tool_call_pb2 import ToolCall
from agent.v1.web_pb2 import WebSearchArgs
from exec_daemon.cli import main
from exec_daemon.client import ExecDaemonClient, ExecStream
from tests.daemon_process import RunningDaemon, free_port, running_daemon
from tests.model_servers import (
    Final,
    ScriptedModel,
    SearchEngine,
    Stall,
    ToolCalls,
    served_model,
    serving_search,
    tiny_png,
    url_of,
)
from tests.polling import eventually

API_KEY = "sk-test-" + uuid.uuid4().hex


@pytest.fixture
def model() -> Iterator[tuple[ScriptedModel, str]]:
    with served_model() as served:
        yield served


SEARCH_RESULTS = [
    {"title": "Tea - Wikipedia", "url": "https://en.wikipedia.org/wiki/Tea", "content": "Tea is"},
    {"title": "How to brew", "url": "https://example.org/brew", "content": "Boil water"},
]


@pytest.fixture
def search() -> Iterator[tuple[SearchEngine, str]]:
    engine = SearchEngine(SEARCH_RESULTS)
    with serving_search(engine) as server:
        yield engine, url_of(server)


@pytest.fixture
def model_daemon(
    workspace: Path,
    tmp_path: Path,
    model: tuple[ScriptedModel, str],
    search: tuple[SearchEngine, str],
) -> Iterator[RunningDaemon]:
    _scripted, endpoint = model
    flags = ["--model-endpoint", endpoint, "--model", "main-model", "--fast-model", "fast-model"]
    flags += ["--subagent-max-steps", "4", "--web-search-endpoint", search[1]]
    flags += ["--generate-image-enabled", "--question-timeout-seconds", "5"]
    flags += ["--secret-redaction-enabled"]
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
    read = next(t["function"] for t in requests[0]["tools"] if t["function"]["name"] == "read")
    assert read["parameters"]["properties"]["path"] == {"type": "string"}
    assert "tool_call_id" not in read["parameters"]["properties"]
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


async def test_a_model_that_loops_hits_the_token_budget(
    model: tuple[ScriptedModel, str], workspace: Path, tmp_path: Path
) -> None:
    scripted, endpoint = model
    scripted.turns = [ToolCalls((("ls", {"path": str(workspace)}),))]
    scripted.repeat_last = True
    # The scripted server reports 120 tokens a turn: the second turn goes over 150.
    flags = ("--model-endpoint", endpoint, "--model", "m", "--subagent-max-tokens", "150")
    with running_daemon(workspace, tmp_path / "s4", *flags) as daemon:
        async with daemon.client() as client:
            result, _ = await run_task(client, task_call("List forever"))
    assert result.error.code == "resource_exhausted"
    assert "240 tokens" in result.error.message and "--subagent-max-tokens" in result.error.message
    assert len(scripted.chat_requests()) == 2


async def test_an_abort_while_the_model_streams_ends_the_request(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient
) -> None:
    scripted, _ = model
    stall = Stall()
    scripted.turns = [stall]
    async with model_client.exec_stream() as stream:
        running = await stream.start(task_call("Think hard"), agent_id="main")
        await eventually(stall.started.is_set, what="the model's answer began")
        await stream.abort(running.id)
        outcome = await running.wait()
    assert outcome.result is not None
    assert outcome.result.task_tool_call.result.WhichOneof("result") == "aborted"
    await eventually(stall.gone.is_set, what="the daemon closed the model request")


async def test_the_model_is_told_of_unknown_tools_and_bad_arguments(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient
) -> None:
    scripted, _ = model
    scripted.turns = [
        ToolCalls((("launch_rockets", {}), ("read", {"path": 5, "offset": "x"}))),
        Final("Sorry."),
    ]
    result, _ = await run_task(model_client, task_call("Go"))
    assert result.success.final_message == "Sorry."
    told = [m["content"] for m in scripted.chat_requests()[1]["messages"] if m["role"] == "tool"]
    assert "no tool 'launch_rockets'" in told[0]
    assert told[1].startswith("error invalid_argument") and "read_tool_call" in told[1]


async def test_a_failing_model_endpoint_is_a_clear_error(
    model: tuple[ScriptedModel, str],
    model_client: ExecDaemonClient,
    workspace: Path,
    tmp_path: Path,
) -> None:
    # The script is empty: the server answers HTTP 500 (retried by the client, then given up).
    failed, _ = await run_task(model_client, task_call("Anything"))
    assert failed.error.code == "request_failed" and "HTTP 500" in failed.error.message
    nobody = f"http://127.0.0.1:{free_port()}/v1"
    flags = ("--model-endpoint", nobody, "--model", "m")
    with running_daemon(workspace, tmp_path / "s5", *flags) as daemon:
        async with daemon.client() as client:
            unreachable, _ = await run_task(client, task_call("Anything"))
    assert unreachable.error.code == "unavailable"
    assert "cannot reach the model endpoint" in unreachable.error.message


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
        call = task_call("Wait a long time", agent_id="waiter")
        running = await stream.start(call, agent_id="main")
        await eventually(lambda: _processes_with(marker), what="the subagent's shell command")
        await stream.abort(running.id)
        outcome = await running.wait()
    assert outcome.result is not None
    assert outcome.result.task_tool_call.result.WhichOneof("result") == "aborted"
    await eventually(lambda: not _processes_with(marker), what="no process left")
    assert len(scripted.chat_requests()) == 1, "the loop asked the model nothing more"
    # Resumed, the conversation is one a provider accepts: the stopped call has its answer.
    scripted.turns = [Final("Resumed.")]
    again, _ = await run_task(model_client, task_call("Go on", resume="waiter"))
    assert again.success.final_message == "Resumed."
    messages = scripted.chat_requests()[-1]["messages"]
    call_id = messages[2]["tool_calls"][0]["id"]
    assert messages[3] == {
        "role": "tool",
        "tool_call_id": call_id,
        "content": "error: not run (stopped)",
    }


async def test_a_task_without_an_endpoint_only_registers_the_subagent(
    client: ExecDaemonClient,
) -> None:
    result, streamed = await run_task(client, task_call("Do something", agent_id="plain"))
    assert result.success.agent_id == "plain"
    assert result.success.final_message == "" and streamed == ""


# --- web_search, generate_image, ask_question ---------------------------------------------------


async def run_tool(client: ExecDaemonClient, variant: str, args: Any) -> Any:
    call = ToolCall()
    getattr(call, variant).args.CopyFrom(args)
    async with client.exec_stream() as stream:
        outcome = await (await stream.start(call, agent_id="main")).wait()
    assert outcome.error is None and outcome.result is not None, outcome.error
    return getattr(outcome.result, variant).result


async def test_web_search_returns_the_endpoints_references(
    search: tuple[SearchEngine, str], model_client: ExecDaemonClient
) -> None:
    engine, _ = search
    result = await run_tool(model_client, "web_search_tool_call", WebSearchArgs(search_term="tea"))
    assert [(r.title, r.url, r.chunk) for r in result.success.references] == [
        ("Tea - Wikipedia", "https://en.wikipedia.org/wiki/Tea", "Tea is"),
        ("How to brew", "https://example.org/brew", "Boil water"),
    ]
    assert engine.queries[-1]["q"] == ["tea"] and engine.queries[-1]["format"] == ["json"]
    empty = await run_tool(model_client, "web_search_tool_call", WebSearchArgs(search_term=" "))
    assert empty.error.code == "invalid_argument"


async def test_web_search_names_a_broken_endpoint(
    workspace: Path, tmp_path: Path, search: tuple[SearchEngine, str]
) -> None:
    engine, url = search
    engine.results = [{"title": "no url here"}]  # not SearXNG's shape
    with running_daemon(workspace, tmp_path / "s2", "--web-search-endpoint", url) as daemon:
        async with daemon.client() as client:
            shapeless = await run_tool(
                client, "web_search_tool_call", WebSearchArgs(search_term="tea")
            )
    assert shapeless.error.code == "request_failed"
    assert "SearXNG" in shapeless.error.message


async def test_generate_image_writes_a_png_to_the_artifacts_folder(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient, model_daemon: RunningDaemon
) -> None:
    scripted, _ = model
    args = GenerateImageArgs(description="a red square", filename="../../etc/evil name.png")
    result = await run_tool(model_client, "generate_image_tool_call", args)
    assert result.WhichOneof("result") == "success", result
    path = Path(result.success.path)
    assert path == model_daemon.state_dir / "artifacts" / "evil-name.png"
    assert file_bytes(path) == scripted.image == result.success.data
    assert result.success.mime_type == "image/png"
    assert scripted.requests[-1]["prompt"] == "a red square"
    assert scripted.requests[-1]["model"] == "gpt-image-1"
    again = await run_tool(model_client, "generate_image_tool_call", args)
    assert Path(again.success.path).name == "evil-name-2.png", "nothing is overwritten"


async def test_generate_image_sends_reference_images_to_the_edits_endpoint(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient, workspace: Path
) -> None:
    scripted, _ = model
    cat = workspace / "cat.png"
    cat.write_bytes(tiny_png(3, 3))
    hat = workspace / "hat.jpg"
    Image.new("RGB", (4, 4), (0, 0, 255)).save(hat, "JPEG")
    args = GenerateImageArgs(
        description="the cat wearing the hat", reference_image_paths=[str(cat), "hat.jpg"]
    )
    result = await run_tool(model_client, "generate_image_tool_call", args)
    assert result.WhichOneof("result") == "success", result
    assert result.success.data == scripted.image
    assert scripted.paths[-1] == "/v1/images/edits"
    edit = scripted.requests[-1]
    assert edit["prompt"] == "the cat wearing the hat" and edit["model"] == "gpt-image-1"
    assert edit["image[]"] == [
        ("cat.png", "image/png", cat.read_bytes()),
        ("hat.jpg", "image/jpeg", hat.read_bytes()),
    ]
    sent = len(scripted.requests)
    (workspace / ".cursorignore").write_text("hat.jpg\n")
    hidden = await run_tool(model_client, "generate_image_tool_call", args)
    assert hidden.error.code == "permission_denied", hidden
    assert "hat.jpg" in hidden.error.message and ".cursorignore" in hidden.error.message
    (workspace / "notes.txt").write_text("words\n")
    for path, code in [("notes.txt", "invalid_argument"), ("none.png", "not_found")]:
        refused = GenerateImageArgs(description="x", reference_image_paths=[str(cat), path])
        failed = await run_tool(model_client, "generate_image_tool_call", refused)
        assert failed.error.code == code and path in failed.error.message, failed
    assert len(scripted.requests) == sent, "nothing refused reached the endpoint"


async def test_generate_image_refuses_what_is_not_an_image(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient
) -> None:
    scripted, _ = model
    scripted.image = b"<html>not an image</html>"
    args = GenerateImageArgs(description="a cat")
    result = await run_tool(model_client, "generate_image_tool_call", args)
    assert result.error.code == "request_failed" and "not an image" in result.error.message


def file_bytes(path: Path) -> bytes:
    return path.read_bytes()


def read_text(path: Path) -> str:
    return path.read_text()


def questions(*prompts: str) -> AskQuestionArgs:
    return AskQuestionArgs(
        title="Setup",
        questions=[
            Question(
                id=f"q{number}",
                prompt=prompt,
                options=[QuestionOption(id="pg", label="Postgres"), QuestionOption(id="my")],
            )
            for number, prompt in enumerate(prompts, 1)
        ],
    )


async def pending_questions(client: ExecDaemonClient) -> list[Any]:
    listed = await client.control.list_pending_questions(
        ListPendingQuestionsRequest(), headers=client.headers
    )
    return list(listed.questions)


async def wait_for_pending(client: ExecDaemonClient, count: int, seconds: float = 10) -> list[Any]:
    """The pending questions once there are `count` of them (polled until a deadline)."""
    deadline = time.monotonic() + seconds
    while len(listed := await pending_questions(client)) != count:
        assert time.monotonic() < deadline, f"{count} pending questions never appeared: {listed}"
        await asyncio.sleep(0.02)
    return listed


async def test_ask_question_holds_until_every_question_is_answered(
    model_client: ExecDaemonClient,
) -> None:
    control = model_client.control
    headers = model_client.headers
    call = ToolCall(ask_question_tool_call={"args": questions("Which DB?", "Which port?")})
    async with model_client.exec_stream() as stream:
        running = await stream.start(call, agent_id="asker")
        listed = await wait_for_pending(model_client, 2)
        first, second = sorted(listed, key=lambda q: q.asked_id)
        assert (first.asked_id, first.prompt, first.agent_id, first.title) == (
            "q1",
            "Which DB?",
            "asker",
            "Setup",
        )
        with pytest.raises(ConnectError) as unknown:
            await control.answer_question(
                AnswerQuestionRequest(question_id=first.question_id, option_ids=["oracle"]),
                headers=headers,
            )
        assert unknown.value.code == Code.INVALID_ARGUMENT
        answered = await control.answer_question(
            AnswerQuestionRequest(question_id=first.question_id, option_ids=["pg"]),
            headers=headers,
        )
        assert not answered.call_answered
        assert not running.outcome.done, "the call waits for the second answer"
        answered = await control.answer_question(
            AnswerQuestionRequest(question_id=second.question_id, answer="5432"),
            headers=headers,
        )
        assert answered.call_answered
        outcome = await running.wait()
    assert outcome.result is not None
    answers = outcome.result.ask_question_tool_call.result.success.answers
    assert [(a.question_id, list(a.selected_option_ids), a.free_text) for a in answers] == [
        ("q1", ["pg"], ""),
        ("q2", [], "5432"),
    ]
    assert await pending_questions(model_client) == []
    with pytest.raises(ConnectError) as gone:
        await control.answer_question(
            AnswerQuestionRequest(question_id=first.question_id, answer="late"), headers=headers
        )
    assert gone.value.code == Code.NOT_FOUND


async def test_an_unanswered_question_times_out_and_an_aborted_one_is_withdrawn(
    model_client: ExecDaemonClient,
) -> None:
    call = ToolCall(ask_question_tool_call={"args": questions("Anyone there?")})
    async with model_client.exec_stream() as stream:
        aborted = await stream.start(call, agent_id="asker")
        await wait_for_pending(model_client, 1)
        await stream.abort(aborted.id)
        outcome = await aborted.wait()
        assert outcome.result is not None
        assert outcome.result.ask_question_tool_call.result.WhichOneof("result") == "aborted"
        assert await pending_questions(model_client) == []
        timed_out = await (await stream.start(call, agent_id="asker")).wait()
    assert timed_out.result is not None
    error = timed_out.result.ask_question_tool_call.result.error
    assert error.code == "timeout" and "--question-timeout-seconds" in error.message
    assert error.message.startswith("no answer to q1 within 5 s")


# --- without endpoints ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "args", "flag"),
    [
        ("web_search_tool_call", WebSearchArgs(search_term="tea"), "--web-search-endpoint"),
        (
            "generate_image_tool_call",
            GenerateImageArgs(description="a cat"),
            "--generate-image-enabled",
        ),
        (
            "start_grind_planning_tool_call",
            StartGrindPlanningArgs(goal="fix all bugs"),
            "--model-endpoint",
        ),
        (
            "start_grind_execution_tool_call",
            StartGrindExecutionArgs(plan_id="p1"),
            "--model-endpoint",
        ),
    ],
)
async def test_without_an_endpoint_each_tool_answers_unavailable_naming_its_flag(
    client: ExecDaemonClient, variant: str, args: Any, flag: str
) -> None:
    result = await run_tool(client, variant, args)
    assert result.error.code == "unavailable"
    assert flag in result.error.message


async def test_image_generation_enabled_without_an_endpoint_names_the_endpoint_flag(
    workspace: Path, tmp_path: Path
) -> None:
    with running_daemon(workspace, tmp_path / "s3", "--generate-image-enabled") as daemon:
        async with daemon.client() as client:
            result = await run_tool(
                client, "generate_image_tool_call", GenerateImageArgs(description="a cat")
            )
    assert result.error.code == "unavailable" and "--model-endpoint" in result.error.message


# --- custom subagents, the key, grind ------------------------------------------------------------


def write_file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def test_a_custom_subagent_takes_its_prompt_and_readonly_from_its_definition(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient, workspace: Path
) -> None:
    scripted, _ = model
    definition = "---\nname: reviewer\nreadonly: true\n---\nYou review code for typos.\n"
    write_file(workspace / ".cursor" / "agents" / "reviewer.md", definition)
    scripted.turns = [Final("No typos.")]
    custom = SubagentType.SUBAGENT_TYPE_CUSTOM
    call = task_call("Review", subagent_type=custom, custom_subagent_name="reviewer")
    result, _ = await run_task(model_client, call)
    assert result.success.readonly and result.success.final_message == "No typos."
    system = scripted.chat_requests()[0]["messages"][0]["content"]
    assert "You review code for typos." in system
    offered = {tool["function"]["name"] for tool in scripted.chat_requests()[0]["tools"]}
    assert "read" in offered and "edit" not in offered
    missing, _ = await run_task(
        model_client, task_call("Review", subagent_type=custom, custom_subagent_name="nobody")
    )
    assert missing.error.code == "not_found" and ".cursor/agents/nobody.md" in missing.error.message
    scripted.turns = [Final("Still no typos.")]
    resumed, _ = await run_task(model_client, task_call("Again", resume=result.success.agent_id))
    assert resumed.success.final_message == "Still no typos." and resumed.success.readonly
    offered = {tool["function"]["name"] for tool in scripted.chat_requests()[-1]["tools"]}
    assert "edit" not in offered, "resumed as the custom type it was started as"
    escaping, _ = await run_task(
        model_client, task_call("Review", subagent_type=custom, custom_subagent_name="../../x")
    )
    assert escaping.error.code == "invalid_argument"


async def test_the_model_key_reaches_only_the_endpoint(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient, model_daemon: RunningDaemon
) -> None:
    scripted, _ = model
    scripted.turns = [
        ToolCalls((("shell", {"command": "env; cat /proc/$PPID/environ | tr '\\0' '\\n'"}),)),
        # A model that knows the key (it is in its own requests' header) cannot read it back.
        ToolCalls((("shell", {"command": f"echo {API_KEY}"}),)),
        Final("done"),
    ]
    result, _ = await run_task(model_client, task_call("Show the environment"))
    assert result.success.final_message == "done"
    shown = [m["content"] for m in scripted.chat_requests()[1]["messages"] if m["role"] == "tool"]
    assert "PATH=" in shown[0], "the command ran"
    assert API_KEY not in shown[0]
    echoed = [m["content"] for m in scripted.chat_requests()[2]["messages"] if m["role"] == "tool"]
    assert API_KEY not in echoed[1] and "[REDACTED]" in echoed[1]
    assert all(auth == f"Bearer {API_KEY}" for auth in scripted.authorizations)
    assert API_KEY not in model_daemon.log()


async def test_grind_plans_a_goal_then_runs_each_step_as_a_subagent(
    model: tuple[ScriptedModel, str],
    model_client: ExecDaemonClient,
    model_daemon: RunningDaemon,
    workspace: Path,
) -> None:
    scripted, _ = model
    plan = {
        "name": "Tea plan",
        "overview": "Make tea.",
        "plan": "Boil, then steep.",
        "todos": [
            {"id": "boil", "content": "Write boil.txt"},
            {"id": "steep", "content": "Write steep.txt"},
        ],
    }
    scripted.turns = [
        # The planner is in plan mode: writing anything but its plan is refused.
        ToolCalls((("edit", {"path": str(workspace / "early.txt"), "contents": "x"}),)),
        ToolCalls((("create_plan", plan),)),
        Final("Tea plan"),
    ]
    planned = await run_tool(
        model_client, "start_grind_planning_tool_call", StartGrindPlanningArgs(goal="Make tea")
    )
    assert planned.success.plan_id == "tea-plan", planned
    assert "- [ ] Write boil.txt <!-- id: boil -->" in (
        read_text(workspace / ".cursor" / "plans" / "tea-plan.md")
    )
    assert not (workspace / "early.txt").exists()
    planner_tools = {tool["function"]["name"] for tool in scripted.chat_requests()[0]["tools"]}
    assert "create_plan" in planner_tools and not {"edit", "shell"} & planner_tools
    refused = [m["content"] for m in scripted.chat_requests()[1]["messages"] if m["role"] == "tool"]
    assert "agent_mode" in refused[0]

    scripted.turns = [
        ToolCalls((("edit", {"path": str(workspace / "boil.txt"), "contents": "boiled\n"}),)),
        Final("Boiled."),
        ToolCalls((("edit", {"path": str(workspace / "steep.txt"), "contents": "steeped\n"}),)),
        Final("Steeped."),
    ]
    call = ToolCall(start_grind_execution_tool_call={"args": {"plan_id": "tea-plan"}})
    async with model_client.exec_stream() as stream:
        outcome = await (await stream.start(call, agent_id="main")).wait()
    assert outcome.result is not None
    executed = outcome.result.start_grind_execution_tool_call.result
    execution_id = executed.success.execution_id
    assert execution_id.startswith("tea-plan-")
    assert read_text(workspace / "boil.txt") == "boiled\n"
    assert read_text(workspace / "steep.txt") == "steeped\n"
    streamed = {delta.task_tool_call_delta.agent_id for delta in outcome.deltas}
    assert streamed == {f"grind-{execution_id}-1", f"grind-{execution_id}-2"}
    report = json.loads(
        read_text(model_daemon.state_dir / "artifacts" / f"grind-{execution_id}.json")
    )
    assert [(step["step"], step["answer"]) for step in report["steps"]] == [
        ("boil", "Boiled."),
        ("steep", "Steeped."),
    ]
    step_prompt = scripted.chat_requests()[-1]["messages"][1]["content"]
    assert "step 2 of 2" in step_prompt and "tea-plan.md" in step_prompt

    missing = await run_tool(
        model_client, "start_grind_execution_tool_call", StartGrindExecutionArgs(plan_id="nope")
    )
    assert missing.error.code == "not_found"
    bad = await run_tool(
        model_client, "start_grind_execution_tool_call", StartGrindExecutionArgs(plan_id="../x")
    )
    assert bad.error.code == "invalid_argument"


async def test_grind_ticks_each_step_as_it_completes_and_a_rerun_skips_the_done_ones(
    model: tuple[ScriptedModel, str], model_client: ExecDaemonClient, workspace: Path
) -> None:
    scripted, _ = model
    plan = workspace / ".cursor" / "plans" / "chores.md"
    todos = (
        "- [ ] Write a.txt <!-- id: a -->\n- [ ] Write b.txt <!-- id: b -->\n- [ ] Write c.txt\n"
    )
    write_file(plan, "# Chores\n\n## Todos\n\n" + todos + "\nNotes stay.\n")
    chores = StartGrindExecutionArgs(plan_id="chores")
    # Step a is done; step b's model answers HTTP 500 (the script is used up).
    scripted.turns = [
        ToolCalls((("edit", {"path": str(workspace / "a.txt"), "contents": "a\n"}),)),
        Final("A done."),
    ]
    first = await run_tool(model_client, "start_grind_execution_tool_call", chores)
    assert first.error.code == "request_failed" and "step 2 (b: Write b.txt)" in first.error.message
    assert read_text(plan) == (
        "# Chores\n\n## Todos\n\n- [x] Write a.txt <!-- id: a -->\n"
        "- [~] Write b.txt <!-- id: b -->\n- [ ] Write c.txt\n\nNotes stay.\n"
    )
    before = len(scripted.chat_requests())
    scripted.turns = [Final("B done."), Final("C done.")]
    second = await run_tool(model_client, "start_grind_execution_tool_call", chores)
    assert second.WhichOneof("result") == "success", second
    prompts = [body["messages"][1]["content"] for body in scripted.chat_requests()[before:]]
    assert len(prompts) == 2
    assert prompts[0].endswith("Write b.txt") and "step 1 of 2" in prompts[0]
    assert prompts[1].endswith("Write c.txt")
    assert read_text(plan).count("- [x] ") == 3 and "Notes stay." in read_text(plan)
    third = await run_tool(model_client, "start_grind_execution_tool_call", chores)
    assert third.error.code == "failed_precondition" and "no open step" in third.error.message


async def test_two_runs_of_one_plan_at_once_run_each_step_exactly_once(
    model: tuple[ScriptedModel, str],
    model_client: ExecDaemonClient,
    model_daemon: RunningDaemon,
    workspace: Path,
) -> None:
    scripted, _ = model
    plan = workspace / ".cursor" / "plans" / "shared.md"
    todos = "- [ ] Step a <!-- id: a -->\n- [ ] Step b <!-- id: b -->\n- [ ] Step c\n"
    write_file(plan, "# Shared\n\n## Todos\n\n" + todos)
    go = workspace / "go"
    # The first run's step a waits (a shell command) until the second run has ended.
    wait = f"until [ -e {go} ]; do sleep 0.05; done; echo went"
    scripted.turns = [
        ToolCalls((("shell", {"command": wait}),)),
        Final("B done."),
        Final("C done."),
        Final("A done."),
    ]
    shared = StartGrindExecutionArgs(plan_id="shared")
    first = asyncio.ensure_future(run_tool(model_client, "start_grind_execution_tool_call", shared))
    await eventually(lambda: len(scripted.chat_requests()) == 1, 30, "the first run's step a")
    second = await run_tool(model_client, "start_grind_execution_tool_call", shared)
    assert second.WhichOneof("result") == "success", second
    assert not first.done()
    go.write_text("")
    first_result = await asyncio.wait_for(first, 60)
    assert first_result.WhichOneof("result") == "success", first_result
    # Each subagent's first request holds the system prompt and its step's prompt only.
    started = [
        body["messages"][1]["content"].rsplit("\n", 1)[-1]
        for body in scripted.chat_requests()
        if len(body["messages"]) == 2
    ]
    assert sorted(started) == ["Step a", "Step b", "Step c"], started
    assert read_text(plan).count("- [x] ") == 3, read_text(plan)
    artifacts = model_daemon.state_dir / "artifacts"
    reports = [
        json.loads(read_text(artifacts / f"grind-{result.success.execution_id}.json"))
        for result in (first_result, second)
    ]
    ran = [step["step"] for report in reports for step in report["steps"] if "agent_id" in step]
    assert sorted(ran) == ["a", "b", "todo-3"], reports
    assert [step.get("skipped") for step in reports[1]["steps"]] == [
        "another run of the plan is doing it",
        None,
        None,
    ]


@pytest.mark.parametrize("flag", ["--model-endpoint", "--web-search-endpoint"])
@pytest.mark.parametrize("value", ["ftp://models.example", "localhost:8080", "http://"])
def test_an_endpoint_flag_must_be_an_http_url(flag: str, value: str) -> None:
    result = CliRunner().invoke(main, ["serve", flag, value, "--auth-token", "t" * 32])
    assert result.exit_code == 2
    assert "is not an http:// or https:// URL" in result.output
