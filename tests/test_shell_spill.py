"""tools/shell/output.py on a disk that fills: a spill file that could not be written whole is
removed and not reported (no output_location, no size), and the inline answer keeps what memory
holds. The disk is a real 64 KiB tmpfs (mounting needs root: skipped without). And on a disk
that is slow to answer, the spill file is written without holding up the event loop."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import tools.shell.output
from tests.workspace_support import tiny_disk_in
from tools.shell.output import KEEP_BYTES, CapturedOutput, OutputCapture

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


class DiskAnsweringLate:
    """`os` for tools/shell/output.py, whose writes wait until the test releases them (the disk
    under writeback throttling); a write still waiting after 10 s fails."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def write(self, fd: int, data: bytes | memoryview) -> int:
        if not self.released.wait(10):
            raise OSError(errno.EIO, "the event loop never ran while the spill was written")
        return os.write(fd, data)

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)


def test_a_slow_disk_does_not_hold_up_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = DiskAnsweringLate()
    monkeypatch.setattr(tools.shell.output, "os", disk)

    async def spill_while_the_disk_waits() -> CapturedOutput:
        capture = OutputCapture(1000, lambda: tmp_path / "shell-output" / "shell-1-1.txt")
        for _ in range(300):
            capture.feed("stdout", LINE)
        # The event loop runs on while the disk has not answered: that is what lets it answer.
        asyncio.get_running_loop().call_soon(disk.released.set)
        await asyncio.sleep(0)
        return capture.finish()

    output = asyncio.run(spill_while_the_disk_waits())
    assert output.spill_path and "never ran" not in output.truncation_note
    assert Path(output.spill_path).read_bytes() == LINE * 300
