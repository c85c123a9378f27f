"""Key combos for `xdotool key`, checked here: xdotool drops an unknown key name with exit 0.

A combo is keys joined by "+" ("ctrl+shift+t", "Return", "alt+F4"); several combos may be given
separated by spaces ("ctrl+a Delete"). Names are X keysym names (exactly, or in any case), the
modifiers xdotool knows (ctrl, alt, shift, super, meta) and the names vision models tend to use
(Enter, Esc, Backspace, PageDown, ArrowUp, cmd, ...); single characters stand for themselves.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass

from Xlib import keysymdef as keysym_groups

MODIFIERS = {
    "ctrl": "ctrl",
    "control": "ctrl",
    "alt": "alt",
    "option": "alt",
    "opt": "alt",
    "shift": "shift",
    "super": "super",
    "cmd": "super",
    "command": "super",
    "win": "super",
    "windows": "super",
    "meta": "meta",
}

# Lower-case spellings models use for keys whose X names differ.
ALIASES = {
    "enter": "Return",
    "esc": "Escape",
    "backspace": "BackSpace",
    "del": "Delete",
    "ins": "Insert",
    "pageup": "Page_Up",
    "pgup": "Page_Up",
    "pagedown": "Page_Down",
    "pgdn": "Page_Down",
    "arrowup": "Up",
    "arrowdown": "Down",
    "arrowleft": "Left",
    "arrowright": "Right",
    "capslock": "Caps_Lock",
    "numlock": "Num_Lock",
    "scrolllock": "Scroll_Lock",
    "printscreen": "Print",
    "prtsc": "Print",
    "space": "space",
    "spacebar": "space",
    "plus": "plus",
    "volumeup": "XF86AudioRaiseVolume",
    "volumedown": "XF86AudioLowerVolume",
    "mute": "XF86AudioMute",
}


class UnknownKey(ValueError):
    """A key name X does not know; the message names it."""


@dataclass(frozen=True)
class _KeysymNames:
    exact: frozenset[str]
    by_lower_case: dict[str, str]
    by_keysym: dict[int, str]


@functools.cache
def _keysym_names() -> _KeysymNames:
    """Every keysym name python-xlib knows, spelled as libX11 (hence xdotool) spells it."""
    exact: set[str] = set()
    by_lower_case: dict[str, str] = {}
    by_keysym: dict[int, str] = {}
    for group in pkgutil.iter_modules(keysym_groups.__path__):
        module = importlib.import_module(f"{keysym_groups.__name__}.{group.name}")
        for attribute, keysym in vars(module).items():
            if not attribute.startswith("XK_"):
                continue
            name = attribute[3:]
            # python-xlib says XF86_AudioMute where X says XF86AudioMute.
            name = "XF86" + name[5:] if name.startswith("XF86_") else name
            exact.add(name)
            by_lower_case.setdefault(name.lower(), name)
            by_keysym.setdefault(keysym, name)
    return _KeysymNames(frozenset(exact), by_lower_case, by_keysym)


def _key_name(token: str) -> str:
    lower = token.lower()
    if lower in MODIFIERS:
        return MODIFIERS[lower]
    if lower in ALIASES:
        return ALIASES[lower]
    names = _keysym_names()
    if token in names.exact:
        return token
    if lower in names.by_lower_case:
        return names.by_lower_case[lower]
    if len(token) == 1:
        return _character_key(token, names)
    raise UnknownKey(f"unknown key name {token!r}")


def _character_key(char: str, names: _KeysymNames) -> str:
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        raise UnknownKey(f"unknown key: control character {char!r}")
    # Latin-1 keysyms are the code points; any other character is keysym "U<hex>" to libX11.
    return names.by_keysym.get(code, f"U{code:04X}") if code <= 0xFF else f"U{code:04X}"


def _split_combo(combo: str) -> list[str]:
    # "+" alone and "ctrl++" mean the plus key.
    if combo == "+":
        return ["plus"]
    if combo.endswith("++"):
        return [*combo[:-2].split("+"), "plus"]
    return combo.split("+")


def parse_combo(combo: str) -> list[str]:
    """The xdotool names of one combo's keys, or UnknownKey."""
    tokens = _split_combo(combo)
    if any(not token for token in tokens):
        raise UnknownKey(f"malformed key combo {combo!r}")
    names = [_key_name(token) for token in tokens]
    *modifiers, key = names
    if modifiers and len(key) == 1 and key.isalpha() and key.isascii():
        # "ctrl+C" means ctrl+c: xdotool would press shift too for the upper-case keysym.
        names[-1] = key.lower()
    return names


def parse_keys(keys: str) -> list[str]:
    """The `xdotool key` arguments for a key string ("ctrl+a Delete" → two combos)."""
    combos = keys.split()
    if not combos:
        raise UnknownKey("no key given")
    return ["+".join(parse_combo(combo)) for combo in combos]
