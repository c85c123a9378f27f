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
        """Sends each character's press and release, `delay_s` apart.

        Text with more missing characters than the keymap has spare keycodes goes in runs, each
        bound before its first key; a later run rebinds the keycodes used longest ago.
        """
        keysyms = [keysym_of(char) for char in text]
        typed = 0
        while typed < len(keysyms):
            keys = self._bind_run(keysyms[typed:])
            for keycode, shift in keys:
                if typed:
                    time.sleep(delay_s)
                self._press(keycode, shift)
                typed += 1

    def _bind_run(self, keysyms: list[int]) -> list[tuple[int, int | None]]:
        """(keycode, shift keycode or None) for the longest run of `keysyms` the keymap can hold,
        with the keysyms it lacks bound to spare keycodes."""
        keymap = self._keymap()
        self._forget_rebound(keymap)
        shift = _find(keymap, SHIFT_L, level=0)
        spare = [code for code, row in keymap.items() if not any(row) and code not in self._bound]
        spare += self._bound  # ours, used longest ago first
        keys: dict[int, tuple[int, int | None]] = {}
        missing: list[int] = []
        ours_in_use: set[int] = set()
        run = 0
        for keysym in keysyms:
            if keysym not in keys and keysym not in missing:
                key = _key_in(keymap, keysym, shift)
                used = ours_in_use | ({key[0]} & set(self._bound)) if key else ours_in_use
                if len(missing) + (key is None) + len(used) > len(spare):
                    break
                ours_in_use = used
                if key is None:
                    missing.append(keysym)
                else:
                    keys[keysym] = key
            run += 1
        if not run:
            raise KeymapFull(f"the keymap has no spare keycode for {chr_of(keysyms[0])!r}")
        free = [code for code in spare if code not in ours_in_use]
        for keysym, keycode in zip(missing, free, strict=False):
            self._bind(keycode, keysym, width=len(keymap[keycode]))
            keys[keysym] = (keycode, None)
        if missing:
            self._display.sync()
        typed = [keys[keysym] for keysym in keysyms[:run]]
        for keycode, _ in typed:  # in typing order: the last pressed ends up the newest
            if keycode in self._bound:
                self._bound.move_to_end(keycode)
        return typed

    def _keymap(self) -> dict[int, list[int]]:
        """keycode -> its keysyms by level, as the server has them now."""
        first = self._display.display.info.min_keycode
        last = self._display.display.info.max_keycode
        rows = self._display.get_keyboard_mapping(first, last - first + 1)
        return {first + offset: list(row) for offset, row in enumerate(rows)}

    def _bind(self, keycode: int, keysym: int, *, width: int) -> None:
        # Shifted or not the key gives the keysym: no case conversion, no shift state matters.
        row = [keysym, keysym] + [NO_SYMBOL] * (width - 2)
        self._display.change_keyboard_mapping(keycode, [row])
        self._bound[keycode] = keysym

    def _forget_rebound(self, keymap: dict[int, list[int]]) -> None:
        """Drops the keycodes another client has bound to something else since."""
        for keycode, keysym in list(self._bound.items()):
            if keymap.get(keycode, [])[:1] != [keysym]:
                del self._bound[keycode]

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


def _key_in(
    keymap: dict[int, list[int]], keysym: int, shift: int | None
) -> tuple[int, int | None] | None:
    """(keycode, shift keycode or None) of `keysym` in the keymap without a mode switch."""
    unshifted = _find(keymap, keysym, level=0)
    if unshifted is not None:
        return unshifted, None
    shifted = _find(keymap, keysym, level=1) if shift is not None else None
    return (shifted, shift) if shifted is not None else None


def chr_of(keysym: int) -> str:
    """The character `keysym_of` made `keysym` from (for messages)."""
    if keysym & 0xFF000000 == 0x01000000:
        return chr(keysym & 0xFFFFFF)
    return chr(keysym) if keysym <= 0xFF else hex(keysym)
