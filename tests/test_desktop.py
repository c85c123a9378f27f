"""The desktop page (exec_daemon/rpc/desktop_server.py) on a real Xtigervnc, in real Chromium.

A person opens the page with the token and sees the desktop; without the token, or with a
wrong one, nothing is served. The agent's computer-use click shows on the person's page. A
view-only connection cannot type or click even when it speaks RFB itself; a person who takes
control makes the agent's computer use wait until they hand back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import shutil
import socket
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets
from PIL import Image

from agent.v1.computer_pb2 import ClickAction, ComputerUseAction, Coordinate, MouseMoveAction
from agent.v1.takeover_pb2 import GetDesktopControlRequest
from exec_daemon.client import ExecDaemonClient
from exec_daemon.rpc.desktop_server import RfbRefused, ViewOnlyFilter, novnc_dir
from tests import desktop_icon_app as icon_app
from tests.daemon_process import RunningDaemon, free_port, running_daemon
from tests.polling import POLL_SECONDS, generous, text_of, wait_until
from tests.test_tracing import (
    FAST_EXPORT,
    HTTP_CHOSEN,
    Received,
    attributes,
    http_receiver,
    tracing_flags,
)
from tests.x11_support import X11App, computer_use, x11_app, x_server

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
SCRIPT = ROOT / "tests" / "web" / "desktop.mjs"
ICON_APP = Path(icon_app.__file__)

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        not shutil.which("Xtigervnc") or novnc_dir() is None,
        reason="needs Xtigervnc and noVNC (run scripts/setup)",
    ),
]


# --- the desktop: Xtigervnc, the daemon, an icon -------------------------------------------------


@pytest.fixture(scope="module")
def vnc() -> Iterator[tuple[str, int]]:
    port = free_port()

    def command(number: int) -> list[str]:
        return ["Xtigervnc", f":{number}", "-geometry", "1920x1200", "-depth", "24", "-localhost",
                "-rfbport", str(port), "-SecurityTypes", "None", "-AlwaysShared", "-nolisten", "tcp"]  # fmt: skip

    with x_server(command, range(60, 200)) as number:
        yield f":{number}", port


class CuttableProxy:
    """A loopback TCP relay to the VNC server whose connections the test can cut (a network
    drop, as the page sees it)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self.lock:
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._relay, args=(a, b), daemon=True).start()

    @staticmethod
    def _relay(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self.lock:
            cut, self.sockets = self.sockets, []
        for sock in cut:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.listener.close()
        self.cut()


@pytest.fixture(scope="module")
def vnc_proxy(vnc: tuple[str, int]) -> Iterator[CuttableProxy]:
    proxy = CuttableProxy(vnc[1])
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture(scope="module")
def traces() -> Iterator[Received]:
    with http_receiver() as (port, received):
        received.port = port  # type: ignore[attr-defined]
        yield received


@pytest.fixture(scope="module")
def daemon(
    vnc: tuple[str, int],
    vnc_proxy: CuttableProxy,
    traces: Received,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningDaemon]:
    display = vnc[0]
    workspace = tmp_path_factory.mktemp("workspace")
    # A hook that keeps what it is told about failed calls.
    (workspace / ".cursor").mkdir()
    hook = {
        "command": f"cat >> {workspace.parent / 'failures.jsonl'}; echo >> {workspace.parent / 'failures.jsonl'}; echo '{{}}'"
    }
    (workspace / ".cursor" / "hooks.json").write_text(
        json.dumps({"version": 1, "hooks": {"postToolUseFailure": [hook]}})
    )
    novnc_port = free_port()
    with running_daemon(
        workspace,
        tmp_path_factory.mktemp("state"),
        "--computer-use-enabled",
        "--screenshot-delay-ms", "0",
        "--novnc-port", str(novnc_port),
        "--vnc-address", f"127.0.0.1:{vnc_proxy.port}",
        *tracing_flags(f"http://127.0.0.1:{traces.port}"),  # type: ignore[attr-defined]
        env={"DISPLAY": display, **FAST_EXPORT, **HTTP_CHOSEN},
    ) as running:  # fmt: skip
        running.novnc_port = novnc_port  # type: ignore[attr-defined]
        yield running


def page_url(daemon: RunningDaemon, rest: str = "") -> str:
    return f"http://127.0.0.1:{daemon.novnc_port}{rest}"  # type: ignore[attr-defined]


@pytest.fixture
def icon(vnc: tuple[str, int], tmp_path: Path) -> Iterator[X11App]:
    with x11_app(vnc[0], tmp_path, ICON_APP) as app:
        yield app


@pytest.fixture
async def client(daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with daemon.client() as connected:
        yield connected


ICON_CENTER = (icon_app.ICON[0] + icon_app.ICON[2] // 2, icon_app.ICON[1] + icon_app.ICON[3] // 2)
# computer use speaks in 1280x800 API coordinates; the display is 1920x1200.
ICON_API = Coordinate(x=round(ICON_CENTER[0] / 1.5), y=round(ICON_CENTER[1] / 1.5))


def click_icon() -> ComputerUseAction:
    return ComputerUseAction(click=ClickAction(coordinate=ICON_API))


def status_of(url: str, headers: dict[str, str] | None = None) -> int:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


# --- the token --------------------------------------------------------------------------------


def test_nothing_is_served_without_the_token(daemon: RunningDaemon) -> None:
    bearer = {"Authorization": f"Bearer {daemon.token}"}
    assert status_of(page_url(daemon, "/")) == 401
    assert status_of(page_url(daemon, "/?token=wrong")) == 401
    assert status_of(page_url(daemon, "/novnc/core/rfb.js")) == 401
    assert status_of(page_url(daemon, "/"), {"Cookie": "exec_daemon_desktop=forged"}) == 401
    assert status_of(page_url(daemon, "/"), {"Authorization": "Bearer wrong"}) == 401
    assert status_of(page_url(daemon, "/"), bearer) == 200
    assert status_of(page_url(daemon, "/novnc/core/rfb.js"), bearer) == 200


def test_the_token_is_exchanged_for_a_cookie_and_leaves_the_url(daemon: RunningDaemon) -> None:
    request = urllib.request.Request(page_url(daemon, f"/?mode=control&token={daemon.token}"))
    with pytest.raises(urllib.error.HTTPError) as redirect:
        urllib.request.build_opener(NoFollow).open(request, timeout=10)
    assert redirect.value.code == 303
    location = redirect.value.headers["Location"]
    assert location.startswith("/s/") and location.endswith("/?mode=control"), location
    scope = location.removesuffix("?mode=control")
    cookie = redirect.value.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and daemon.token not in cookie
    assert f"Path={scope};" in cookie, cookie
    session = cookie.split(";")[0]
    assert status_of(page_url(daemon, scope), {"Cookie": session}) == 200
    assert status_of(page_url(daemon, scope + "novnc/core/rfb.js"), {"Cookie": session}) == 200
    # Only under its scope: the cookie alone opens nothing.
    assert status_of(page_url(daemon, "/"), {"Cookie": session}) == 401


class NoFollow(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:
        return None


@pytest.mark.parametrize(
    "path", ["/novnc/../../../../etc/passwd", "/novnc/%2e%2e/%2e%2e/etc/passwd", "/novnc/core"]
)
def test_no_file_outside_novnc_is_served(daemon: RunningDaemon, path: str) -> None:
    bearer = {"Authorization": f"Bearer {daemon.token}"}
    assert status_of(page_url(daemon, path), bearer) == 404


async def test_the_bridge_refuses_no_token_and_foreign_pages(daemon: RunningDaemon) -> None:
    url = f"ws://127.0.0.1:{daemon.novnc_port}/websockify"  # type: ignore[attr-defined]
    with pytest.raises(websockets.InvalidStatus) as no_token:
        await websockets.connect(url, open_timeout=10)
    assert no_token.value.response.status_code == 401
    bearer = {"Authorization": f"Bearer {daemon.token}"}
    with pytest.raises(websockets.InvalidStatus) as foreign:
        await websockets.connect(
            url, additional_headers=bearer, origin="http://evil.example", open_timeout=10
        )  # type: ignore[arg-type]
    assert foreign.value.response.status_code == 403


# --- view-only is enforced in the daemon ---------------------------------------------------------


async def rfb_session(daemon: RunningDaemon, mode: str) -> websockets.ClientConnection:
    """A WebSocket to the bridge that has done the RFB 3.8 handshake (security None)."""
    url = f"ws://127.0.0.1:{daemon.novnc_port}/websockify?mode={mode}"  # type: ignore[attr-defined]
    ws = await websockets.connect(
        url, additional_headers={"Authorization": f"Bearer {daemon.token}"}, open_timeout=10
    )
    received = bytearray()

    async def need(count: int) -> bytes:
        while len(received) < count:
            received.extend(await asyncio.wait_for(ws.recv(), 10))  # type: ignore[arg-type]
        taken = bytes(received[:count])
        del received[:count]
        return taken

    assert (await need(12)).startswith(b"RFB 003.")
    await ws.send(b"RFB 003.008\n")
    types = await need((await need(1))[0])
    assert 1 in types, types
    await ws.send(b"\x01")
    assert await need(4) == b"\x00\x00\x00\x00"  # SecurityResult OK
    await ws.send(b"\x01")  # ClientInit: shared
    name_length = struct.unpack(">I", (await need(24))[20:24])[0]
    await need(name_length)
    return ws


def pointer(x: int, y: int, buttons: int) -> bytes:
    return struct.pack(">BBHH", 5, buttons, x, y)


async def click_over_rfb(ws: websockets.ClientConnection) -> None:
    x, y = ICON_CENTER
    await ws.send(pointer(x, y, 0) + pointer(x, y, 1))
    await ws.send(pointer(x, y, 0))
    # A key too, split across frames: dropped or passed whole, never misread.
    key = struct.pack(">BBxxI", 4, 1, 0x61)
    await ws.send(key[:3])
    await ws.send(key[3:])
    # The connection still works: an update request is answered.
    await ws.send(struct.pack(">BBHHHH", 3, 0, 0, 0, 16, 16))
    await asyncio.wait_for(ws.recv(), 10)


async def test_only_an_interactive_connection_clicks(daemon: RunningDaemon, icon: X11App) -> None:
    view = await rfb_session(daemon, "view")
    try:
        await click_over_rfb(view)
    finally:
        await view.close()
    # The VNC server read the view-only clicks (if any had passed) before answering the update
    # request; the interactive click comes after them, so one "opened" means none passed.
    control = await rfb_session(daemon, "control")
    try:
        await click_over_rfb(control)
        await asyncio.to_thread(icon.wait_for, "opened")
    finally:
        await control.close()
    assert len(icon.events("opened")) == 1, icon.events()


async def test_an_interactive_connection_refuses_computer_use_until_it_closes(
    daemon: RunningDaemon, client: ExecDaemonClient
) -> None:
    """The person-in-control refusal without a browser: the page's connection is an RFB
    session over the bridge, opened here directly."""
    move = ComputerUseAction(mouse_move=MouseMoveAction(coordinate=Coordinate(x=7, y=7)))
    # The positive control: a person watching does not stop the agent.
    view = await rfb_session(daemon, "view")
    try:
        assert (await computer_use(client, move)).WhichOneof("result") == "success"
    finally:
        await view.close()
    control = await rfb_session(daemon, "control")
    try:
        refused = await computer_use(client, move)
        assert refused.WhichOneof("result") == "error", refused
        assert refused.error.code == "person_in_control", refused
        state = await client.control.get_desktop_control(
            GetDesktopControlRequest(), headers=client.headers
        )
        assert state.person_in_control and state.controllers == 1, state
    finally:
        await control.close()

    async def agent_may_act() -> bool:
        return (await computer_use(client, move)).WhichOneof("result") == "success"

    # Closing the last interactive connection hands the desktop back.
    deadline = time.monotonic() + generous(20)
    while not await agent_may_act():
        assert time.monotonic() < deadline, "computer use still refused after the connection closed"
        await asyncio.sleep(POLL_SECONDS)


def test_the_view_only_filter_frames_what_it_drops() -> None:
    view = ViewOnlyFilter.new()
    handshake = b"RFB 003.008\n" + b"\x01" + b"\x00"
    assert view.feed(handshake) == b"RFB 003.008\n\x01\x01"  # ClientInit forced shared
    clipboard = struct.pack(">BxxxI", 6, 100) + b"x" * 100
    update = struct.pack(">BBHHHH", 3, 1, 0, 0, 8, 8)
    stream = clipboard + pointer(1, 2, 1) + update
    passed = b"".join(view.feed(stream[i : i + 7]) for i in range(0, len(stream), 7))
    assert passed == update


@pytest.mark.parametrize(
    ("stream", "why"),
    [
        (b"RFB 003.003\n", "3.3 skips the security choice: framing would slip"),
        (b"RFB 003.008\n\x02", "VNC authentication is not how the desktop runs"),
        (b"RFB 003.008\n\x01\x01\xff\x00", "an unknown message cannot be framed"),
    ],
)
def test_the_view_only_filter_refuses_what_it_cannot_frame(stream: bytes, why: str) -> None:
    with pytest.raises(RfbRefused):
        ViewOnlyFilter.new().feed(stream)


# --- a person in Chromium -----------------------------------------------------------------------


class Browser:
    """tests/web/desktop.mjs: one command per line, one JSON answer per line."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            ["node", str(SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )

    def __call__(self, cmd: str, **fields: Any) -> dict[str, Any]:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps({"cmd": cmd, **fields}) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], 60)
        line = self.process.stdout.readline() if ready else ""
        assert line, f"no answer to {cmd}: {self.process.stderr.read() if not ready else ''}"
        answer: dict[str, Any] = json.loads(line)
        assert answer.pop("ok"), answer
        return answer

    def close(self) -> None:
        with_input = self.process.stdin
        if with_input:
            with_input.write('{"cmd": "quit"}\n')
            with_input.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def browser() -> Iterator[Browser]:
    if not (CHROMIUM.exists() and shutil.which("node")):
        pytest.skip("needs /usr/bin/chromium and node")
    if not (ROOT / "node_modules" / "playwright-core").is_dir():
        pytest.skip("needs playwright-core: run scripts/setup")
    opened = Browser()
    try:
        yield opened
    finally:
        opened.close()


def seen_at(shot: Path, seen: dict[str, Any], display_x: int, display_y: int) -> tuple[int, ...]:
    """The page's pixel showing display pixel (x, y), from a real screenshot."""
    rect, (width, height) = seen["rect"], seen["fb"]
    x = rect["x"] + (display_x + 0.5) * rect["width"] / width
    y = rect["y"] + (display_y + 0.5) * rect["height"] / height
    with Image.open(shot) as image:
        pixel: tuple[int, ...] = image.convert("RGB").getpixel((int(x), int(y)))  # type: ignore[assignment]
        return pixel


def rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def close_to(pixel: tuple[int, ...], color: str) -> bool:
    return all(abs(a - b) <= 24 for a, b in zip(pixel, rgb(color), strict=True))


async def test_a_person_watches_the_agent_then_takes_over(
    daemon: RunningDaemon,
    icon: X11App,
    client: ExecDaemonClient,
    browser: Browser,
    traces: Received,
    tmp_path: Path,
) -> None:
    refused = await asyncio.to_thread(browser, "open", url=page_url(daemon, "/"))
    assert refused["status"] == 401
    wrong = await asyncio.to_thread(browser, "open", url=page_url(daemon, "/?token=nope"))
    assert wrong["status"] == 401

    seen = await asyncio.to_thread(browser, "open", url=page_url(daemon, f"/?token={daemon.token}"))
    assert seen["status"] == 200 and seen["mode"] == "view", seen
    assert daemon.token not in seen["url"] and seen["fb"] == [1920, 1200]
    assert 0 < seen["rect"]["width"] <= 960, "the desktop is scaled to fit the window"
    shot = tmp_path / "desktop.png"

    def looks(where: tuple[int, int], color: str) -> bool:
        answer = browser("shot", path=str(shot))
        return close_to(seen_at(shot, answer, *where), color)

    corner = (1800, 1100)
    await asyncio.to_thread(wait_until, lambda: looks(ICON_CENTER, icon_app.ICON_COLOR), 20, "icon")
    assert await asyncio.to_thread(looks, corner, icon_app.BACKGROUND)

    # The agent clicks the icon: the person sees the desktop change.
    done = await computer_use(client, click_icon())
    assert done.WhichOneof("result") == "success", done
    await asyncio.to_thread(wait_until, lambda: looks(corner, icon_app.OPENED), 20, "opened")

    # The person takes control: the agent's computer use is refused with a typed error.
    taken = await asyncio.to_thread(browser, "toggle")
    assert taken["mode"] == "control" and "mode=control" in taken["url"]
    refused_call = await computer_use(client, click_icon())
    assert refused_call.WhichOneof("result") == "error"
    assert refused_call.error.code == "person_in_control"
    assert "a person has taken control" in refused_call.error.message
    control = await client.control.get_desktop_control(
        GetDesktopControlRequest(), headers=client.headers
    )
    assert control.person_in_control and control.controllers == 1, control
    assert control.novnc_port == daemon.novnc_port  # type: ignore[attr-defined]
    # Hooks hear of the refused call, tracing of the take-over and the refusal.
    failures = daemon.workspace.parent / "failures.jsonl"
    await asyncio.to_thread(
        wait_until, lambda: "person_in_control" in text_of(failures), 20, "the hook's payload"
    )
    hooked = [json.loads(line) for line in failures.read_text().splitlines() if line.strip()]
    assert hooked[-1]["tool_name"] == "ComputerUse", hooked[-1]

    # Hand back: the agent acts again.
    handed = await asyncio.to_thread(browser, "toggle")
    assert handed["mode"] == "view"
    move = ComputerUseAction(mouse_move=MouseMoveAction(coordinate=ICON_API))

    async def agent_may_act() -> bool:
        result = await computer_use(client, move)
        return result.WhichOneof("result") == "success"

    deadline = time.monotonic() + generous(20)
    while not await agent_may_act():
        assert time.monotonic() < deadline, "computer use still refused after the hand-back"
        await asyncio.sleep(POLL_SECONDS)
    assert seen["consoleErrors"] == [] and handed["consoleErrors"] == []
    after = await client.control.get_desktop_control(
        GetDesktopControlRequest(), headers=client.headers
    )
    assert not after.person_in_control and after.since_unix_ms >= control.since_unix_ms

    def spans(name: str) -> list[dict[str, Any]]:
        return [attributes(s.attributes) for _, s in traces.spans() if s.name == name]

    await asyncio.to_thread(wait_until, lambda: spans("desktop.hand_back"), 20, "hand-back span")
    assert spans("desktop.take_over")[-1] == {"desktop.person_in_control": True}
    assert spans("desktop.hand_back")[-1] == {"desktop.person_in_control": False}
    codes = [a.get("tool.error_code") for a in spans("computer_use_tool_call")]
    assert "person_in_control" in codes, codes


async def test_the_page_survives_a_dropped_connection(
    daemon: RunningDaemon, vnc_proxy: CuttableProxy, icon: X11App, browser: Browser, tmp_path: Path
) -> None:
    seen = await asyncio.to_thread(browser, "open", url=page_url(daemon, f"/?token={daemon.token}"))
    assert seen["status"] == 200 and seen["connects"] == 1, seen
    vnc_proxy.cut()
    again = await asyncio.to_thread(browser, "reconnected", after=1)
    assert again["connects"] == 2 and again["fb"] == [1920, 1200]
    shot = tmp_path / "after-drop.png"

    def shows_icon() -> bool:
        answer = browser("shot", path=str(shot))
        return close_to(seen_at(shot, answer, *ICON_CENTER), icon_app.ICON_COLOR)

    await asyncio.to_thread(wait_until, shows_icon, 20, "the desktop after the reconnect")
    assert again["consoleErrors"] == []
