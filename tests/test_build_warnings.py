"""Building the project (what `scripts/setup`'s `pip install -e .` runs) says nothing but errors:
setuptools' warnings were ~45 lines on the first `./scripts/serve`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_editable_build_prints_no_warning(tmp_path: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    source = tmp_path / "source"
    for name in filter(None, tracked.split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    build = subprocess.run(
        [sys.executable, "-c", "import setuptools.build_meta as b; b.build_editable('out')"],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = build.stdout + build.stderr
    assert build.returncode == 0, output
    warnings = [line for line in output.splitlines() if "warning" in line.lower()]
    assert warnings == [], output
