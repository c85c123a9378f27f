"""Typing text through XTest, with every keysym a batch needs bound before its first key.

`xdotool type` binds a character the keymap lacks to a spare keycode, sends the key and reverts
the binding at once; an application that reads the event after the revert looks it up in the
reverted map and sees the wrong keysym (a `??` instead of "é"). Here the bindings stay in place
after the batch: spare keycodes are reused least recently used first, so the map an event is read
against still holds what was typed.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import TYPE_CHECKING

from Xlib import X
from Xlib.ext import xtest

if TYPE_CHECKING:
    from Xlib.display import Display

NO_SYMBOL = 0
SHIFT_L = 0xFFE1
# Characters typed as the key that makes them, as xdotool does.
CONTROL_KEYSYMS = {"\n": 0xFF0D, "\r": 0xFF0D, "\t": 0xFF09, "\b": 0xFF08, "\x1b": 0xFF1B}


class KeymapFull(Exception):
    """The keymap has too few spare keycodes for the characters of one batch."""


def keysym_of(char: str) -> int:
    """The X keysym of one character (Latin-1 keysyms are the code point, others U+ keysyms)."""
    if char in CONTROL_KEYSYMS:
        return CONTROL_KEYSYMS[char]
    code = ord(char)
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    return 0x01000000 | code


class Keyboard:
    """Types text on one X connection; keeps which spare keycodes it bound, oldest use first."""

    def __init__(self, display: Display) -> None:
        self._display = display
        self._bound: OrderedDict[int, int] = OrderedDict()  # keycode -> keysym bound there

    def type_text(self, text: str, delay_s: float) -> None:
        """Sends each character's press and release, `delay_s` apart, then waits for the server."""
        keys = self._keys_for([keysym_of(char) for char in text])
        for index, (keycode, shift) in enumerate(keys):
            if index:
                time.sleep(delay_s)
            self._press(keycode, shift)

    def _keys_for(self, keysyms: list[int]) -> list[tuple[int, int | None]]:
        """(keycode, shift keycode or None) for each keysym, binding the missing ones first."""
        first = self._display.display.info.min_keycode
        last = self._display.display.info.max_keycode
        rows = self._display.get_keyboard_mapping(first, last - first + 1)
        keymap = {first + offset: list(row) for offset, row in enumerate(rows)}
        self._forget_rebound(keymap)
        shift = _find(keymap, SHIFT_L, level=0)
        keys: dict[int, tuple[int, int | None]] = {}
        for keysym in dict.fromkeys(keysyms):
            unshifted = _find(keymap, keysym, level=0)
            shifted = _find(keymap, keysym, level=1) if shift is not None else None
            if unshifted is not None:
                keys[keysym] = (unshifted, None)
            elif shifted is not None:
                keys[keysym] = (shifted, shift)
        missing = [keysym for keysym in dict.fromkeys(keysyms) if keysym not in keys]
        if missing:
            width = max(len(rows[0]), 2)
            in_use = {keycode for keycode, _ in keys.values()}
            for keysym, keycode in zip(missing, self._spare(keymap, missing, in_use), strict=True):
                row = [keysym, keysym] + [NO_SYMBOL] * (width - 2)
                self._display.change_keyboard_mapping(keycode, [row])
                self._bound[keycode] = keysym
                keys[keysym] = (keycode, None)
            self._display.sync()
        for keycode, _ in keys.values():
            if keycode in self._bound:
                self._bound.move_to_end(keycode)
        return [keys[keysym] for keysym in keysyms]

    def _forget_rebound(self, keymap: dict[int, list[int]]) -> None:
        """Drops the keycodes another client has bound to something else since."""
        for keycode, keysym in list(self._bound.items()):
            if keymap.get(keycode, [])[:1] != [keysym]:
                del self._bound[keycode]

    def _spare(
        self, keymap: dict[int, list[int]], missing: list[int], in_use: set[int]
    ) -> list[int]:
        """A keycode for each missing keysym: empty ones, then ours not in use, oldest first."""
        empty = [code for code, row in keymap.items() if not any(row) and code not in self._bound]
        ours = [code for code in self._bound if code not in in_use]
        spare = (empty + ours)[: len(missing)]
        if len(spare) < len(missing):
            raise KeymapFull(
                f"the keymap has {len(spare)} spare keycodes for {len(missing)} missing characters"
            )
        return spare

    def _press(self, keycode: int, shift: int | None) -> None:
        if shift is not None:
            xtest.fake_input(self._display, X.KeyPress, shift)
        xtest.fake_input(self._display, X.KeyPress, keycode)
        xtest.fake_input(self._display, X.KeyRelease, keycode)
        if shift is not None:
            xtest.fake_input(self._display, X.KeyRelease, shift)
        self._display.sync()


def _find(keymap: dict[int, list[int]], keysym: int, *, level: int) -> int | None:
    """The keycode with `keysym` at shift level `level` (0: unshifted, 1: shifted)."""
    for keycode, row in keymap.items():
        if len(row) > level and row[level] == keysym:
            return keycode
    return None
