"""Building the project (what `scripts/setup`'s `pip install -e .` runs) says nothing but errors:
setuptools' warnings were ~45 lines on the first `./scripts/serve`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.source_tree import copy_tracked_files


def test_the_editable_build_prints_no_warning(tmp_path: Path) -> None:
    source = copy_tracked_files(tmp_path / "source")
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
