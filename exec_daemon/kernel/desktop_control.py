"""Who controls the desktop: the agent, or a person who took it over from the desktop page.

A person holds control while at least one of their interactive desktop connections is open
(exec_daemon/rpc/desktop_server.py); closing the last one, or the page's "Hand back", gives the
desktop back to the agent. While a person holds it, `refusal()` is the error the agent's
computer-use calls get. Listeners (tracing) hear every change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from exec_daemon.kernel.errors import CodedError, ErrorCode

log = logging.getLogger(__name__)

PERSON_HAS_CONTROL = (
    "a person has taken control of the desktop; computer use is refused until they hand it "
    "back (the desktop page's Hand back button, or closing it)"
)


@dataclass(frozen=True)
class ControlState:
    """One moment of control: who holds the desktop, since when, and who is watching."""

    person_in_control: bool
    since_unix_ms: int
    viewers: int
    controllers: int


Listener = Callable[[ControlState], None]


class DesktopControl:
    """`daemon.service(DesktopControl)`: counts the person's desktop connections."""

    def __init__(self, daemon: object = None) -> None:
        self._viewers = 0
        self._controllers = 0
        self._since_unix_ms = int(time.time() * 1000)
        self._listeners: list[Listener] = []

    def state(self) -> ControlState:
        return ControlState(
            person_in_control=self._controllers > 0,
            since_unix_ms=self._since_unix_ms,
            viewers=self._viewers,
            controllers=self._controllers,
        )

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def joined(self, *, interactive: bool) -> None:
        if interactive:
            self._controllers += 1
            if self._controllers == 1:
                self._changed("a person took control of the desktop")
        else:
            self._viewers += 1

    def left(self, *, interactive: bool) -> None:
        if interactive:
            self._controllers -= 1
            if self._controllers == 0:
                self._changed("the person handed the desktop back to the agent")
        else:
            self._viewers -= 1

    def refusal(self) -> CodedError | None:
        """The error an agent's desktop action gets now, or None when the agent may act."""
        if self._controllers > 0:
            return CodedError(ErrorCode.PERSON_IN_CONTROL, PERSON_HAS_CONTROL)
        return None

    def _changed(self, what: str) -> None:
        self._since_unix_ms = int(time.time() * 1000)
        log.info("%s", what)
        state = self.state()
        for listener in self._listeners:
            try:
                listener(state)
            except Exception:
                log.exception("a desktop control listener failed")
