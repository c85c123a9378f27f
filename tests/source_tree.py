"""A copy of the project as git tracks it (what a fresh clone has), for build tests."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def copy_tracked_files(destination: Path, also: Iterable[Path] = ()) -> Path:
    """Copies every file `git ls-files` lists (uncommitted edits included), and the files `also`
    names (derived ones git ignores), into `destination`."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    extra = [str(path.relative_to(ROOT)) for path in also]
    for name in [*filter(None, tracked.split("\0")), *extra]:
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)
    return destination
