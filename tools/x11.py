"""One X connection per daemon for computer use: pointer and text input through XTest, screen grabs.

XTest from python-xlib costs ~0.1 ms an event where the `xdotool` CLI costs ~100 ms a click
(and `mousemove --sync` to where the pointer already is waits 15 s for a motion that never
comes). The grabber is one persistent `mss` instance (~2-6 ms a 1920x1200 frame). All of it lives
on one dedicated thread, the only one that touches the connection (X libraries are not
thread-safe, and the event loop must never wait on X).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from Xlib import X
from Xlib import error as xerror
from Xlib.ext import xtest

from exec_daemon.kernel.state import Daemon
from tools.display import DisplayInfo, DisplayService, DisplayUnavailable
from tools.x11_keyboard import Keyboard

if TYPE_CHECKING:
    # mss and Xlib.display (~0.1 s to import) come with the first X connection, not at start.
    import mss

log = logging.getLogger(__name__)

T = TypeVar("T")

SCROLL_BUTTONS = {"up": 4, "down": 5, "left": 6, "right": 7}


class XConnectionLost(Exception):
    """The X server went away or refused a request; the next call reconnects."""


@dataclass(frozen=True)
class Frame:
    """A screen grab: BGRX pixels, 4 bytes each, row after row."""

    width: int
    height: int
    bgrx: bytearray


def open_grabber(name: str) -> mss.MSS:
    """mss's XCB grabber, or its Xlib one for a screen the XCB one refuses.

    mss 10's XCB backends look for the root visual only among the first list of depth-24
    visuals; Xtigervnc (the VM's display) lists depth 24 twice and has it in the second.
    """
    import mss

    try:
        return mss.MSS(display=name)
    except mss.ScreenShotError as error:
        log.info("screenshots of %s through Xlib (%s)", name, error)
        return mss.MSS(display=name, backend="xlib")


class XConnection:
    """The blocking X calls; used only from the session's thread."""

    def __init__(self, info: DisplayInfo) -> None:
        from Xlib import display as xdisplay

        self.info = info
        self._display = xdisplay.Display(info.name)
        if not self._display.has_extension("XTEST"):
            self._display.close()
            raise DisplayUnavailable(f"display {info.name} has no XTEST extension")
        self._root = self._display.screen().root
        self._keyboard = Keyboard(self._display)
        self._grabber = open_grabber(info.name)

    def move(self, x: int, y: int) -> None:
        xtest.fake_input(self._display, X.MotionNotify, x=x, y=y)
        self._display.sync()

    def buttons(self, presses: list[tuple[int, bool]]) -> None:
        """Presses (True) and releases (False) buttons in order, then waits for the server."""
        for button, down in presses:
            xtest.fake_input(self._display, X.ButtonPress if down else X.ButtonRelease, button)
        self._display.sync()

    def drag(self, path: list[tuple[int, int]], button: int) -> None:
        """Presses `button` at path[0], moves through the path, releases at its end."""
        first, *rest = path
        xtest.fake_input(self._display, X.MotionNotify, x=first[0], y=first[1])
        xtest.fake_input(self._display, X.ButtonPress, button)
        # Intermediate motion: toolkits start a drag only after seeing the pointer move with
        # the button held; a few steps look like a hand's drag to all of them.
        for x, y in rest:
            xtest.fake_input(self._display, X.MotionNotify, x=x, y=y)
        self._display.sync()
        xtest.fake_input(self._display, X.ButtonRelease, button)
        self._display.sync()

    def type_text(self, text: str, delay_s: float) -> None:
        """Types `text` key by key, `delay_s` apart (tools/x11_keyboard.py)."""
        self._keyboard.type_text(text, delay_s)

    def pointer(self) -> tuple[int, int]:
        reply = self._root.query_pointer()
        return int(reply.root_x), int(reply.root_y)

    def grab(self) -> Frame:
        region = {"left": 0, "top": 0, "width": self.info.width, "height": self.info.height}
        shot = self._grabber.grab(region)
        return Frame(shot.width, shot.height, shot.raw)

    def close(self) -> None:
        for closer in (self._grabber.close, self._display.close):
            try:
                closer()
            except Exception:
                log.debug("closing the X connection", exc_info=True)


def x_failures() -> tuple[type[Exception], ...]:
    """What a dead or refusing X server raises through python-xlib and mss."""
    import mss

    return (
        xerror.ConnectionClosedError,
        xerror.DisplayError,
        xerror.XError,
        mss.ScreenShotError,
        OSError,
    )


class X11Session:
    """One per daemon (`daemon.service(X11Session)`): runs X calls on its own thread.

    `lock` is held by a computer_use call for its whole action list, so the actions of two calls
    never interleave on the one pointer and keyboard.
    """

    def __init__(self, daemon: Daemon) -> None:
        # Created first, so the daemon closes it after this session (services close newest first).
        self.displays = daemon.service(DisplayService)
        self.lock = asyncio.Lock()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="x11")
        self._connection: XConnection | None = None

    async def display(self) -> DisplayInfo:
        return await self.displays.ensure()

    async def call(self, operation: Callable[[XConnection], T]) -> T:
        """Runs `operation` on the X thread, connected to the current display."""
        info = await self.displays.ensure()
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._thread, self._run, info, operation)
        except XConnectionLost:
            self.displays.invalidate(info)
            raise

    def _run(self, info: DisplayInfo, operation: Callable[[XConnection], T]) -> T:
        try:
            if self._connection is None or self._connection.info != info:
                self._disconnect()
                self._connection = XConnection(info)
            return operation(self._connection)
        except x_failures() as exc:
            log.warning("X call on %s failed: %r", info.name, exc)
            self._disconnect()
            raise XConnectionLost(str(exc)) from exc

    def _disconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._disconnect)
        self._thread.shutdown(wait=False)
