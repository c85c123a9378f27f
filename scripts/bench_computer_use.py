#!/usr/bin/env python3
"""Computer-use latencies on a real Xvfb (1920x1200), printed as JSON.

1. screenshot pipeline in this process, through the daemon's own code (X11Session's persistent
   mss grabber, then tools.computer_use.encode_screenshot: resize to 1280x800 + webp q80 m2):
   grab, encode and total medians, on three screens: blank, the tests' Tk app (color patches and
   widgets) and a full screen of text (an editor-like worst realistic case).
2. click: XTest in-process (move + press + release + round trip, as the daemon does) against the
   `xdotool mousemove X Y click 1` CLI, in alternating rounds of the same run.
3. end to end through the real daemon (subprocess, ControlService.Exec, screenshot delay 0): a
   click, a key, a screenshot.

Every answer is checked (frames of the screen's size, webp images, xdotool exiting 0, each
daemon call a success with a 1280x800 webp for screenshots and the pointer where the click
put it); a wrong one ends the run with an error. `--quick` (the test suite): 3 rounds.

    .venv/bin/python scripts/bench_computer_use.py [--rounds N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.* when run as a script

from agent.v1.computer_pb2 import (
    ClickAction,
    ComputerUseAction,
    Coordinate,
    KeyAction,
    ScreenshotAction,
)
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.state import Daemon
from scripts.benchmarking import add_quick_flag, expect
from tests.daemon_process import running_daemon
from tests.x11_support import computer_use, x11_app
from tools.computer_use import API_HEIGHT, API_WIDTH, encode_screenshot
from tools.x11 import X11Session, XConnection

TEXT_SCREEN = """
import tkinter as tk
root = tk.Tk()
root.geometry("1920x1200+0+0")
text = tk.Text(root, font=("TkFixedFont", 11), wrap="none")
text.pack(fill="both", expand=True)
line = "    def handler(args: ComputerUseArgs, ctx: CallContext) -> Result:  # {n:04d} ok\\n"
text.insert("end", "".join(line.format(n=n) for n in range(120)))
root.after(300, lambda: print("ready", flush=True))
root.mainloop()
"""


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 3),
        "p90_ms": round(ordered[max(0, int(len(ordered) * 0.9) - 1)] * 1000, 3),
        "n": len(ordered),
    }


async def timed(action: Callable[[], Awaitable[Any]], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        await action()
        samples.append(time.perf_counter() - started)
    return samples


def expect_webp(data: bytes) -> None:
    expect(data[:4] == b"RIFF" and data[8:12] == b"WEBP", f"not a webp image: {data[:16]!r}")
    width, height = webp_size(data)
    expect((width, height) == (API_WIDTH, API_HEIGHT), f"a {width}x{height} screenshot")


def webp_size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return image.size


@contextmanager
def text_screen(display: str) -> Iterator[None]:
    process = subprocess.Popen(
        [sys.executable, "-c", TEXT_SCREEN],
        env={**os.environ, "DISPLAY": display},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield
    finally:
        process.kill()
        process.wait()


async def screenshot_pipeline(
    session: X11Session, rounds: int, screen: tuple[int, int]
) -> dict[str, Any]:
    grabs, encodes, totals, sizes = [], [], [], []
    for _ in range(rounds):
        started = time.perf_counter()
        frame = await session.call(lambda connection: connection.grab())
        grabbed = time.perf_counter()
        data = await asyncio.to_thread(encode_screenshot, frame)
        done = time.perf_counter()
        expect((frame.width, frame.height) == screen, f"a {frame.width}x{frame.height} frame")
        expect_webp(data)
        grabs.append(grabbed - started)
        encodes.append(done - grabbed)
        totals.append(done - started)
        sizes.append(len(data))
    return {
        "grab": summary(grabs),
        "resize_and_webp": summary(encodes),
        "total": summary(totals),
        "webp_bytes": int(statistics.median(sizes)),
    }


def xtest_click(connection: XConnection) -> None:
    connection.move(700, 500)
    connection.buttons([(1, True), (1, False)])


async def clicks(session: X11Session, display: str, rounds: int) -> dict[str, Any]:
    xtest, cli = [], []
    env = {**os.environ, "DISPLAY": display}
    for _ in range(rounds):
        xtest += await timed(lambda: session.call(xtest_click), 5)
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            "xdotool", "mousemove", "700", "500", "click", "1", env=env
        )
        await process.wait()
        cli.append(time.perf_counter() - started)
        expect(process.returncode == 0, f"xdotool exited with {process.returncode}")
    result = {"xtest_in_process": summary(xtest), "xdotool_cli": summary(cli)}
    result["xdotool_over_xtest"] = round(
        result["xdotool_cli"]["median_ms"] / max(result["xtest_in_process"]["median_ms"], 1e-6), 1
    )
    return result


async def in_process(rounds: int, scratch: Path) -> dict[str, Any]:
    daemon = Daemon(DaemonConfig(auth_token="bench", workspace=scratch))
    daemon.env.update({}, unset=["DISPLAY"])  # always the daemon's own Xvfb
    session = daemon.service(X11Session)
    try:
        display = (await session.display()).name
        results: dict[str, Any] = {"display": display}
        first = await session.call(lambda connection: connection.grab())  # connect, warm up
        screen = (first.width, first.height)
        expect(screen == (1920, 1200), f"the display is {screen}, not 1920x1200")
        results["screenshot_blank"] = await screenshot_pipeline(session, rounds, screen)
        with x11_app(display, scratch):
            results["screenshot_app"] = await screenshot_pipeline(session, rounds, screen)
        with text_screen(display):
            results["screenshot_text"] = await screenshot_pipeline(session, rounds, screen)
        results["click"] = await clicks(session, display, rounds)
        return results
    finally:
        await daemon.aclose()


async def end_to_end(rounds: int, scratch: Path) -> dict[str, Any]:
    workspace = scratch / "workspace"
    workspace.mkdir()
    flags = ("--computer-use-enabled", "--screenshot-delay-ms", "0")
    with running_daemon(workspace, scratch / "state", *flags) as daemon:
        async with daemon.client() as client:
            click = ComputerUseAction(click=ClickAction(coordinate=Coordinate(x=400, y=300)))
            key = ComputerUseAction(key=KeyAction(key="shift"))
            shot = ComputerUseAction(screenshot=ScreenshotAction())
            await checked(client, shot)  # warm up
            return {
                "click": summary(await timed(lambda: checked(client, click), rounds * 2)),
                "key_xdotool": summary(await timed(lambda: checked(client, key), rounds)),
                "screenshot": summary(await timed(lambda: checked(client, shot), rounds)),
            }


async def checked(client: Any, action: ComputerUseAction) -> None:
    """One action through the daemon; it must succeed and do what it was asked."""
    result = await computer_use(client, action)
    expect(result.WhichOneof("result") == "success", f"computer_use failed: {result}")
    success = result.success
    expect(success.action_count == 1, f"{success.action_count} actions done, not 1")
    kind = action.WhichOneof("action")
    if kind == "screenshot":
        expect_webp(success.screenshot)
    if kind == "click":
        where = success.cursor_position
        wanted = action.click.coordinate
        expect((where.x, where.y) == (wanted.x, wanted.y), f"the pointer is at {where}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    add_quick_flag(parser)
    options = parser.parse_args()
    if options.quick:
        options.rounds = 3
    with tempfile.TemporaryDirectory(prefix="bench-cu-") as scratch:
        results = {
            "cpu_count": os.cpu_count(),
            "load_average": [round(load, 2) for load in os.getloadavg()],
            "in_process": await in_process(options.rounds, Path(scratch)),
            "end_to_end_daemon": await end_to_end(options.rounds, Path(scratch)),
        }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
