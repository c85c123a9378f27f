"""A desktop with one icon for the desktop-page tests: `python desktop_icon_app.py EVENTS_FILE`.

A Tk window covering the display (no window manager: exact geometry) in `BACKGROUND`, with an
"icon" at `ICON`; clicking the icon turns the whole window `OPENED`, so a click is visible to
whoever watches the screen. Appends {"event": "ready"} and {"event": "opened"} lines to
EVENTS_FILE (the format tests/x11_support.py's X11App reads).
"""

from __future__ import annotations

import json
import sys
import tkinter as tk

SIZE = (1920, 1200)
ICON = (200, 200, 120, 120)  # x, y, width, height on the display
BACKGROUND = "#203040"
ICON_COLOR = "#ffcc00"
OPENED = "#20c040"


def main(events_path: str) -> None:
    out = open(events_path, "a", buffering=1)
    root = tk.Tk()
    root.geometry(f"{SIZE[0]}x{SIZE[1]}+0+0")
    root.configure(background=BACKGROUND)
    x, y, width, height = ICON
    icon = tk.Frame(root, background=ICON_COLOR)
    icon.place(x=x, y=y, width=width, height=height)

    def opened(_event: object) -> None:
        root.configure(background=OPENED)
        out.write(json.dumps({"event": "opened"}) + "\n")

    icon.bind("<ButtonRelease-1>", opened)
    root.bind(
        "<Map>",
        lambda e: (
            root.after(50, lambda: out.write('{"event": "ready"}\n')) if e.widget is root else None
        ),
    )
    root.mainloop()


if __name__ == "__main__":
    main(sys.argv[1])
