"""The subagents that see: the computer-use subagent against the daemon's own Xvfb and a media
review subagent given attachments, both against a scripted OpenAI-compatible model on loopback
(tests/model_servers.py) that keeps every request, so each test checks what the model was sent:
the tools it was offered, the images as image parts, the frames of a video with their times."""

from __future__ import annotations

import base64
import io
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from agent.v1.agent_pb2 import SubagentType
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon
from tests.interop import model_daemon_for_module
from tests.model_servers import Final, ScriptedModel, ToolCalls
from tests.test_model_tools import run_task, task_call

pytestmark = pytest.mark.timeout(120)

COMPUTER_USE = SubagentType.SUBAGENT_TYPE_COMPUTER_USE
MEDIA_REVIEW = SubagentType.SUBAGENT_TYPE_MEDIA_REVIEW


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, scripted: tuple[ScriptedModel, str]
) -> Iterator[RunningDaemon]:
    flags = ["--computer-use-enabled", "--screenshot-delay-ms", "50"]
    with model_daemon_for_module(tmp_path_factory, scripted[1], *flags) as running:
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


def make_video(path: Path) -> None:
    """Two seconds: the first red, the second blue (320x240, 10 fps)."""
    colors = ["-f", "lavfi", "-i", "color=c=red:s=320x240:r=10:d=1"]
    colors += ["-f", "lavfi", "-i", "color=c=blue:s=320x240:r=10:d=1"]
    joined = ["-filter_complex", "[0:v][1:v]concat=n=2:v=1[v]", "-map", "[v]"]
    encoded = ["-c:v", "libx264", "-pix_fmt", "yuv420p", str(path)]
    subprocess.run(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *colors, *joined, *encoded],
        check=True,
        timeout=60,
    )


def dominant(data: bytes) -> str:
    red, _green, blue = Image.open(io.BytesIO(data)).convert("RGB").getpixel((10, 10))  # type: ignore[misc]
    return "red" if red > blue else "blue"


async def test_attachments_reach_the_model_as_an_image_and_timed_frames_of_a_video(
    model: ScriptedModel, client: ExecDaemonClient, daemon: RunningDaemon
) -> None:
    media = daemon.workspace / "media"
    media.mkdir(exist_ok=True)
    picture = media / "shot.png"
    Image.new("RGB", (64, 48), (0, 200, 0)).save(picture)
    video = media / "clip.mp4"
    make_video(video)
    model.turns = [Final("A green picture; a clip that turns from red to blue.")]
    call = task_call(
        "What do these show?", subagent_type=MEDIA_REVIEW, attachments=[str(picture), str(video)]
    )
    result, _ = await run_task(client, call)
    assert result.success.final_message.startswith("A green picture"), result
    asked = model.chat_requests()[0]["messages"][1]
    assert asked["role"] == "user"
    shown = texts(asked)
    assert shown[0] == "What do these show?"
    images = image_parts(asked)
    assert images[0] == ("image/png", picture.read_bytes())
    frames = images[1:]
    assert len(frames) == 8 and all(mime == "image/jpeg" for mime, _ in frames)
    assert [dominant(data) for _, data in frames] == ["red"] * 4 + ["blue"] * 4
    captions = [text for text in shown if "frame" in text]
    assert captions[0].endswith("frame 1 of 8 at 00:00.125 (of 00:02.000):"), captions
    assert "at 00:01.875" in captions[-1] and str(video) in captions[-1]


async def test_an_attachment_the_agent_may_not_read_is_a_typed_error(
    model: ScriptedModel, client: ExecDaemonClient, daemon: RunningDaemon
) -> None:
    hidden = daemon.workspace / "private"
    hidden.mkdir(exist_ok=True)
    picture = hidden / "secret.png"
    Image.new("RGB", (8, 8), (0, 0, 0)).save(picture)
    # The control: readable, it reaches the model.
    model.turns = [Final("Black.")]
    seen, _ = await run_task(
        client, task_call("Look", subagent_type=MEDIA_REVIEW, attachments=[str(picture)])
    )
    assert seen.success.final_message == "Black."
    assert image_parts(model.chat_requests()[-1]["messages"][1])
    (daemon.workspace / ".cursorignore").write_text("private/\n")
    try:
        refused, _ = await run_task(
            client, task_call("Look", subagent_type=MEDIA_REVIEW, attachments=[str(picture)])
        )
        # A symlink spelled elsewhere is judged by what it resolves to.
        alias = daemon.workspace / "alias.png"
        alias.symlink_to(picture)
        aliased, _ = await run_task(
            client, task_call("Look", subagent_type=MEDIA_REVIEW, attachments=[str(alias)])
        )
    finally:
        (daemon.workspace / ".cursorignore").unlink()
    assert refused.error.code == "permission_denied", refused
    assert str(picture) in refused.error.message and ".cursorignore" in refused.error.message
    assert aliased.error.code == "permission_denied", aliased
    text = daemon.workspace / "notes.txt"
    text.write_text("just words\n")
    for path, code in [(text, "invalid_argument"), (hidden / "none.png", "not_found")]:
        failed, _ = await run_task(
            client, task_call("Look", subagent_type=MEDIA_REVIEW, attachments=[str(path)])
        )
        assert failed.error.code == code, failed
        assert str(path) in failed.error.message
    assert len(model.chat_requests()) == 1, "no refused Task reached the model"
