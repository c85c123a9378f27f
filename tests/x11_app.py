"""A small real X program for the computer-use tests: `python x11_app.py EVENTS_FILE`.

A Tk window at a fixed place on the display (no window manager: geometry is exact), with
patches of known colors, a button, a text entry and a canvas. Every input it receives is
appended to EVENTS_FILE as one JSON object per line, in display (root) coordinates; a line
{"event": "ready"} says the window is on screen with the keyboard focus in its entry (taken as
a window manager gives it to a new window: without one, keys would go wherever an earlier test
left the pointer or the focus). Positions are in `LAYOUT` (display pixels).
"""

from __future__ import annotations

import json
import sys
import tkinter as tk
from typing import Any

WINDOW = (150, 150, 1200, 700)  # x, y, width, height on the display
LAYOUT = {
    # name: (x, y, width, height) relative to the window
    "red": (0, 0, 300, 300),
    "green": (300, 0, 300, 300),
    "blue": (600, 0, 300, 300),
    "button": (0, 320, 200, 60),
    "entry": (0, 400, 400, 40),
    "canvas": (450, 320, 700, 360),
}
COLORS = {"red": "#ff0000", "green": "#00ff00", "blue": "#0000ff"}


def display_box(name: str) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of a widget on the display."""
    x, y, width, height = LAYOUT[name]
    return WINDOW[0] + x, WINDOW[1] + y, WINDOW[0] + x + width, WINDOW[1] + y + height


def main(events_path: str) -> None:
    out = open(events_path, "a", buffering=1)

    def record(event: str, **fields: Any) -> None:
        out.write(json.dumps({"event": event, **fields}) + "\n")

    root = tk.Tk()
    x, y, width, height = WINDOW
    root.geometry(f"{width}x{height}+{x}+{y}")
    root.configure(background="#808080")
    for name, color in COLORS.items():
        place(tk.Frame(root, background=color), name)
    button = tk.Button(root, text="Press", command=lambda: record("button"))
    place(button, "button")
    text = tk.StringVar()
    text.trace_add("write", lambda *_: record("text", value=text.get()))
    entry = tk.Entry(root, textvariable=text, font=("TkFixedFont", 14))
    place(entry, "entry")
    canvas = tk.Canvas(root, background="#ffffff", highlightthickness=0)
    place(canvas, "canvas")

    def pointer(kind: str) -> Any:
        return lambda e: record(kind, num=e.num, x=e.x_root, y=e.y_root, state=int(e.state))

    canvas.bind("<ButtonPress>", pointer("press"))
    canvas.bind("<ButtonRelease>", pointer("release"))
    canvas.bind("<B1-Motion>", pointer("drag_motion"))
    canvas.bind("<Double-Button-1>", pointer("double_click"))
    root.bind_all("<KeyPress>", lambda e: record("key", keysym=e.keysym, state=int(e.state)))

    def ready() -> None:
        entry.focus_force()
        root.update()  # the focus request reaches the X server (Tk's update syncs) first
        record("ready")

    root.bind("<Map>", lambda e: root.after(50, ready) if e.widget is root else None)
    root.mainloop()


def place(widget: tk.Widget, name: str) -> None:
    x, y, width, height = LAYOUT[name]
    widget.place(x=x, y=y, width=width, height=height)


if __name__ == "__main__":
    main(sys.argv[1])
