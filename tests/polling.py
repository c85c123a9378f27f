"""Waiting for a condition in tests: poll it until a deadline, never sleep a fixed time.

A fixed sleep is either too short on a loaded machine (the test fails) or too long everywhere
(the suite crawls); polling returns as soon as the condition holds and fails with a message
saying what never happened.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL_SECONDS = 0.02


def _timed_out(predicate: Callable[[], object], what: str, seconds: float) -> AssertionError:
    return AssertionError(f"timed out after {seconds} s waiting for {what or predicate}")


async def eventually(predicate: Callable[[], T], seconds: float = 10.0, what: str = "") -> T:
    """The first truthy value of `predicate()`, polled from async code without blocking."""
    deadline = time.monotonic() + seconds
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise _timed_out(predicate, what, seconds)
        await asyncio.sleep(POLL_SECONDS)
    return value


def wait_until(predicate: Callable[[], T], seconds: float = 10.0, what: str = "") -> T:
    """The first truthy value of `predicate()`, polled from synchronous code (threads, fixtures)."""
    deadline = time.monotonic() + seconds
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise _timed_out(predicate, what, seconds)
        time.sleep(POLL_SECONDS)
    return value
