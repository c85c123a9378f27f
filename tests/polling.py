"""Waiting for a condition in tests: poll it until a deadline, never sleep a fixed time.

A fixed sleep is either too short on a loaded machine (the test fails) or too long everywhere
(the suite crawls); polling returns as soon as the condition holds and fails with a message
saying what never happened.

Every bound a test waits on is a cap on how long a failing run takes, not a goal: it is set
generously for a 2-core machine running other work, and LOAD_FACTOR (the environment's
TEST_LOAD_FACTOR, scripts/stress-test raises it) stretches all of them at once. A test that
checks something does not wait (a timeout, a slow peer) makes the wait it rules out far
longer than its bound, so the bound can be generous and still catch the bug.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
POLL_SECONDS = 0.02
LOAD_FACTOR = float(os.environ.get("TEST_LOAD_FACTOR") or 1.0)
# The default wait for a state that comes in well under a second on an idle machine; a shell or
# browser starting on a machine whose cores other work keeps busy took over 10 s.
WAIT_SECONDS = 30.0


def generous(seconds: float) -> float:
    """`seconds`, a bound set for a loaded machine, stretched by LOAD_FACTOR."""
    return seconds * LOAD_FACTOR


def _timed_out(predicate: Callable[[], object], what: str, seconds: float) -> AssertionError:
    return AssertionError(f"timed out after {seconds} s waiting for {what or predicate}")


async def eventually(
    predicate: Callable[[], T], seconds: float = WAIT_SECONDS, what: str = ""
) -> T:
    """The first truthy value of `predicate()`, polled from async code without blocking."""
    seconds = generous(seconds)
    deadline = time.monotonic() + seconds
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise _timed_out(predicate, what, seconds)
        await asyncio.sleep(POLL_SECONDS)
    return value


def wait_until(predicate: Callable[[], T], seconds: float = WAIT_SECONDS, what: str = "") -> T:
    """The first truthy value of `predicate()`, polled from synchronous code (threads, fixtures)."""
    seconds = generous(seconds)
    deadline = time.monotonic() + seconds
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise _timed_out(predicate, what, seconds)
        time.sleep(POLL_SECONDS)
    return value


def text_of(path: Path) -> str:
    """The text in `path`, or "" while it does not exist."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


async def file_holds(path: Path, expected: str, seconds: float = WAIT_SECONDS) -> None:
    """Waits until `path` holds `expected`: a shell's `>` creates the file before the command
    writes to it, so a file that exists may not hold its text yet."""
    try:
        await eventually(lambda: text_of(path) == expected, seconds, f"{path} to hold {expected!r}")
    except AssertionError as error:
        raise AssertionError(f"{error}; it holds {text_of(path)!r}") from None
