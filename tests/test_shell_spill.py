"""tools/shell/output.py on a disk that fills: a spill file that could not be written whole is
removed and not reported (no output_location, no size), and the inline answer keeps what memory
holds. The disk is a real 64 KiB tmpfs (mounting needs root: skipped without)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.workspace_support import tiny_disk_in
from tools.shell.output import KEEP_BYTES, OutputCapture

LINE = b"x" * 999 + b"\n"


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    with tiny_disk_in(tmp_path) as mount_point:
        yield mount_point


def fill(folder: Path) -> None:
    """Fills the disk of `folder` to the last byte."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def captured(folder: Path, lines: int) -> OutputCapture:
    capture = OutputCapture(1000, lambda: folder / "shell-output" / "shell-1-1.txt")
    for _ in range(lines):
        capture.feed("stdout", LINE)
    return capture


@pytest.mark.parametrize("when", ["midway", "from-the-start"])
def test_a_spill_the_disk_cannot_hold_is_removed_and_not_reported(
    tiny_disk: Path, when: str
) -> None:
    if when == "from-the-start":
        (tiny_disk / "shell-output").mkdir()
        fill(tiny_disk)
    output = captured(tiny_disk, 300).finish()  # 300 KB for a 64 KiB disk
    assert output.spill_path == ""
    assert os.listdir(tiny_disk / "shell-output") == []
    assert "could not be written to a file: No space left on device" in output.truncation_note
    # Inline: what memory holds (no file to point at), head and tail.
    assert output.stdout.startswith(LINE.decode()) and output.stdout.endswith(LINE.decode())
    assert KEEP_BYTES // 2 < len(output.stdout) <= KEEP_BYTES + 200


def test_a_spill_with_room_is_whole_and_the_answer_stops_at_the_threshold(tmp_path: Path) -> None:
    output = captured(tmp_path, 300).finish()
    spilled = Path(output.spill_path)
    assert spilled.read_bytes() == LINE * 300 and output.total_bytes == len(LINE) * 300
    assert len(output.stdout) < 1000 + 200 and output.spill_path in output.stdout
