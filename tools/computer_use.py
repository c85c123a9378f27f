"""computer_use_tool_call: runs a list of GUI actions on the daemon's X display, in order.

The model sees the screen at 1280x800 (API space); the display is 1920x1200, so every coordinate
is scaled (x1.5, rounded half up) on the way in and back on the way out. All actions are checked
before the first one runs: a bad coordinate or key name at action 3 must not leave actions 0-2
half done. Pointer actions and `type` go through XTest (tools/x11.py, tools/x11_keyboard.py:
characters the keymap lacks are bound to spare keycodes that stay bound); `key` combos through
xdotool, which knows every key name. Screenshots wait `--screenshot-delay-ms`
for the UI to settle, are scaled to 1280x800, encoded as webp, saved to
/tmp/computer-use/<5 hex>.webp and the last one is returned with its path.
"""

from __future__ import annotations

import asyncio
import io
import logging
import math
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf.message import Message

from agent.v1.computer_pb2 import (
    ClickAction,
    ComputerUseAction,
    ComputerUseArgs,
    ComputerUseError,
    ComputerUseResult,
    ComputerUseSuccess,
    Coordinate,
    CursorPositionAction,
    DragAction,
    KeyAction,
    MouseButton,
    MouseDownAction,
    MouseMoveAction,
    MouseUpAction,
    ScreenshotAction,
    ScrollAction,
    ScrollDirection,
    TypeAction,
    WaitAction,
)
from exec_daemon.kernel.config import off_without
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.desktop_control import DesktopControl
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.paths import create_exclusive, ensure_daemon_folder
from exec_daemon.kernel.runner import HelperFailed, run_helper
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, ToolSpec, no_subject
from tools.display import DisplayInfo, DisplayUnavailable
from tools.x11 import Frame, X11Session, XConnection, XConnectionLost
from tools.x11_keyboard import KeymapFull
from tools.x11_keys import UnknownKey, parse_keys

log = logging.getLogger(__name__)

API_WIDTH = 1280
API_HEIGHT = 800
SCREENSHOT_DIR = Path("/tmp/computer-use")
WEBP_QUALITY = 80
WEBP_METHOD = 2
# As the reference (xdotool type): 50 characters per X call, 12 ms apart.
TYPE_BATCH_CHARS = 50
TYPE_DELAY_MS = 12
XDOTOOL_SECONDS = 30.0
MAX_CLICKS = 3
MAX_SCROLL_AMOUNT = 100
MAX_WAIT_MS = 120_000
DRAG_STEPS = 10

X_BUTTONS = {
    MouseButton.MOUSE_BUTTON_UNSPECIFIED: 1,
    MouseButton.MOUSE_BUTTON_LEFT: 1,
    MouseButton.MOUSE_BUTTON_MIDDLE: 2,
    MouseButton.MOUSE_BUTTON_RIGHT: 3,
    MouseButton.MOUSE_BUTTON_BACK: 8,
    MouseButton.MOUSE_BUTTON_FORWARD: 9,
}
SCROLL_X_BUTTONS = {
    ScrollDirection.SCROLL_DIRECTION_UNSPECIFIED: 5,
    ScrollDirection.SCROLL_DIRECTION_UP: 4,
    ScrollDirection.SCROLL_DIRECTION_DOWN: 5,
    ScrollDirection.SCROLL_DIRECTION_LEFT: 6,
    ScrollDirection.SCROLL_DIRECTION_RIGHT: 7,
}

Point = tuple[int, int]


def _round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


@dataclass(frozen=True)
class Scaler:
    """API space (what the model sees) <-> display pixels."""

    display_width: int
    display_height: int

    def to_display(self, coordinate: Coordinate, what: str = "coordinate") -> Point:
        x, y = coordinate.x, coordinate.y
        if not (0 <= x < API_WIDTH and 0 <= y < API_HEIGHT):
            raise CodedError(
                ErrorCode.INVALID_COORDINATE,
                f"{what} ({x}, {y}) is off the {API_WIDTH}x{API_HEIGHT} screen",
            )
        return (
            min(_round_half_up(x * self.display_width / API_WIDTH), self.display_width - 1),
            min(_round_half_up(y * self.display_height / API_HEIGHT), self.display_height - 1),
        )

    def to_api(self, x: int, y: int) -> Coordinate:
        return Coordinate(
            x=min(_round_half_up(x * API_WIDTH / self.display_width), API_WIDTH - 1),
            y=min(_round_half_up(y * API_HEIGHT / self.display_height), API_HEIGHT - 1),
        )


@dataclass
class Run:
    """One call's actions in progress and what they produced."""

    session: X11Session
    display: DisplayInfo
    scaler: Scaler
    env: dict[str, str]
    screenshot_delay_s: float
    log: list[str] = field(default_factory=list)
    screenshot: bytes = b""
    screenshot_path: str = ""


@dataclass(frozen=True)
class Step:
    describe: str
    run: Callable[[Run], Awaitable[None]]


# --- planning: every action checked and turned into a step before anything runs --------------


def _point(scaler: Scaler, action: Message, name: str, *, required: bool) -> Point | None:
    if not action.HasField(name):
        if required:
            raise CodedError(ErrorCode.INVALID_ARGUMENT, f"{name} is required")
        return None
    return scaler.to_display(getattr(action, name), name)


def _button(value: int) -> int:
    if value not in X_BUTTONS:
        raise CodedError(ErrorCode.INVALID_ARGUMENT, f"unknown mouse button {value}")
    return X_BUTTONS[value]


def _at(point: Point | None) -> str:
    return f" at {point[0]},{point[1]}" if point else ""


def plan(action: ComputerUseAction, scaler: Scaler) -> Step:
    kind = action.WhichOneof("action")
    if kind is None:
        raise CodedError(ErrorCode.INVALID_ARGUMENT, "the action is empty (no action set)")
    planner = _PLANNERS[kind]
    return planner(getattr(action, kind), scaler)


def _plan_mouse_move(action: MouseMoveAction, scaler: Scaler) -> Step:
    point = _point(scaler, action, "coordinate", required=True)
    assert point is not None
    return Step(f"mouse_move{_at(point)}", _pointer_step(lambda x: x.move(*point)))


def _plan_click(action: ClickAction, scaler: Scaler) -> Step:
    point = _point(scaler, action, "coordinate", required=False)
    button = _button(action.button)
    count = action.count or 1
    if count > MAX_CLICKS:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT, f"click count {count} is more than {MAX_CLICKS}"
        )
    presses = [(button, True), (button, False)] * count
    return Step(
        f"click button {button} x{count}{_at(point)}", _pointer_step(_moved(point, presses))
    )


def _plan_button(down: bool) -> Callable[[MouseDownAction | MouseUpAction, Scaler], Step]:
    def planner(action: MouseDownAction | MouseUpAction, scaler: Scaler) -> Step:
        point = _point(scaler, action, "coordinate", required=False)
        button = _button(action.button)
        name = "mouse_down" if down else "mouse_up"
        return Step(
            f"{name} button {button}{_at(point)}", _pointer_step(_moved(point, [(button, down)]))
        )

    return planner


def _plan_drag(action: DragAction, scaler: Scaler) -> Step:
    start = _point(scaler, action, "start", required=True)
    end = _point(scaler, action, "end", required=True)
    assert start is not None and end is not None
    button = _button(action.button)
    path = [
        (
            _round_half_up(start[0] + (end[0] - start[0]) * step / DRAG_STEPS),
            _round_half_up(start[1] + (end[1] - start[1]) * step / DRAG_STEPS),
        )
        for step in range(DRAG_STEPS + 1)
    ]
    return Step(
        f"drag button {button} from {start[0]},{start[1]} to {end[0]},{end[1]}",
        _pointer_step(lambda x: x.drag(path, button)),
    )


def _plan_scroll(action: ScrollAction, scaler: Scaler) -> Step:
    point = _point(scaler, action, "coordinate", required=False)
    direction = action.direction
    if direction not in SCROLL_X_BUTTONS:
        raise CodedError(ErrorCode.INVALID_ARGUMENT, f"unknown scroll direction {direction}")
    amount = action.amount or 1
    if amount > MAX_SCROLL_AMOUNT:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT, f"scroll amount {amount} is more than {MAX_SCROLL_AMOUNT}"
        )
    button = SCROLL_X_BUTTONS[direction]
    presses = [(button, True), (button, False)] * amount
    name = ScrollDirection.Name(direction).removeprefix("SCROLL_DIRECTION_").lower()
    return Step(f"scroll {name} x{amount}{_at(point)}", _pointer_step(_moved(point, presses)))


def _plan_type(action: TypeAction, scaler: Scaler) -> Step:
    text = action.text
    if not text:
        raise CodedError(ErrorCode.INVALID_ARGUMENT, "text is empty")
    batches = [text[i : i + TYPE_BATCH_CHARS] for i in range(0, len(text), TYPE_BATCH_CHARS)]

    async def type_text(run: Run) -> None:
        for batch in batches:
            await run.session.call(_typed(batch))

    return Step(f"type {len(text)} characters", type_text)


def _plan_key(action: KeyAction, scaler: Scaler) -> Step:
    keys = action.key
    try:
        combos = parse_keys(keys)
    except UnknownKey as exc:
        raise CodedError(ErrorCode.UNKNOWN_KEY, str(exc)) from None

    async def press_keys(run: Run) -> None:
        await _xdotool(run, "key", "--delay", str(TYPE_DELAY_MS), "--", *combos)

    return Step(f"key {' '.join(combos)}", press_keys)


def _plan_wait(action: WaitAction, scaler: Scaler) -> Step:
    duration_ms = action.duration_ms
    if duration_ms > MAX_WAIT_MS:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT, f"wait of {duration_ms} ms is more than {MAX_WAIT_MS}"
        )

    async def wait(run: Run) -> None:
        await asyncio.sleep(duration_ms / 1000)

    return Step(f"wait {duration_ms} ms", wait)


def _plan_screenshot(action: ScreenshotAction, scaler: Scaler) -> Step:
    return Step("screenshot", _take_screenshot)


def _plan_cursor_position(action: CursorPositionAction, scaler: Scaler) -> Step:
    async def cursor_position(run: Run) -> None:
        position = await _cursor(run)
        run.log.append(f"  cursor at {position.x},{position.y}")

    return Step("cursor_position", cursor_position)


_PLANNERS: dict[str, Callable[[Any, Scaler], Step]] = {
    "mouse_move": _plan_mouse_move,
    "click": _plan_click,
    "mouse_down": _plan_button(True),
    "mouse_up": _plan_button(False),
    "drag": _plan_drag,
    "scroll": _plan_scroll,
    "type": _plan_type,
    "key": _plan_key,
    "wait": _plan_wait,
    "screenshot": _plan_screenshot,
    "cursor_position": _plan_cursor_position,
}


# --- running ----------------------------------------------------------------------------------


def _moved(point: Point | None, presses: list[tuple[int, bool]]) -> Callable[[XConnection], None]:
    def operation(connection: XConnection) -> None:
        if point is not None:
            connection.move(*point)
        connection.buttons(presses)

    return operation


def _typed(batch: str) -> Callable[[XConnection], None]:
    def operation(connection: XConnection) -> None:
        try:
            connection.type_text(batch, TYPE_DELAY_MS / 1000)
        except KeymapFull as exc:
            raise CodedError(ErrorCode.ACTION_FAILED, f"type: {exc}") from None

    return operation


def _pointer_step(operation: Callable[[XConnection], None]) -> Callable[[Run], Awaitable[None]]:
    async def step(run: Run) -> None:
        await run.session.call(operation)

    return step


async def _cursor(run: Run) -> Coordinate:
    x, y = await run.session.call(lambda connection: connection.pointer())
    return run.scaler.to_api(x, y)


async def _xdotool(run: Run, *args: str) -> None:
    env = {**run.env, "DISPLAY": run.display.name}
    try:
        done = await run_helper(["xdotool", *args], env=env, time_limit=XDOTOOL_SECONDS)
    except HelperFailed as exc:
        raise CodedError(exc.code, f"xdotool {args[0]}: {exc.message}") from None
    complaint = done.stderr.text().strip()
    if done.returncode != 0 or "No such key name" in complaint:
        log.warning("xdotool %s failed (%s): %s", args[0], done.returncode, complaint)
        raise CodedError(ErrorCode.ACTION_FAILED, f"xdotool {args[0]} failed: {complaint[-300:]}")


def encode_screenshot(frame: Frame) -> bytes:
    """1920x1200 BGRX -> 1280x800 webp (blocking; ~50-100 ms)."""
    from PIL import Image  # ~0.05 s to import: with the first screenshot, not at start

    image = Image.frombuffer("RGB", (frame.width, frame.height), frame.bgrx, "raw", "BGRX", 0, 1)
    if image.size != (API_WIDTH, API_HEIGHT):
        image = image.resize((API_WIDTH, API_HEIGHT), Image.Resampling.BILINEAR)
    out = io.BytesIO()
    image.save(out, "WEBP", quality=WEBP_QUALITY, method=WEBP_METHOD)
    return out.getvalue()


def save_screenshot(data: bytes, folder: Path = SCREENSHOT_DIR) -> Path:
    """Writes `data` to <folder>/<5 hex>.webp under a name no other screenshot has (blocking).

    The folder lies in /tmp, where sandboxed commands write: a symlink planted in its place is
    refused (OSError), and each file is created O_EXCL|O_NOFOLLOW."""
    ensure_daemon_folder(folder)
    while True:
        path = folder / f"{secrets.token_hex(3)[:5]}.webp"
        try:
            with os.fdopen(create_exclusive(folder, path.name, 0o644), "wb") as out:
                out.write(data)
            return path
        except FileExistsError:
            continue


async def _take_screenshot(run: Run) -> None:
    await asyncio.sleep(run.screenshot_delay_s)
    frame = await run.session.call(lambda connection: connection.grab())
    data = await asyncio.to_thread(encode_screenshot, frame)
    path = await asyncio.to_thread(save_screenshot, data)
    run.screenshot, run.screenshot_path = data, str(path)
    run.log.append(f"  saved {path} ({len(data)} bytes)")


# --- the handler ------------------------------------------------------------------------------


def _error(index: int, code: str, message: str) -> ComputerUseResult:
    return ComputerUseResult(error=ComputerUseError(action_index=index, code=code, message=message))


def _failed_at(index: int, code: str, message: str) -> ComputerUseResult:
    done = f" (actions 0-{index - 1} ran)" if index > 1 else " (action 0 ran)" if index else ""
    return _error(index, code, f"action {index}: {message}{done}")


async def computer_use(args: ComputerUseArgs, ctx: CallContext) -> ComputerUseResult:
    started = time.monotonic()
    if not ctx.daemon.config.computer_use_enabled:
        return _error(0, "unavailable", off_without("computer use", "--computer-use-enabled"))
    if not args.actions:
        return _error(0, "invalid_argument", "no actions given")
    control = ctx.daemon.service(DesktopControl)
    if (refusal := control.refusal()) is not None:
        return _error(0, refusal.code, f"{refusal.message}; nothing was done")
    session = ctx.daemon.service(X11Session)
    try:
        display = await session.display()
    except DisplayUnavailable as exc:
        return _error(0, "display_unavailable", str(exc))
    scaler = Scaler(display.width, display.height)
    steps: list[Step] = []
    for index, action in enumerate(args.actions):
        try:
            steps.append(plan(action, scaler))
        except CodedError as exc:
            return _error(index, exc.code, f"action {index}: {exc.message}; nothing was done")
    run = Run(
        session=session,
        display=display,
        scaler=scaler,
        env=ctx.daemon.env.snapshot(),
        screenshot_delay_s=ctx.daemon.config.screenshot_delay_ms / 1000,
    )
    async with session.lock:
        for index, step in enumerate(steps):
            run.log.append(f"{index} {step.describe}")
            if (refusal := control.refusal()) is not None:
                return _failed_at(index, refusal.code, refusal.message)
            try:
                await step.run(run)
            except CodedError as exc:
                return _failed_at(index, exc.code, exc.message)
            except (XConnectionLost, DisplayUnavailable) as exc:
                log.warning(
                    "computer use action %d (%s) lost the display: %s", index, step.describe, exc
                )
                return _failed_at(index, "display_error", "lost the connection to the X display")
        try:
            cursor = await _cursor(run)
        except (XConnectionLost, DisplayUnavailable):
            return _failed_at(len(steps), "display_error", "lost the connection to the X display")
    return ComputerUseResult(
        success=ComputerUseSuccess(
            action_count=len(steps),
            duration_ms=int((time.monotonic() - started) * 1000),
            screenshot=run.screenshot,
            screenshot_path=run.screenshot_path,
            cursor_position=cursor,
            log="\n".join(run.log),
        )
    )


COMPUTER_USE = ToolSpec(
    "computer_use_tool_call",
    computer_use,
    effects=Effect.MACHINE,  # it types and clicks in whatever runs on the screen
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("ComputerUse"),
    subject=no_subject,
)
