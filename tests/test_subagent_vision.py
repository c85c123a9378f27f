"""The subagents that see: the computer-use subagent against the daemon's own Xvfb and a media
review subagent given attachments, both against a scripted OpenAI-compatible model on loopback
(tests/model_servers.py) that keeps every request, so each test checks what the model was sent:
the tools it was offered, the images as image parts, the frames of a video with their times."""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from PIL import Image

from agent.v1.agent_pb2 import SubagentType
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon
from tests.interop import daemon_for_module
from tests.model_servers import Final, ScriptedModel, ToolCalls, serving_model, url_of
from tests.test_model_tools import run_task, task_call

pytestmark = pytest.mark.timeout(120)

COMPUTER_USE = SubagentType.SUBAGENT_TYPE_COMPUTER_USE
MEDIA_REVIEW = SubagentType.SUBAGENT_TYPE_MEDIA_REVIEW


@pytest.fixture(scope="module")
def scripted() -> Iterator[tuple[ScriptedModel, str]]:
    model = ScriptedModel()
    with serving_model(model) as server:
        yield model, url_of(server, "/v1")


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, scripted: tuple[ScriptedModel, str]
) -> Iterator[RunningDaemon]:
    flags = ["--model-endpoint", scripted[1], "--model", "vision-model"]
    flags += ["--computer-use-enabled", "--screenshot-delay-ms", "50"]
    with daemon_for_module(tmp_path_factory, *flags) as running:
        yield running


@pytest.fixture
def model(scripted: tuple[ScriptedModel, str]) -> ScriptedModel:
    model, _ = scripted
    model.turns, model.repeat_last = [], False
    model.requests.clear()
    return model


@pytest.fixture
async def client(daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with daemon.client() as connected:
        yield connected


def image_parts(message: dict[str, Any]) -> list[tuple[str, bytes]]:
    """(mime type, bytes) of each image part of a message."""
    found = []
    for part in message["content"] if isinstance(message["content"], list) else ():
        if part["type"] == "image_url":
            header, encoded = part["image_url"]["url"].split(",", 1)
            assert header.startswith("data:") and header.endswith(";base64"), header
            found.append((header[5:-7], base64.b64decode(encoded)))
    return found


def texts(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [part["text"] for part in content if part["type"] == "text"]


async def test_the_computer_use_subagent_sees_the_desktop_only_and_its_screenshots_as_images(
    model: ScriptedModel, client: ExecDaemonClient, daemon: RunningDaemon
) -> None:
    marker = daemon.workspace / "touched-by-computer-use"
    model.turns = [
        ToolCalls((("computer_use", {"actions": [{"screenshot": {}}]}),)),
        ToolCalls((("shell", {"command": f"touch {marker}"}),)),
        Final("The desktop is up."),
    ]
    call = task_call("Look at the desktop", subagent_type=COMPUTER_USE, agent_id="eyes")
    result, _ = await run_task(client, call)
    assert result.success.final_message == "The desktop is up.", result
    requests = model.chat_requests()
    assert [t["function"]["name"] for t in requests[0]["tools"]] == ["computer_use"]
    after_screenshot = requests[1]["messages"]
    tool_answer, images = after_screenshot[-2], after_screenshot[-1]
    assert tool_answer["role"] == "tool"
    assert "screenshot_path" in tool_answer["content"]
    assert len(tool_answer["content"]) < 2000, "the image's bytes are not in the text"
    assert images["role"] == "user"
    [(mime, data)] = image_parts(images)
    assert mime == "image/webp"
    assert Image.open(io.BytesIO(data)).size == (1280, 800)
    refused = [m for m in requests[2]["messages"] if m["role"] == "tool"][-1]
    assert "no tool 'shell'" in refused["content"]
    assert not marker.exists()

    # Stateful: a Task of the same type naming the same agent id goes on from where it stopped.
    model.turns = [Final("Still up.")]
    again, _ = await run_task(
        client, task_call("And now?", subagent_type=COMPUTER_USE, agent_id="eyes")
    )
    assert again.success.resumed and again.success.final_message == "Still up."
    resumed = model.chat_requests()[-1]["messages"]
    assert texts(resumed[1]) == ["Look at the desktop"]
    assert texts(resumed[-1]) == ["And now?"]

    # The control: a general-purpose subagent runs the same command.
    model.turns = [ToolCalls((("shell", {"command": f"touch {marker}"}),)), Final("Touched.")]
    general, _ = await run_task(client, task_call("Touch it"))
    assert general.success.final_message == "Touched."
    assert marker.exists()


async def test_a_non_stateful_type_naming_an_existing_agent_id_is_refused(
    model: ScriptedModel, client: ExecDaemonClient
) -> None:
    model.turns = [Final("Looked.")]
    first, _ = await run_task(client, task_call("Look", agent_id="once"))
    assert first.success.final_message == "Looked."
    again, _ = await run_task(client, task_call("Look again", agent_id="once"))
    assert again.error.code == "already_exists"
