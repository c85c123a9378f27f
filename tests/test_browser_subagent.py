"""The browserUse subagent (--browser-enabled) driving a real headless Chromium (Debian
`chromium`, --chrome-executable-path) through the DevTools protocol, against a page served on
loopback, with a scripted OpenAI-compatible model (tests/model_servers.py) that keeps what it
was sent: the browser tools offered, the page's text and accessibility tree, the screenshot as
an image part."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from agent.v1.agent_pb2 import SubagentType
from tests.daemon_process import running_daemon
from tests.loopback_http import serving_http
from tests.model_servers import Final, ScriptedModel, ToolCalls, served_model, url_of
from tests.polling import eventually
from tests.test_model_tools import _processes_with, run_task, task_call

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium: scripts/setup"),
]
BROWSER_USE = SubagentType.SUBAGENT_TYPE_BROWSER_USE

PAGE = b"""<!doctype html><html><head><title>Greeter</title></head><body>
<h1>Greeter</h1>
<input aria-label="Your name" id="who">
<button onclick="document.getElementById('out').textContent =
  'Hello, ' + document.getElementById('who').value + '!'">Greet</button>
<p id="out"></p>
</body></html>"""


def page_handler(seen: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

    return Handler


@pytest.fixture
def model() -> Iterator[tuple[ScriptedModel, str]]:
    with served_model() as served:
        yield served


async def test_the_browser_subagent_fills_a_form_reads_the_page_and_sees_a_screenshot(
    model: tuple[ScriptedModel, str], workspace: Path, tmp_path: Path
) -> None:
    scripted, endpoint = model
    seen: list[str] = []
    with serving_http(page_handler(seen)) as server:
        page = url_of(server, "/greeter")
        scripted.turns = [
            ToolCalls((("browser_navigate", {"url": page}),)),
            ToolCalls((("browser_type", {"name": "Your name", "text": "Ada"}),)),
            ToolCalls((("browser_click", {"name": "Greet"}),)),
            ToolCalls((("browser_read", {}),)),
            ToolCalls((("browser_screenshot", {}),)),
            ToolCalls((("browser_navigate", {"url": "file:///etc/passwd"}),)),
            ToolCalls((("shell", {"command": "true"}),)),
            Final("It says Hello, Ada!"),
        ]
        flags = ["--model-endpoint", endpoint, "--model", "m", "--subagent-max-steps", "10"]
        flags += ["--browser-enabled", "--chrome-executable-path", str(CHROMIUM)]
        with running_daemon(workspace, tmp_path / "state", *flags) as daemon:
            async with daemon.client() as client:
                result, _ = await run_task(
                    client, task_call("Greet Ada", subagent_type=BROWSER_USE, agent_id="web")
                )
            assert result.success.final_message == "It says Hello, Ada!", result
            assert _processes_with("exec-daemon-browser-"), "the browser runs"
        await eventually(
            lambda: not _processes_with("exec-daemon-browser-"), what="the browser ended"
        )
    assert seen[0] == "/greeter"
    requests = scripted.chat_requests()
    offered = {tool["function"]["name"] for tool in requests[0]["tools"]}
    assert offered == {
        "browser_navigate",
        "browser_click",
        "browser_type",
        "browser_read",
        "browser_screenshot",
    }
    answers = [m["content"] for m in requests[-1]["messages"] if m["role"] == "tool"]
    assert "title: 'Greeter'" in answers[0]
    read = answers[3]
    assert "Hello, Ada!" in read and f"url: {page}" in read
    assert 'button "Greet"' in read and 'textbox "Your name"' in read
    shot = requests[5]["messages"][-1]
    [part] = [p for p in shot["content"] if p["type"] == "image_url"]
    header, encoded = part["image_url"]["url"].split(",", 1)
    assert header == "data:image/png;base64"
    assert Image.open(io.BytesIO(base64.b64decode(encoded))).size == (1280, 800)
    assert answers[5].startswith("error invalid_argument") and "http and https" in answers[5]
    assert "no tool 'shell'" in answers[6]


async def test_with_the_sandbox_on_the_browser_is_confined_like_a_command(
    model: tuple[ScriptedModel, str], workspace: Path, tmp_path: Path
) -> None:
    """The sandbox's network rules hold for the browser: the loopback page the unconfined
    browser opened (the test above, the control) is unreachable."""
    scripted, endpoint = model
    seen: list[str] = []
    with serving_http(page_handler(seen)) as server:
        page = url_of(server, "/greeter")
        scripted.turns = [ToolCalls((("browser_navigate", {"url": page}),)), Final("Blocked.")]
        flags = ["--model-endpoint", endpoint, "--model", "m", "--sandbox-enabled"]
        flags += ["--browser-enabled", "--chrome-executable-path", str(CHROMIUM)]
        with running_daemon(workspace, tmp_path / "state", *flags) as daemon:
            async with daemon.client() as client:
                result, _ = await run_task(client, task_call("Open", subagent_type=BROWSER_USE))
    assert result.success.final_message == "Blocked.", result
    [answer] = [m for m in scripted.chat_requests()[-1]["messages"] if m["role"] == "tool"]
    assert answer["content"].startswith(f"error request_failed: cannot open {page}: net::ERR_")
    assert seen == []


async def test_without_the_flag_the_browser_subagent_is_unavailable(
    model: tuple[ScriptedModel, str], workspace: Path, tmp_path: Path
) -> None:
    scripted, endpoint = model
    flags = ["--model-endpoint", endpoint, "--model", "m"]
    with running_daemon(workspace, tmp_path / "state", *flags) as daemon:
        async with daemon.client() as client:
            result, _ = await run_task(client, task_call("Browse", subagent_type=BROWSER_USE))
    assert result.error.code == "unavailable" and "--browser-enabled" in result.error.message
    assert scripted.chat_requests() == []
    missing = tmp_path / "no-chromium"
    scripted.turns = [
        ToolCalls((("browser_navigate", {"url": "http://127.0.0.1:9/"}),)),
        Final("No browser."),
    ]
    flags += ["--browser-enabled", "--chrome-executable-path", str(missing)]
    with running_daemon(workspace, tmp_path / "state2", *flags) as daemon:
        async with daemon.client() as client:
            started, _ = await run_task(client, task_call("Browse", subagent_type=BROWSER_USE))
    assert started.success.final_message == "No browser."
    [answer] = [m for m in scripted.chat_requests()[-1]["messages"] if m["role"] == "tool"]
    assert answer["content"] == (
        f"error unavailable: --chrome-executable-path {missing} is not an executable file"
    )
