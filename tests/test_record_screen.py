"""record_screen_tool_call: START / SAVE / DISCARD with ffmpeg on the daemon's Xvfb.

A saved recording must be a playable mp4 in the artifacts folder: ffprobe finds a video stream
and a duration, which a killed ffmpeg would not have left.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agent.v1.computer_pb2 import ComputerUseAction, Coordinate, MouseMoveAction, RecordingMode
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon, running_daemon
from tests.interop import daemon_for_module
from tests.x11_support import computer_use, pid_alive, record_screen, wait_until
from tools.record_screen import artifact_name

pytestmark = pytest.mark.timeout(60)

START = RecordingMode.RECORDING_MODE_START_RECORDING
SAVE = RecordingMode.RECORDING_MODE_SAVE_RECORDING
DISCARD = RecordingMode.RECORDING_MODE_DISCARD_RECORDING


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with daemon_for_module(
        tmp_path_factory, "--record-screen-enabled", "--computer-use-enabled"
    ) as running:
        yield running


@pytest.fixture
async def client(daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with daemon.client() as connected:
        yield connected


def probe(path: Path) -> dict[str, Any]:
    shown = subprocess.run(
        ["ffprobe", "-v", "error", "-of", "json", "-show_format", "-show_streams", str(path)],
        capture_output=True,
        check=True,
        timeout=30,
    )
    info: dict[str, Any] = json.loads(shown.stdout)
    return info


def size_of(path: Path) -> int:
    return path.stat().st_size


def artifacts(daemon: RunningDaemon) -> list[str]:
    folder = daemon.state_dir / "artifacts"
    return sorted(path.name for path in folder.iterdir()) if folder.exists() else []


def ffmpeg_children(daemon: RunningDaemon) -> list[int]:
    found = subprocess.run(
        ["pgrep", "-P", str(daemon.process.pid), "ffmpeg"], capture_output=True, text=True
    )
    return [int(pid) for pid in found.stdout.split()]


async def test_a_saved_recording_is_a_playable_mp4_in_the_artifacts_folder(
    daemon: RunningDaemon, client: ExecDaemonClient
) -> None:
    started = await record_screen(client, START)
    assert started.WhichOneof("result") == "start_success", started
    assert started.start_success.was_already_recording is False
    again = await record_screen(client, START)
    assert again.start_success.was_already_recording is True
    # Something happens on screen while it records.
    for x in (100, 600, 1200):
        move = ComputerUseAction(mouse_move=MouseMoveAction(coordinate=Coordinate(x=x, y=400)))
        await computer_use(client, move)
    saved = await record_screen(client, SAVE, "Sprint demo: login flow.mp4")
    assert saved.WhichOneof("result") == "save_success", saved
    path = Path(saved.save_success.path)
    assert path == daemon.state_dir / "artifacts" / "Sprint_demo_login_flow.mp4"
    assert saved.save_success.size_bytes == size_of(path) > 0
    assert saved.save_success.duration_ms >= 1000
    info = probe(path)
    [video] = [stream for stream in info["streams"] if stream["codec_type"] == "video"]
    assert (video["codec_name"], video["width"], video["height"]) == ("h264", 1920, 1200)
    assert float(info["format"]["duration"]) > 0
    assert ffmpeg_children(daemon) == []
    # The recording is over: saving again has nothing to save.
    assert (await record_screen(client, SAVE)).error.code == "not_recording"


async def test_saving_under_a_taken_name_keeps_both(
    daemon: RunningDaemon, client: ExecDaemonClient
) -> None:
    paths = []
    for _ in range(2):
        assert (await record_screen(client, START)).WhichOneof("result") == "start_success"
        saved = await record_screen(client, SAVE, "../../twice")
        assert saved.WhichOneof("result") == "save_success", saved
        paths.append(Path(saved.save_success.path))
    folder = daemon.state_dir / "artifacts"
    assert paths == [folder / "twice.mp4", folder / "twice-1.mp4"]
    assert all(float(probe(path)["format"]["duration"]) > 0 for path in paths)


async def test_save_or_discard_without_a_recording_are_typed_errors(
    client: ExecDaemonClient,
) -> None:
    for mode in (SAVE, DISCARD):
        result = await record_screen(client, mode)
        assert result.WhichOneof("result") == "error", result
        assert result.error.code == "not_recording" and result.error.message
    unspecified = await record_screen(client, RecordingMode.RECORDING_MODE_UNSPECIFIED)
    assert unspecified.error.code == "invalid_argument"


async def test_a_discarded_recording_leaves_nothing_behind(
    daemon: RunningDaemon, client: ExecDaemonClient
) -> None:
    before = artifacts(daemon)
    assert (await record_screen(client, START)).WhichOneof("result") == "start_success"
    [ffmpeg] = ffmpeg_children(daemon)
    discarded = await record_screen(client, DISCARD)
    assert discarded.WhichOneof("result") == "discard_success", discarded
    assert not pid_alive(ffmpeg)
    assert artifacts(daemon) == before
    assert (await record_screen(client, SAVE)).error.code == "not_recording"


@contextmanager
def own_daemon(tmp_path: Path, *flags: str) -> Iterator[RunningDaemon]:
    """A daemon of the test's own (not the module's), with `flags`."""
    (tmp_path / "workspace").mkdir()
    with running_daemon(tmp_path / "workspace", tmp_path / "state", *flags) as own:
        yield own


async def test_a_daemon_stopping_mid_recording_ends_ffmpeg(tmp_path: Path) -> None:
    with own_daemon(tmp_path, "--record-screen-enabled") as own:
        async with own.client() as client:
            assert (await record_screen(client, START)).WhichOneof("result") == "start_success"
        [ffmpeg] = ffmpeg_children(own)
        assert own.stop() == 0
    wait_until(lambda: not pid_alive(ffmpeg), 5, "ffmpeg to end")


async def test_without_the_flag_recording_says_so_and_starts_no_ffmpeg(tmp_path: Path) -> None:
    # Computer use on: the display is there, only the recording's own flag is off.
    with own_daemon(tmp_path, "--computer-use-enabled") as own:
        async with own.client() as client:
            for mode in (START, SAVE):
                result = await record_screen(client, mode)
                assert result.WhichOneof("result") == "error", result
                assert result.error.code == "unavailable"
                assert "without --record-screen-enabled" in result.error.message
        assert ffmpeg_children(own) == []


@pytest.mark.parametrize(
    ("asked", "name"),
    [
        ("demo.mp4", "demo.mp4"),
        ("demo", "demo.mp4"),
        ("Demo Run #2.webm", "Demo_Run_2.mp4"),
        ("../../etc/passwd", "passwd.mp4"),
        ("C:\\Users\\me\\clip.mov", "clip.mp4"),
        ("  ", "screen-recording-20260102-030405.mp4"),
        ("...", "screen-recording-20260102-030405.mp4"),
        ("résumé.mp4", "résumé.mp4"),
        ("a" * 300, "a" * 100 + ".mp4"),
    ],
)
def test_artifact_names_are_made_safe(asked: str, name: str) -> None:
    assert artifact_name(asked, datetime(2026, 1, 2, 3, 4, 5)) == name
