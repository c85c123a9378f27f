"""The daemon's X display: the one computer use and screen recording act on.

`$DISPLAY` (of the daemon's environment) is used when it is set and answers; otherwise the daemon
starts its own Xvfb at 1920x1200x24, 96 DPI (as the reference VM's display) on the first free
display number (no /tmp/.X<n>-lock; Xvfb takes the lock itself, atomically, and a daemon that
loses a race takes the next number), and puts DISPLAY into the environment that shells and
terminals get. The Xvfb it started ends with the daemon. It listens on its abstract socket only
(X_SERVER_LISTEN_OPTIONS): unreachable from every sandbox.

Not `Xvfb -displayfd`: it would pick the number race-free, but then takes no lock file, so the
next `xvfb-run` or `Xvfb :N` looking for a free number would pick the same one.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from exec_daemon.kernel.runner import Helper, HelperFailed, start_helper
from exec_daemon.kernel.state import Daemon

log = logging.getLogger(__name__)

XVFB_WIDTH = 1920
XVFB_HEIGHT = 1200
XVFB_DEPTH = 24
XVFB_DPI = 96
# :0 is left to a real console's X server, as on the reference VM (its display is :1).
FIRST_DISPLAY_NUMBER = 1
MAX_LAUNCHES = 10
# Xvfb answers in ~0.4 s on an idle machine; a loaded 2-core VM can take several seconds.
XVFB_START_SECONDS = 20.0
PROBE_SECONDS = 3.0
# No TCP, and no socket file in /tmp/.X11-unix: the abstract socket (@/tmp/.X11-unix/X<n>) only,
# which Landlock keeps every sandbox from connecting to (created outside it), old or new; a socket
# file would be reachable from a sandbox that started before it was bound. Xlib and xcb clients
# try the abstract socket first. scripts/image/desktop-init starts the desktop's X server so too.
X_SERVER_LISTEN_OPTIONS = ("-nolisten", "tcp", "-nolisten", "unix")
STOP_SECONDS = 2.0


class DisplayUnavailable(Exception):
    """No X display could be found or started; the message is fit for the user."""


@dataclass(frozen=True)
class DisplayInfo:
    name: str  # e.g. ":1"
    width: int
    height: int
    # True when this daemon started the X server (and will end it).
    owned: bool


def probe_display(name: str) -> tuple[int, int] | None:
    """The size of the first screen of display `name`, or None when it does not answer (blocking)."""
    # python-xlib's display (~0.07 s to import) only when a display is probed, not at start.
    from Xlib import display as xdisplay
    from Xlib import error as xerror

    try:
        connection = xdisplay.Display(name)
    except (xerror.DisplayError, xerror.ConnectionClosedError, OSError) as exc:
        log.debug("display %s does not answer: %s", name, exc)
        return None
    try:
        screen = connection.screen()
        return int(screen.width_in_pixels), int(screen.height_in_pixels)
    finally:
        connection.close()


class DisplayService:
    """One per daemon (`daemon.service(DisplayService)`): `await ensure()` gives the display."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        self._lock = asyncio.Lock()
        self._info: DisplayInfo | None = None
        self._xvfb: Helper | None = None
        self._xvfb_number = -1
        self._xvfb_log: IO[bytes] | None = None

    async def ensure(self) -> DisplayInfo:
        """The display, attached to or started on first use (and restarted if our Xvfb died)."""
        async with self._lock:
            self._forget_dead_xvfb()
            if self._info is not None:
                return self._info
            self._info = await self._attach_existing() or await self._start_xvfb()
            return self._info

    def invalidate(self, info: DisplayInfo) -> None:
        """A user of `info` lost its connection: the next `ensure()` looks again."""
        if self._info == info:
            self._info = None

    def _forget_dead_xvfb(self) -> None:
        process = self._xvfb
        if process is None or process.returncode is None:
            return
        log.warning("Xvfb on :%d exited with %s", self._xvfb_number, process.returncode)
        # Killed, it could not remove its lock: that number would look taken for ever.
        _remove_lock_of(self._xvfb_number, process.pid)
        if self._daemon.env.get("DISPLAY") == f":{self._xvfb_number}":
            # A server that takes the number next is not ours to act on: start our own again.
            self._daemon.env.update({}, unset=["DISPLAY"])
        self._xvfb = None
        self._info = None

    async def _attach_existing(self) -> DisplayInfo | None:
        name = self._daemon.env.get("DISPLAY")
        if not name:
            return None
        size = await _probe_bounded(name)
        if size is None:
            log.info("DISPLAY=%s does not answer; starting an Xvfb", name)
            return None
        owned = self._xvfb is not None and self._xvfb.returncode is None
        log.info("using display %s (%dx%d)", name, *size)
        return DisplayInfo(name, size[0], size[1], owned=owned)

    async def _start_xvfb(self) -> DisplayInfo:
        binary = shutil.which("Xvfb")
        if binary is None:
            raise DisplayUnavailable(
                "no X display: DISPLAY is not usable and Xvfb is not installed"
            )
        for number in _unused_display_numbers():
            started = await self._launch_xvfb(binary, number)
            if started is not None:
                return started
        raise DisplayUnavailable("no free display number for the virtual display (Xvfb)")

    async def _launch_xvfb(self, binary: str, number: int) -> DisplayInfo | None:
        """Xvfb on :number, or None when another X server took that number first."""
        name = f":{number}"
        self._xvfb_number = number
        self._close_xvfb_log()
        self._xvfb_log = tempfile.TemporaryFile(prefix="xvfb-")
        argv = [
            binary, name,
            "-screen", "0", f"{XVFB_WIDTH}x{XVFB_HEIGHT}x{XVFB_DEPTH}",
            "-dpi", str(XVFB_DPI),
            *X_SERVER_LISTEN_OPTIONS,
            # Else the server resets (pointer, keymap, ...) whenever its last client leaves.
            "-noreset",
        ]  # fmt: skip
        # In a session of its own: a terminal's Ctrl-C is for the daemon, which then ends Xvfb.
        try:
            self._xvfb = await start_helper(
                argv, env=self._daemon.env.snapshot(), stdout=self._xvfb_log, stderr=self._xvfb_log
            )
        except HelperFailed as exc:
            raise DisplayUnavailable(f"the virtual display: {exc.message}") from None
        size = await _wait_answering(self._xvfb.process, number)
        if size is None:
            output = self._xvfb_output()
            await self._stop_xvfb()
            if "already active" in output or "already running" in output:
                log.info("display %s was taken meanwhile; trying the next one", name)
                return None
            log.warning("Xvfb on %s did not start; its output: %s", name, output)
            raise DisplayUnavailable("the virtual display (Xvfb) failed to start")
        self._daemon.env.update({"DISPLAY": name})
        log.info("started Xvfb on %s (%dx%d, pid %d)", name, *size, self._xvfb.pid)
        return DisplayInfo(name, size[0], size[1], owned=True)

    def _xvfb_output(self) -> str:
        if self._xvfb_log is None:
            return ""
        self._xvfb_log.seek(0)
        return self._xvfb_log.read()[-2000:].decode(errors="replace")

    def _close_xvfb_log(self) -> None:
        if self._xvfb_log is not None:
            self._xvfb_log.close()
            self._xvfb_log = None

    async def _stop_xvfb(self) -> None:
        xvfb, self._xvfb = self._xvfb, None
        if xvfb is not None:
            await xvfb.stop(grace=STOP_SECONDS)

    async def aclose(self) -> None:
        await self._stop_xvfb()
        self._close_xvfb_log()
        self._info = None


async def _probe_bounded(name: str) -> tuple[int, int] | None:
    # A TCP display on a dead host could hang a connect for minutes; the thread is left behind.
    try:
        return await asyncio.wait_for(asyncio.to_thread(probe_display, name), PROBE_SECONDS)
    except TimeoutError:
        log.info("display %s did not answer within %.0f s", name, PROBE_SECONDS)
        return None


def x_lock(number: int) -> Path:
    """Display `number`'s lock file: an X server takes it before it listens, holding its pid."""
    return Path(f"/tmp/.X{number}-lock")


def x_socket(number: int) -> Path:
    return Path(f"/tmp/.X11-unix/X{number}")


def x_lock_holder(number: int) -> int | None:
    """The pid in display `number`'s lock file, None when there is none."""
    try:
        return int(x_lock(number).read_text().strip())
    except (OSError, ValueError):
        return None


def display_number_taken(number: int) -> bool:
    return x_lock(number).exists() or x_socket(number).exists()


def _remove_lock_of(number: int, pid: int) -> None:
    if x_lock_holder(number) != pid:
        return
    x_lock(number).unlink(missing_ok=True)
    x_socket(number).unlink(missing_ok=True)


def _unused_display_numbers() -> Iterator[int]:
    """Display numbers no X server holds (by its lock and socket), from :1 up.

    Xvfb takes the lock itself, atomically; a number taken between this look and Xvfb's start
    makes Xvfb exit ("already active") and the next one is tried.
    """
    tries = 0
    for number in range(FIRST_DISPLAY_NUMBER, FIRST_DISPLAY_NUMBER + 1000):
        if display_number_taken(number):
            continue
        yield number
        tries += 1
        if tries == MAX_LAUNCHES:
            return


def _size_if_served_by(pid: int, number: int) -> tuple[int, int] | None:
    """Display `number`'s size if it answers and its lock holds `pid`.

    An answer alone is not enough: another X server that won the number a moment earlier
    answers too, while ours is about to exit ("already active"). The display is ours once its
    lock holds our pid (Xvfb takes the lock before it listens).
    """
    size = probe_display(f":{number}")
    return size if size is not None and x_lock_holder(number) == pid else None


async def _wait_answering(
    process: asyncio.subprocess.Process, number: int
) -> tuple[int, int] | None:
    """The display's size once `process` serves it; None if Xvfb exits or takes too long."""
    deadline = time.monotonic() + XVFB_START_SECONDS
    while process.returncode is None and time.monotonic() < deadline:
        # A local socket refuses at once while Xvfb is still starting: no hang here.
        size = await asyncio.to_thread(_size_if_served_by, process.pid, number)
        if size is not None:
            return size
        await asyncio.sleep(0.05)
    return None


async def start_at_boot(daemon: Daemon) -> None:
    """For --computer-use-enabled / --record-screen-enabled: the display is there from the start."""
    try:
        await daemon.service(DisplayService).ensure()
    except DisplayUnavailable as exc:
        log.warning("computer use / screen recording enabled, but: %s", exc)
