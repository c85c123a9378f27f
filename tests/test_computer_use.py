"""computer_use_tool_call against the daemon's own Xvfb and a real X program (tests/x11_app.py).

The app reports every input it gets in display coordinates, so each test checks what a user would
see: the button was pressed, the text is in the entry, the screenshot shows the window's colors
where they are, the pointer is where the model asked (API 1280x800 -> display 1920x1200).
"""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from PIL import Image
from Xlib import X
from Xlib import display as xdisplay

from agent.v1.computer_pb2 import (
    ClickAction,
    ComputerUseAction,
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
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon
from tests.interop import daemon_for_module
from tests.x11_app import COLORS, display_box
from tests.x11_support import (
    X11App,
    computer_use,
    computer_use_call,
    wait_until,
    x11_app,
    xvfb_of,
)

pytestmark = pytest.mark.timeout(60)

SCREENSHOT_DELAY_MS = 50


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with daemon_for_module(
        tmp_path_factory,
        "--computer-use-enabled",
        "--screenshot-delay-ms",
        str(SCREENSHOT_DELAY_MS),
    ) as running:
        yield running


@pytest.fixture(scope="module")
def display(daemon: RunningDaemon) -> str:
    found = xvfb_of(daemon)
    assert found, f"the daemon started no Xvfb:\n{daemon.log()}"
    return found[0]


@pytest.fixture
async def client(daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with daemon.client() as connected:
        yield connected


@pytest.fixture
def app(display: str, tmp_path: Path) -> Iterator[X11App]:
    with x11_app(display, tmp_path) as running:
        yield running


def api(x: float, y: float) -> Coordinate:
    """The API-space coordinate of display pixel (x, y)."""
    return Coordinate(x=round(x / 1.5), y=round(y / 1.5))


def to_display(coordinate: Coordinate) -> tuple[int, int]:
    return int(coordinate.x * 1.5 + 0.5), int(coordinate.y * 1.5 + 0.5)


def center(name: str) -> Coordinate:
    left, top, right, bottom = display_box(name)
    return api((left + right) / 2, (top + bottom) / 2)


def move(at: Coordinate) -> ComputerUseAction:
    return ComputerUseAction(mouse_move=MouseMoveAction(coordinate=at))


def click(at: Coordinate, button: int = 0, count: int = 0) -> ComputerUseAction:
    return ComputerUseAction(click=ClickAction(coordinate=at, button=button, count=count))  # type: ignore[arg-type]


def type_text(text: str) -> ComputerUseAction:
    return ComputerUseAction(type=TypeAction(text=text))


def key(keys: str) -> ComputerUseAction:
    return ComputerUseAction(key=KeyAction(key=keys))


def scroll(at: Coordinate, direction: int, amount: int) -> ComputerUseAction:
    return ComputerUseAction(scroll=ScrollAction(coordinate=at, direction=direction, amount=amount))  # type: ignore[arg-type]


SCREENSHOT = ComputerUseAction(screenshot=ScreenshotAction())
CURSOR = ComputerUseAction(cursor_position=CursorPositionAction())


def pointer_on(display: str) -> tuple[int, int]:
    connection = xdisplay.Display(display)
    try:
        reply = connection.screen().root.query_pointer()
        return reply.root_x, reply.root_y
    finally:
        connection.close()


async def test_a_click_at_scaled_coordinates_presses_the_button(
    client: ExecDaemonClient, app: X11App
) -> None:
    result = await computer_use(client, click(center("button")))
    assert result.WhichOneof("result") == "success", result
    assert result.success.action_count == 1
    app.wait_for("button")


async def test_typed_text_and_keys_reach_the_focused_entry(
    client: ExecDaemonClient, app: X11App
) -> None:
    result = await computer_use(
        client,
        click(center("entry")),
        type_text("héllo, wörld ✓ 42"),
        key("BackSpace"),
        key("ctrl+a"),  # Tk entry: to the line's start
        type_text("> "),
        key("End shift+Home"),  # several combos in one key action; selects all
        ComputerUseAction(wait=WaitAction(duration_ms=20)),
    )
    assert result.WhichOneof("result") == "success", result
    wait_until(lambda: app.last_text() == "> héllo, wörld ✓ 4", what=f"text, got {app.events()}")
    keysyms = [event["keysym"] for event in app.events("key")]
    assert keysyms[-3:] == ["End", "Shift_L", "Home"]
    assert "3 key ctrl+a" in result.success.log.splitlines()


async def test_text_longer_than_a_batch_is_typed_whole_and_in_order(
    client: ExecDaemonClient, app: X11App
) -> None:
    text = "".join(f"{i:02d}-" for i in range(40))  # 120 characters: three xdotool batches
    result = await computer_use(client, click(center("entry")), type_text(text))
    assert result.WhichOneof("result") == "success", result
    wait_until(lambda: app.last_text() == text, what=f"the text, got {app.last_text()!r}")


class LateReader:
    """An X client with the keyboard focus that reads its key events only when asked, late.

    A slow application: each MappingNotify makes it fetch the keymap as it is *then*, and each key
    press is looked up in that map, as Xlib's clients do.
    """

    def __init__(self, display: str) -> None:
        self.connection = xdisplay.Display(display)
        screen = self.connection.screen()
        self.window = screen.root.create_window(
            0, 0, 200, 100, 0, screen.root_depth, event_mask=X.KeyPressMask | X.StructureNotifyMask
        )
        self.window.map()
        while self.connection.next_event().type != X.MapNotify:
            pass
        self.window.set_input_focus(X.RevertToParent, X.CurrentTime)
        self.connection.sync()

    def typed(self) -> str:
        """The characters of the key presses received so far (a NoSymbol key reads as "?")."""
        self.connection.sync()
        chars = []
        while self.connection.pending_events():
            event = self.connection.next_event()
            if event.type == X.MappingNotify:
                self.connection.refresh_keyboard_mapping(event)
            elif event.type == X.KeyPress:
                level = 1 if event.state & X.ShiftMask else 0
                chars.append(char_of(self.connection.keycode_to_keysym(event.detail, level)))
        return "".join(chars)

    def close(self) -> None:
        self.window.destroy()
        self.connection.close()


def char_of(keysym: int) -> str:
    if 0xFFE1 <= keysym <= 0xFFEE:  # a modifier: Shift, Control, ...
        return ""
    if 0x20 <= keysym <= 0xFF:
        return chr(keysym)
    if keysym & 0xFF000000 == 0x01000000:
        return chr(keysym & 0xFFFFFF)
    return "?"


async def test_text_the_keymap_lacks_reads_right_in_an_app_that_reads_late(
    client: ExecDaemonClient, display: str
) -> None:
    # Two batches; é, ö, ✓ and the ĉ row are not in Xvfb's keymap, H and ! need shift.
    text = "Héllo, wörld ✓ 42! " * 3 + "ĉŝĝĥĵŭ"
    reader = LateReader(display)
    try:
        assert reader.connection.get_input_focus().focus == reader.window
        result = await computer_use(client, type_text(text))
        assert result.WhichOneof("result") == "success", result
        assert reader.typed() == text
        # The bindings are kept: another call's characters do not undo the first one's.
        result = await computer_use(client, type_text("ü€é"))
        assert result.WhichOneof("result") == "success", result
        assert reader.typed() == "ü€é"
    finally:
        reader.close()


async def test_more_missing_characters_than_spare_keycodes_are_typed_whole(
    client: ExecDaemonClient, app: X11App
) -> None:
    # 33 letters Xvfb's keymap lacks, for its 19 empty keycodes: typed in runs, rebinding the
    # keycodes used longest ago.
    text = "съешь же ещё этих мягких французских булок, да выпей чаю"
    assert len(set(text)) > 19
    result = await computer_use(client, click(center("entry")), type_text(text))
    assert result.WhichOneof("result") == "success", result
    wait_until(lambda: app.last_text() == text, what=f"the text, got {app.last_text()!r}")


def read_file(path: str) -> bytes:
    return Path(path).read_bytes()


def close_to(pixel: tuple[int, ...], color: str, tolerance: int = 24) -> bool:
    wanted = tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))
    return all(abs(a - b) <= tolerance for a, b in zip(pixel[:3], wanted, strict=True))


async def test_a_screenshot_is_a_1280x800_webp_showing_the_screen(
    client: ExecDaemonClient, app: X11App
) -> None:
    result = await computer_use(client, SCREENSHOT)
    assert result.WhichOneof("result") == "success", result
    success = result.success
    assert success.duration_ms >= SCREENSHOT_DELAY_MS
    assert re.fullmatch(r"/tmp/computer-use/[0-9a-f]{5}\.webp", success.screenshot_path)
    assert read_file(success.screenshot_path) == success.screenshot
    image = Image.open(io.BytesIO(success.screenshot))
    assert (image.format, image.size) == ("WEBP", (1280, 800))
    rgb = image.convert("RGB")
    for name, color in COLORS.items():
        at = center(name)
        assert close_to(rgb.getpixel((at.x, at.y)), color), (name, rgb.getpixel((at.x, at.y)))
    # Edges land where the scaling says: the red patch starts at display x=150 (API 100).
    left, top, _right, _bottom = display_box("red")
    assert close_to(rgb.getpixel((int(left / 1.5) + 2, int(top / 1.5) + 2)), COLORS["red"])
    assert not close_to(rgb.getpixel((int(left / 1.5) - 3, int(top / 1.5) + 2)), COLORS["red"])


async def test_the_last_of_several_screenshots_is_returned(client: ExecDaemonClient) -> None:
    result = await computer_use(client, SCREENSHOT, SCREENSHOT)
    assert result.WhichOneof("result") == "success", result
    saved = re.findall(r"saved (\S+\.webp)", result.success.log)
    assert len(saved) == 2 and saved[1] == result.success.screenshot_path
    assert all(read_file(path).startswith(b"RIFF") for path in saved)


async def test_cursor_position_after_mouse_move_is_in_api_coordinates(
    client: ExecDaemonClient, display: str
) -> None:
    target = Coordinate(x=321, y=123)
    result = await computer_use(client, move(target), CURSOR)
    assert result.WhichOneof("result") == "success", result
    assert (result.success.cursor_position.x, result.success.cursor_position.y) == (321, 123)
    assert "  cursor at 321,123" in result.success.log.splitlines()
    # On the display the pointer is at 1.5x, rounded half up.
    assert pointer_on(display) == (482, 185)
    corner = Coordinate(x=1279, y=799)
    result = await computer_use(client, move(corner), CURSOR)
    assert (result.success.cursor_position.x, result.success.cursor_position.y) == (1279, 799)
    assert pointer_on(display) == (1919, 1199)


async def test_scroll_sends_wheel_clicks_at_the_coordinate(
    client: ExecDaemonClient, app: X11App
) -> None:
    at = center("canvas")
    result = await computer_use(
        client,
        scroll(at, ScrollDirection.SCROLL_DIRECTION_DOWN, 3),
        scroll(at, ScrollDirection.SCROLL_DIRECTION_UP, 2),
        scroll(at, ScrollDirection.SCROLL_DIRECTION_RIGHT, 1),
        scroll(at, ScrollDirection.SCROLL_DIRECTION_UNSPECIFIED, 0),  # down, once
    )
    assert result.WhichOneof("result") == "success", result
    presses = app.wait_for("press", 7)
    # Tk reports the horizontal wheel (X buttons 6/7) as Shift + 4/5.
    seen = [(event["num"], event["state"] & 1) for event in presses]
    assert seen == [(5, 0)] * 3 + [(4, 0)] * 2 + [(5, 1), (5, 0)]
    assert {(event["x"], event["y"]) for event in presses} == {to_display(at)}


async def test_mouse_buttons_map_to_x_buttons(client: ExecDaemonClient, app: X11App) -> None:
    at = center("canvas")
    buttons = [
        MouseButton.MOUSE_BUTTON_RIGHT,
        MouseButton.MOUSE_BUTTON_MIDDLE,
        MouseButton.MOUSE_BUTTON_BACK,
        MouseButton.MOUSE_BUTTON_FORWARD,
        MouseButton.MOUSE_BUTTON_LEFT,
    ]
    result = await computer_use(client, *(click(at, button) for button in buttons))
    assert result.WhichOneof("result") == "success", result
    presses = app.wait_for("press", len(buttons))
    assert [event["num"] for event in presses] == [3, 2, 8, 9, 1]


async def test_a_double_click_is_seen_as_one(client: ExecDaemonClient, app: X11App) -> None:
    result = await computer_use(client, click(center("canvas"), count=2))
    assert result.WhichOneof("result") == "success", result
    [double] = app.wait_for("double_click")
    assert (double["x"], double["y"]) == to_display(center("canvas"))


async def test_drag_presses_moves_and_releases(client: ExecDaemonClient, app: X11App) -> None:
    left, top, right, bottom = display_box("canvas")
    start, end = api(left + 30, top + 30), api(right - 30, bottom - 30)
    result = await computer_use(client, ComputerUseAction(drag=DragAction(start=start, end=end)))
    assert result.WhichOneof("result") == "success", result
    [release] = app.wait_for("release")
    [press] = app.events("press")
    motions = app.events("drag_motion")
    assert (press["num"], press["x"], press["y"]) == (1, *to_display(start))
    assert (release["num"], release["x"], release["y"]) == (1, *to_display(end))
    # Motion with the button held in between (Tk folds consecutive motions into one).
    assert motions and (motions[-1]["x"], motions[-1]["y"]) == to_display(end)


async def test_mouse_down_and_up_apart_make_a_drag(client: ExecDaemonClient, app: X11App) -> None:
    left, top, right, _bottom = display_box("canvas")
    start, end = api(left + 50, top + 50), api(right - 50, top + 60)
    result = await computer_use(
        client,
        ComputerUseAction(mouse_down=MouseDownAction(coordinate=start)),
        move(end),
        ComputerUseAction(mouse_up=MouseUpAction()),  # where the pointer is
    )
    assert result.WhichOneof("result") == "success", result
    [release] = app.wait_for("release")
    [press] = app.events("press")
    assert (press["x"], press["y"]) == to_display(start)
    assert (release["x"], release["y"]) == to_display(end)


async def test_an_unknown_key_fails_the_call_before_anything_runs(
    client: ExecDaemonClient, app: X11App
) -> None:
    result = await computer_use(
        client, click(center("entry")), type_text("abc"), key("ctrl+nosuchkey")
    )
    assert result.WhichOneof("result") == "error", result
    assert (result.error.code, result.error.action_index) == ("unknown_key", 2)
    assert "nosuchkey" in result.error.message
    # A key typed after it is the first key the app sees and the entry holds only it: the
    # actions before the bad key (typing "abc") never ran.
    assert (await computer_use(client, key("z"))).WhichOneof("result") == "success"
    [typed] = app.wait_for("key")
    assert typed["keysym"] == "z"
    assert app.last_text() == "z"


@pytest.mark.parametrize(
    ("actions", "index", "code"),
    [
        ([], 0, "invalid_argument"),
        ([ComputerUseAction()], 0, "invalid_argument"),
        ([CURSOR, move(Coordinate(x=1280, y=10))], 1, "invalid_coordinate"),
        ([move(Coordinate(x=10, y=-1))], 0, "invalid_coordinate"),
        ([ComputerUseAction(mouse_move=MouseMoveAction())], 0, "invalid_argument"),
        ([CURSOR, CURSOR, type_text("")], 2, "invalid_argument"),
        ([key("")], 0, "unknown_key"),
        ([key("ctrl+")], 0, "unknown_key"),
        ([click(Coordinate(x=1, y=1), count=4)], 0, "invalid_argument"),
        ([click(Coordinate(x=1, y=1), button=42)], 0, "invalid_argument"),
        ([scroll(Coordinate(x=1, y=1), 9, 1)], 0, "invalid_argument"),
        ([ComputerUseAction(wait=WaitAction(duration_ms=10**6))], 0, "invalid_argument"),
        (
            [ComputerUseAction(drag=DragAction(start=Coordinate(x=1, y=1)))],
            0,
            "invalid_argument",
        ),
    ],
)
async def test_bad_actions_are_typed_errors_with_their_index(
    client: ExecDaemonClient, actions: list[ComputerUseAction], index: int, code: str
) -> None:
    result = await computer_use(client, *actions)
    assert result.WhichOneof("result") == "error", result
    assert (result.error.action_index, result.error.code) == (index, code), result.error
    assert result.error.message


async def test_concurrent_calls_do_not_interleave_their_actions(
    client: ExecDaemonClient,
) -> None:
    def pinned(at: Coordinate) -> list[ComputerUseAction]:
        return [move(at), ComputerUseAction(wait=WaitAction(duration_ms=150)), CURSOR]

    first, second = Coordinate(x=100, y=100), Coordinate(x=900, y=700)
    results = await asyncio.gather(
        computer_use(client, *pinned(first)), computer_use(client, *pinned(second))
    )
    positions = [(r.success.cursor_position.x, r.success.cursor_position.y) for r in results]
    assert positions == [(100, 100), (900, 700)]


async def test_an_aborted_call_ends_at_once_and_frees_the_display(
    client: ExecDaemonClient,
) -> None:
    long_wait = ComputerUseAction(wait=WaitAction(duration_ms=60_000))
    async with client.exec_stream() as stream:
        call = await stream.start(computer_use_call(move(Coordinate(x=5, y=5)), long_wait))
        await asyncio.sleep(0.3)
        await stream.abort(call.id)
        outcome = await asyncio.wait_for(call.wait(), 5)
    assert outcome.result is not None, outcome.error
    assert outcome.result.computer_use_tool_call.result.WhichOneof("result") == "aborted"
    # The aborted call held the display's lock; the next call must not wait for it.
    result = await asyncio.wait_for(computer_use(client, CURSOR), 5)
    assert (result.success.cursor_position.x, result.success.cursor_position.y) == (5, 5)
