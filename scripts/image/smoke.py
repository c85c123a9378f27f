"""The smoke suite scripts/test-image runs against a booted image, from outside, over loopback.

    smoke.py --token T --since EPOCH [--desktop --screenshots DIR]

Checks, in order, each printed as `ok <what> (<seconds>)` or `FAIL <what>: <why>`:
Ping over Connect with the token (polled from --since: boot-to-Ping); a shell call runs as
`ubuntu` in /workspace; `gh --version` in that shell; `exec-daemon install` runs the install step
of /workspace/.cursor/environment.json (test-image writes it); a PTY terminal over WebSocket
echoes. With --probe-docker: whether `sudo service docker start` brings dockerd up (said, not
checked). With --desktop: a computer-use screenshot shows the desktop (pixel variance; saved as
PNG), a click on the panel's applications menu changes the next screenshot; boot-to-desktop; a
screen recording of that display; chromium's DevTools on 9222; the desktop page on 26058 refusing a missing or wrong
token and greeting as VNC with it; a person's take-over on that page refusing the agent's computer
use (person_in_control) until the hand-back. With --ide: WarmRemoteAccessServer cold then warm
(timed), its page on 26059 with the token, 401 without. With --lints: `node` in a shell is
Node >= 22, and read_lints reports pyright's type error in a seeded file (source naming the
server), timed from its first call (the server's start).
Prints one JSON line of timings last; exits 1 when any check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import websockets
from PIL import Image, ImageChops, ImageStat

from agent.v1.computer_pb2 import (
    ClickAction,
    ComputerUseAction,
    ComputerUseArgs,
    ComputerUseToolCall,
    Coordinate,
    KeyAction,
    MouseMoveAction,
    RecordingMode,
    RecordScreenArgs,
    RecordScreenToolCall,
    ScreenshotAction,
)
from agent.v1.control_pb2 import WarmRemoteAccessServerRequest
from agent.v1.files_pb2 import ReadLintsArgs
from agent.v1.shell_pb2 import ShellArgs, ShellToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient

# A blank or single-colour frame has a standard deviation near 0; XFCE's wallpaper, panel and
# icons give tens.
MIN_DESKTOP_STDDEV = 12.0
# The share of the frame (of 1280x800) that must change when the applications menu opens.
MIN_CHANGED_PIXELS = 2000
# The panel's applications menu: the top-left button of XFCE's default top panel, API pixels.
APPLICATIONS_MENU = Coordinate(x=8, y=8)
# A type error pyright reports (reportAssignmentType) and ruff does not.
SEEDED_TYPE_ERROR = 'count: int = "three"'


# `service docker start` as an environment.json would, then dockerd by hand if that failed.
DOCKER_PROBE = r"""
echo "service docker start: $(sudo service docker start 2>&1 | tail -n1)"
if ! sudo docker info >/dev/null 2>&1; then
  sudo sh -c 'dockerd >/tmp/dockerd.log 2>&1 & echo $! >/tmp/dockerd.pid'
fi
for _ in $(seq 75); do sudo docker info >/dev/null 2>&1 && break; sleep 0.2; done
if sudo docker info >/dev/null 2>&1; then
  echo "dockerd up: $(sudo docker info --format '{{.ServerVersion}}, storage {{.Driver}}')"
else
  echo "dockerd down: $(sudo grep -hiE 'level=(error|fatal)|failed to' /tmp/dockerd.log /var/log/docker.log 2>/dev/null | tail -n2)"
fi
sudo sh -c 'kill $(cat /tmp/dockerd.pid) 2>/dev/null; service docker stop' >/dev/null 2>&1
true
"""


class SmokeFailure(Exception):
    pass


# The boot's host PID (test-image's `unshare`): a boot that ended fails the checks at once.
boot_pid = 0


def boot_ended() -> bool:
    return boot_pid > 0 and not Path(f"/proc/{boot_pid}").exists()


async def poll(what: str, attempt: Callable[[], Awaitable[object]], seconds: float) -> object:
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await attempt()
        except Exception as error:
            if boot_ended():
                raise SmokeFailure(f"{what}: the boot ended ({error})") from error
            if time.monotonic() > deadline:
                raise SmokeFailure(
                    f"{what}: no success within {seconds:.0f} s ({error})"
                ) from error
        await asyncio.sleep(0.05)


async def succeeded(client: ExecDaemonClient, call: ToolCall, variant: str, what: str) -> Any:
    """The `success` of the call's result (ToolCall field `variant`), else a SmokeFailure."""
    outcome = await client.run(call)
    if outcome.result is None:
        raise SmokeFailure(f"{what}: {outcome.error}")
    result = getattr(outcome.result, variant).result
    if result.WhichOneof("result") != "success":
        raise SmokeFailure(f"{what}: {result}")
    return result.success


async def read_until(ws: Any, wanted: bytes, seconds: float = 15) -> bytes:
    """Terminal output from `ws` until `wanted` shows (or a SmokeFailure)."""
    output = b""
    deadline = time.monotonic() + seconds
    while wanted not in output:
        if time.monotonic() > deadline:
            raise SmokeFailure(f"{wanted!r} never showed: {output[-300:]!r}")
        message = await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic()))
        if isinstance(message, bytes):
            output += message
    return output


async def shell(client: ExecDaemonClient, command: str) -> str:
    call = ToolCall(shell_tool_call=ShellToolCall(args=ShellArgs(command=command, timeout=120_000)))
    success = await succeeded(client, call, "shell_tool_call", f"shell {command!r}")
    return str(success.stdout)


async def computer_use(client: ExecDaemonClient, *actions: ComputerUseAction) -> Any:
    """The computer-use call's result (any case), else a SmokeFailure."""
    call = ToolCall(
        computer_use_tool_call=ComputerUseToolCall(args=ComputerUseArgs(actions=actions))
    )
    outcome = await client.run(call)
    if outcome.result is None:
        raise SmokeFailure(f"computer use: {outcome.error}")
    return outcome.result.computer_use_tool_call.result


async def screenshot(client: ExecDaemonClient, *before: ComputerUseAction) -> Image.Image:
    actions = [*before, ComputerUseAction(screenshot=ScreenshotAction())]
    call = ToolCall(
        computer_use_tool_call=ComputerUseToolCall(args=ComputerUseArgs(actions=actions))
    )
    success = await succeeded(client, call, "computer_use_tool_call", "computer use")
    return Image.open(io.BytesIO(success.screenshot)).convert("RGB")


def http_get(url: str, headers: dict[str, str] | None = None) -> bytes:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=30) as response:
        return bytes(response.read())


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def stddev(image: Image.Image) -> float:
    return max(ImageStat.Stat(image).stddev)


def changed_pixels(before: Image.Image, after: Image.Image) -> int:
    difference = (
        ImageChops.difference(before, after).convert("L").point(lambda v: 255 if v > 24 else 0)
    )
    return int(difference.histogram()[255])


class Smoke:
    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.url = f"http://127.0.0.1:{options.port}"
        self.timings: dict[str, float] = {}
        self.failures: list[str] = []

    async def check(self, what: str, step: Callable[[], Awaitable[None]]) -> None:
        started = time.monotonic()
        try:
            await step()
        except Exception as error:
            self.failures.append(what)
            print(f"FAIL {what}: {error}", flush=True)
        else:
            print(f"ok {what} ({time.monotonic() - started:.2f} s)", flush=True)

    async def run(self) -> int:
        async with ExecDaemonClient(self.url, self.options.token) as client:
            await self.check("Ping over Connect with the token", lambda: self.ping(client))
            if self.failures:
                return self.report()
            await self.check("shell as ubuntu in /workspace, gh", lambda: self.shell(client))
            await self.check(
                "exec-daemon install runs environment.json's install", lambda: self.install(client)
            )
            await self.check("PTY terminal over WebSocket echoes", self.pty)
            if self.options.desktop:
                await self.check("the screenshot shows the desktop", lambda: self.desktop(client))
                await self.check(
                    "a click on the panel changes the screen", lambda: self.click(client)
                )
                await self.check("screen recording of the desktop", lambda: self.record(client))
                await self.check("chromium answers DevTools on 9222", lambda: self.browser(client))
                # The VM has tmux (the minimal image does not: plain terminals there).
                await self.check(
                    "a shared terminal: the agent reads and types into a person's",
                    lambda: self.shared_terminal(client),
                )
                await self.check("the desktop page on 26058 needs the token", self.novnc)
                await self.check(
                    "a person's take-over pauses computer use", lambda: self.take_over(client)
                )
            if self.options.ide:
                await self.check(
                    "the IDE on 26059 starts, warm and behind the token", lambda: self.ide(client)
                )
            if self.options.lints:
                await self.check(
                    "read_lints: pyright's type error in a seeded file", lambda: self.lints(client)
                )
            if self.options.probe_docker:
                await self.docker(client)
        return self.report()

    def report(self) -> int:
        print(json.dumps({"timings_s": self.timings, "failed": self.failures}), flush=True)
        return 1 if self.failures else 0

    async def ping(self, client: ExecDaemonClient) -> None:
        await poll("Ping", client.ping, self.options.boot_timeout)
        self.timings["boot_to_ping"] = round(time.time() - self.options.since, 2)

    async def shell(self, client: ExecDaemonClient) -> None:
        out = await shell(client, "id -un; pwd; gh --version | head -n1")
        lines = out.splitlines()
        if lines[:2] != ["ubuntu", "/workspace"] or not lines[2].startswith("gh version"):
            raise SmokeFailure(f"expected ubuntu, /workspace, gh version; got {out!r}")

    async def install(self, client: ExecDaemonClient) -> None:
        out = await shell(client, "exec-daemon install --workspace /workspace && cat install-proof")
        if "installed-42" not in out:
            raise SmokeFailure(f"no proof of the install step in {out!r}")

    async def pty(self) -> None:
        url = f"ws://127.0.0.1:{self.options.pty_port}/terminals/new?token={self.options.token}"
        async with websockets.connect(url) as ws:
            await ws.send(b"echo pty-$((6*7))\r")
            await read_until(ws, b"pty-42")

    async def shared_terminal(self, client: ExecDaemonClient) -> None:
        """A person's shell from the page runs in the daemon's tmux: the agent's shell reads its
        screen and types into it with the commands GET /terminals gives; the person sees it."""
        base = f"127.0.0.1:{self.options.pty_port}"
        token = self.options.token
        url = f"ws://{base}/terminals/new?shared=1&name=smoke&token={token}"
        async with websockets.connect(url) as ws:
            attached = json.loads(await asyncio.wait_for(ws.recv(), 10))
            await ws.send(b"echo person-$((6*7))\r")
            await read_until(ws, b"person-42")
            request = urllib.request.Request(f"http://{base}/terminals?token={token}")
            with urllib.request.urlopen(request, timeout=10) as response:
                listing = json.loads(response.read())
            shared = next(t["shared"] for t in listing if t["id"] == attached["id"])
            screen = await shell(client, shared["read_screen"])
            if "person-42" not in screen:
                raise SmokeFailure(f"the agent's read_screen did not show it: {screen!r}")
            await shell(
                client, shared["type_keys"].replace("'echo hello'", "'echo agent-$((7*6))'")
            )
            await read_until(ws, b"agent-42")

    async def record(self, client: ExecDaemonClient) -> None:
        async def recording(mode: RecordingMode.ValueType) -> Any:
            call = ToolCall(
                record_screen_tool_call=RecordScreenToolCall(
                    args=RecordScreenArgs(mode=mode, save_as_filename="smoke.mp4")
                )
            )
            outcome = await client.run(call)
            if outcome.result is None:
                raise SmokeFailure(f"record screen: {outcome.error}")
            return outcome.result.record_screen_tool_call.result

        started = await recording(RecordingMode.RECORDING_MODE_START_RECORDING)
        if started.WhichOneof("result") != "start_success":
            raise SmokeFailure(f"start: {started}")
        await screenshot(client, ComputerUseAction(click=ClickAction(coordinate=APPLICATIONS_MENU)))
        await screenshot(client, ComputerUseAction(key=KeyAction(key="Escape")))
        saved = await recording(RecordingMode.RECORDING_MODE_SAVE_RECORDING)
        if saved.WhichOneof("result") != "save_success" or saved.save_success.size_bytes < 10_000:
            raise SmokeFailure(f"save: {saved}")
        probe = await shell(
            client,
            f"ffprobe -v error -show_entries stream=width,height -of csv=p=0 {saved.save_success.path}",
        )
        if probe.strip() != "1920,1200":
            raise SmokeFailure(f"the recording is not of the 1920x1200 display: {probe!r}")

    async def browser(self, client: ExecDaemonClient) -> None:
        async def answers() -> str:
            version = await shell(client, "curl -sf http://127.0.0.1:9222/json/version")
            if '"Browser"' not in version:
                raise SmokeFailure(f"no DevTools answer: {version!r}")
            return version

        await poll("DevTools on 9222", answers, 30)

    async def novnc(self) -> None:
        """The daemon's desktop page on 26058: refused without the token, bridged with it."""
        for url in ("http://127.0.0.1:26058/", "http://127.0.0.1:26058/?token=wrong"):
            if (status := await asyncio.to_thread(http_status, url)) != 401:
                raise SmokeFailure(f"{url} answered {status} without the right token, not 401")
        bearer = {"Authorization": f"Bearer {self.options.token}"}
        page = await asyncio.to_thread(http_get, "http://127.0.0.1:26058/", bearer)
        if b"assets/desktop.js" not in page:
            raise SmokeFailure("no desktop page on 26058")
        rfb = await asyncio.to_thread(http_get, "http://127.0.0.1:26058/novnc/core/rfb.js", bearer)
        if b"export default class RFB" not in rfb:
            raise SmokeFailure("the desktop page has no noVNC")
        url = "ws://127.0.0.1:26058/websockify"
        async with websockets.connect(url, additional_headers=bearer) as ws:
            greeting = await asyncio.wait_for(ws.recv(), 10)
        if not (isinstance(greeting, bytes) and greeting.startswith(b"RFB 003.")):
            raise SmokeFailure(f"not a VNC greeting through the desktop page: {greeting!r}")
        try:
            async with websockets.connect(url):
                raise SmokeFailure("the desktop bridge opened without the token")
        except websockets.InvalidStatus as exc:
            if exc.response.status_code != 401:
                raise SmokeFailure(
                    f"the bridge without token: {exc.response.status_code}"
                ) from None

    async def take_over(self, client: ExecDaemonClient) -> None:
        bearer = {"Authorization": f"Bearer {self.options.token}"}
        url = "ws://127.0.0.1:26058/websockify?mode=control"
        move = ComputerUseAction(mouse_move=MouseMoveAction(coordinate=Coordinate(x=5, y=5)))
        async with websockets.connect(url, additional_headers=bearer) as ws:
            await asyncio.wait_for(ws.recv(), 10)  # the bridge is up: the person has control
            refused = await computer_use(client, move)
            if refused.WhichOneof("result") != "error" or refused.error.code != "person_in_control":
                raise SmokeFailure(f"computer use during a take-over: {refused}")

        async def handed_back() -> None:
            result = await computer_use(client, move)
            if result.WhichOneof("result") != "success":
                raise SmokeFailure(f"computer use after the hand-back: {result}")

        await poll("computer use after the hand-back", handed_back, 10)

    async def ide(self, client: ExecDaemonClient) -> None:
        """WarmRemoteAccessServer starts code-server (cold, timed), again (warm), and the IDE's
        page answers with the token and refuses without it."""
        started = time.monotonic()
        cold = await client.control.warm_remote_access_server(
            WarmRemoteAccessServerRequest(), headers=client.headers
        )
        self.timings["ide_cold_start"] = round(time.monotonic() - started, 2)
        started = time.monotonic()
        warm = await client.control.warm_remote_access_server(
            WarmRemoteAccessServerRequest(), headers=client.headers
        )
        self.timings["ide_warm_call"] = round(time.monotonic() - started, 3)
        if not (cold.ready and warm == cold and "127.0.0.1:26059/" in cold.message):
            raise SmokeFailure(f"not ready at 26059: {cold} / {warm}")
        base = "http://127.0.0.1:26059"
        page = await asyncio.to_thread(
            http_get,
            base + "/?folder=/workspace",
            {"Authorization": f"Bearer {self.options.token}"},
        )
        if b"workbench" not in page:
            raise SmokeFailure(f"no workbench page: {page[:200]!r}")
        try:
            await asyncio.to_thread(http_get, base + "/")
        except urllib.error.HTTPError as refused:
            if refused.code != 401:
                raise SmokeFailure(f"without the token: HTTP {refused.code}, not 401") from None
        else:
            raise SmokeFailure("the IDE answered without the token")

    async def lints(self, client: ExecDaemonClient) -> None:
        """The image's language servers answer read_lints (not the command-line fallback)."""
        major = await shell(client, "node -p 'process.versions.node.split(\".\")[0]'")
        if int(major.strip() or 0) < 22:
            raise SmokeFailure(f"node on PATH is {major.strip()!r}, not >= 22")
        await shell(client, f"printf '%s\\n' {SEEDED_TYPE_ERROR!r} > seeded_type_error.py")
        call = ToolCall()
        call.read_lints_tool_call.args.CopyFrom(ReadLintsArgs(paths=["seeded_type_error.py"]))
        started = time.monotonic()

        async def reported() -> Any:
            success = await succeeded(client, call, "read_lints_tool_call", "read_lints")
            found = [
                d
                for file in success.files
                for d in file.diagnostics
                if d.source.startswith("pyright") and d.severity == "error" and d.start_line == 1
            ]
            if not found:
                raise SmokeFailure(f"no pyright error on line 1: {success}")
            return found[0]

        diagnostic = await poll("pyright's diagnostic", reported, 120)
        self.timings["lints_first_pyright"] = round(time.monotonic() - started, 2)
        print(f"info read_lints: {diagnostic.source}: {diagnostic.message}", flush=True)

    async def docker(self, client: ExecDaemonClient) -> None:
        """Says whether dockerd starts in this boot (a fact to report, not a check)."""
        try:
            out = await shell(client, DOCKER_PROBE)
        except SmokeFailure as error:
            out = str(error)
        print("info dockerd:", " | ".join(out.strip().splitlines())[:500], flush=True)

    async def desktop(self, client: ExecDaemonClient) -> None:
        async def drawn() -> Image.Image:
            image = await screenshot(client)
            if stddev(image) < MIN_DESKTOP_STDDEV:
                raise SmokeFailure(f"a flat frame (stddev {stddev(image):.1f})")
            return image

        image = await poll("a desktop on the screen", drawn, self.options.boot_timeout)
        assert isinstance(image, Image.Image)
        self.timings["boot_to_desktop"] = round(time.time() - self.options.since, 2)
        image.save(self.options.screenshots / "desktop.png")

    async def click(self, client: ExecDaemonClient) -> None:
        before = await screenshot(client)
        after = await screenshot(
            client, ComputerUseAction(click=ClickAction(coordinate=APPLICATIONS_MENU))
        )
        after.save(self.options.screenshots / "menu-open.png")
        changed = changed_pixels(before, after)
        # Close the menu again, whatever happened.
        await screenshot(client, ComputerUseAction(key=KeyAction(key="Escape")))
        if changed < MIN_CHANGED_PIXELS:
            raise SmokeFailure(f"only {changed} pixels changed after the click")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--token", required=True)
    parser.add_argument("--since", type=float, required=True, help="boot start, epoch seconds")
    parser.add_argument("--port", type=int, default=26053)
    parser.add_argument("--pty-port", type=int, default=26054)
    parser.add_argument("--boot-timeout", type=float, default=60.0)
    parser.add_argument("--boot-pid", type=int, default=0)
    parser.add_argument("--desktop", action="store_true")
    parser.add_argument("--probe-docker", action="store_true")
    parser.add_argument("--ide", action="store_true")
    parser.add_argument("--lints", action="store_true")
    parser.add_argument("--screenshots", type=Path, default=Path("."))
    options = parser.parse_args()
    global boot_pid
    boot_pid = options.boot_pid
    return asyncio.run(Smoke(options).run())


if __name__ == "__main__":
    sys.exit(main())
