"""record_screen_tool_call (RecordScreen): START / SAVE / DISCARD a recording of the X display.

ffmpeg (x11grab, H.264) writes to a temporary file; SAVE stops it with `q` on its stdin — the
only stop that leaves a playable mp4 (a killed ffmpeg never writes the index) — and moves the
file into the artifacts folder (`--artifacts-folder`, default /opt/cursor/artifacts) under the
asked-for name, made safe. One recording at a time per daemon.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import re
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

from agent.v1.common_pb2 import ToolError
from agent.v1.computer_pb2 import (
    RecordingMode,
    RecordScreenArgs,
    RecordScreenDiscardSuccess,
    RecordScreenResult,
    RecordScreenSaveSuccess,
    RecordScreenStartSuccess,
)
from exec_daemon.kernel.config import off_without
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.paths import create_exclusive, ensure_daemon_folder
from exec_daemon.kernel.runner import Helper, HelperFailed, start_helper
from exec_daemon.kernel.sandboxing import Sandboxing
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, ToolSpec, no_subject
from exec_daemon.kernel.state import Daemon
from exec_daemon.kernel.state_root import state_folder
from tools.display import DisplayService, DisplayUnavailable

log = logging.getLogger(__name__)

# In the daemon's private state root (exec_daemon/kernel/state_root.py).
RECORDINGS_FOLDER = "recordings"
FRAMES_PER_SECOND = 15
# A forgotten recording must not fill the disk.
MAX_RECORDING_SECONDS = 3600
# A recording saved at once would hold no frame at all: it lasts at least this long.
MIN_RECORDING_SECONDS = 1.0
START_SECONDS = 10.0
# `q` makes ffmpeg finish the file (and move the index to the front: +faststart).
STOP_SECONDS = 15.0
VIDEO_SUFFIXES = {".mp4", ".mov", ".m4v", ".webm", ".mkv", ".avi", ".gif"}


@dataclass
class Recording:
    ffmpeg: Helper
    path: Path
    started: float
    ffmpeg_log: IO[bytes]

    def log_tail(self) -> str:
        self.ffmpeg_log.seek(0)
        return self.ffmpeg_log.read()[-2000:].decode(errors="replace").strip()

    @property
    def process(self) -> asyncio.subprocess.Process:
        return self.ffmpeg.process

    def close(self) -> None:
        if self.process.returncode is None:
            self.ffmpeg.kill_now()
        self.ffmpeg_log.close()
        self.path.unlink(missing_ok=True)


def ffmpeg_command(display: str, width: int, height: int, output: Path) -> list[str]:
    return [
        "ffmpeg", "-hide_banner", "-nostats", "-loglevel", "error", "-y",
        "-f", "x11grab", "-framerate", str(FRAMES_PER_SECOND),
        "-video_size", f"{width}x{height}", "-draw_mouse", "1", "-i", display,
        "-t", str(MAX_RECORDING_SECONDS),
        # yuv420p (what every player takes) needs even sizes.
        "-vf", "crop=trunc(iw/2)*2:trunc(ih/2)*2",
        "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
        "-movflags", "+faststart",
        str(output),
    ]  # fmt: skip


def artifact_name(requested: str, now: datetime) -> str:
    """A safe file name ending in .mp4: no directories, no odd characters, never empty."""
    name = Path(requested.strip().replace("\\", "/")).name
    if Path(name).suffix.lower() in VIDEO_SUFFIXES:
        name = Path(name).stem
    name = re.sub(r"[^\w.-]+", "_", name).strip("._-")[:100]
    return f"{name or now.strftime('screen-recording-%Y%m%d-%H%M%S')}.mp4"


def unused_path(folder: Path, name: str) -> Path:
    candidate = folder / name
    stem = candidate.stem
    number = 1
    while os.path.lexists(candidate):  # a dangling symlink is taken too
        candidate = folder / f"{stem}-{number}.mp4"
        number += 1
    return candidate


class ScreenRecorder:
    """One per daemon (`daemon.service(ScreenRecorder)`): at most one recording runs."""

    def __init__(self, daemon: Daemon) -> None:
        # Created first, so the daemon closes it after the recorder (services close newest first).
        self.displays = daemon.service(DisplayService)
        self._daemon = daemon
        self._artifacts = daemon.config.artifacts_folder
        # ffmpeg writes here as the daemon: out of sandboxed commands' reach.
        self._folder = state_folder(daemon.config.state_root, RECORDINGS_FOLDER)
        daemon.service(Sandboxing).keep_private(self._folder)
        self._lock = asyncio.Lock()
        self._recording: Recording | None = None

    async def start(self) -> bool:
        """Starts recording; True when a recording was already going (it goes on)."""
        async with self._lock:
            if self._recording is not None:
                if self._recording.process.returncode in (None, 0):
                    return True
                await self._drop()
            self._recording = await self._spawn()
            return False

    async def save(self, requested_name: str) -> RecordScreenSaveSuccess:
        async with self._lock:
            recording = self._recording
            if recording is None:
                raise CodedError(ErrorCode.NOT_RECORDING, "no recording is going: start one first")
            self._recording = None
            try:
                await _stop(recording)
                duration = time.monotonic() - recording.started
                destination = await asyncio.to_thread(self._keep, recording.path, requested_name)
            finally:
                recording.close()
        return RecordScreenSaveSuccess(
            path=str(destination),
            duration_ms=int(duration * 1000),
            size_bytes=destination.stat().st_size,
        )

    async def discard(self) -> None:
        async with self._lock:
            if self._recording is None:
                raise CodedError(ErrorCode.NOT_RECORDING, "no recording is going")
            await self._drop()

    async def aclose(self) -> None:
        async with self._lock:
            await self._drop()

    async def _spawn(self) -> Recording:
        try:
            display = await self.displays.ensure()
        except DisplayUnavailable as exc:
            raise CodedError(ErrorCode.DISPLAY_UNAVAILABLE, str(exc)) from None
        if shutil.which("ffmpeg") is None:
            raise CodedError(ErrorCode.UNAVAILABLE, "ffmpeg is not installed")
        path = await asyncio.to_thread(_new_recording_path, self._folder)
        ffmpeg_log = tempfile.TemporaryFile(prefix="ffmpeg-")
        # In a session of its own: a terminal's Ctrl-C must not cut the file short.
        try:
            ffmpeg = await start_helper(
                ffmpeg_command(display.name, display.width, display.height, path),
                env=self._daemon.env.snapshot(),
                stdin=asyncio.subprocess.PIPE,
                stderr=ffmpeg_log,
            )
        except HelperFailed as exc:
            ffmpeg_log.close()
            raise CodedError(exc.code, exc.message) from None
        recording = Recording(ffmpeg, path, time.monotonic(), ffmpeg_log)
        try:
            await _wait_capturing(recording)
        except CodedError:
            await recording.ffmpeg.stop(grace=0)
            log.warning("ffmpeg did not start recording %s: %s", display.name, recording.log_tail())
            recording.close()
            raise
        log.info("recording %s to %s (ffmpeg pid %d)", display.name, path, ffmpeg.pid)
        return recording

    def _keep(self, recorded: Path, requested_name: str) -> Path:
        try:
            self._artifacts.mkdir(parents=True, exist_ok=True)
            destination = unused_path(
                self._artifacts, artifact_name(requested_name, datetime.now())
            )
            _move_no_follow(recorded, destination)
        except OSError as exc:
            log.warning("keeping the recording in %s failed: %s", self._artifacts, exc)
            raise CodedError(
                ErrorCode.IO_ERROR,
                f"could not save the recording into {self._artifacts}: {exc.strerror}",
            ) from None
        return destination

    async def _drop(self) -> None:
        recording, self._recording = self._recording, None
        if recording is not None:
            await recording.ffmpeg.stop(grace=0)
            recording.close()


def _move_no_follow(source: Path, destination: Path) -> None:
    """Moves a file to a name that must be free: a rename (which replaces a link, never writes
    through it), or across file systems a copy into a file created O_EXCL|O_NOFOLLOW."""
    try:
        os.rename(source, destination)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    fd = create_exclusive(destination.parent, destination.name, 0o644)
    with open(source, "rb") as reader, os.fdopen(fd, "wb") as writer:
        shutil.copyfileobj(reader, writer)
    source.unlink()


def _new_recording_path(folder: Path) -> Path:
    ensure_daemon_folder(folder, 0o700)
    return folder / f"{time.time_ns()}-{secrets.token_hex(6)}.mp4"


async def _wait_capturing(recording: Recording) -> None:
    """Returns once ffmpeg wrote its first bytes (it has a frame), or fails if it ended."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if recording.process.returncode is not None:
            raise CodedError(ErrorCode.RECORDING_FAILED, "ffmpeg could not record the display")
        if recording.path.exists() and recording.path.stat().st_size > 0:
            return
        await asyncio.sleep(0.05)
    raise CodedError(ErrorCode.RECORDING_FAILED, "ffmpeg did not start recording in time")


async def _stop(recording: Recording) -> None:
    """Ends ffmpeg with `q` so the mp4 gets its index; a failure leaves no file worth keeping."""
    process = recording.process
    left = MIN_RECORDING_SECONDS - (time.monotonic() - recording.started)
    if left > 0 and process.returncode is None:
        await asyncio.sleep(left)
    if process.returncode is None and process.stdin is not None:
        try:
            process.stdin.write(b"q")
            await process.stdin.drain()
            process.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass
    try:
        returncode = await asyncio.wait_for(process.wait(), STOP_SECONDS)
    except TimeoutError:
        await recording.ffmpeg.stop(grace=0)
        raise CodedError(
            ErrorCode.RECORDING_FAILED, "ffmpeg did not finish the file in time"
        ) from None
    if returncode != 0:
        log.warning("ffmpeg exited with %d: %s", returncode, recording.log_tail())
        raise CodedError(ErrorCode.RECORDING_FAILED, f"ffmpeg failed (exit code {returncode})")


def _error(code: str, message: str) -> RecordScreenResult:
    return RecordScreenResult(error=ToolError(code=code, message=message))


async def record_screen(args: RecordScreenArgs, ctx: CallContext) -> RecordScreenResult:
    if not ctx.daemon.config.record_screen_enabled:
        return _error("unavailable", off_without("screen recording", "--record-screen-enabled"))
    recorder = ctx.daemon.service(ScreenRecorder)
    try:
        if args.mode == RecordingMode.RECORDING_MODE_START_RECORDING:
            already = await recorder.start()
            return RecordScreenResult(
                start_success=RecordScreenStartSuccess(was_already_recording=already)
            )
        if args.mode == RecordingMode.RECORDING_MODE_SAVE_RECORDING:
            return RecordScreenResult(save_success=await recorder.save(args.save_as_filename))
        if args.mode == RecordingMode.RECORDING_MODE_DISCARD_RECORDING:
            await recorder.discard()
            return RecordScreenResult(discard_success=RecordScreenDiscardSuccess())
    except CodedError as exc:
        return _error(exc.code, exc.message)
    return _error(
        "invalid_argument", "mode must be START_RECORDING, SAVE_RECORDING or DISCARD_RECORDING"
    )


RECORD_SCREEN = ToolSpec(
    "record_screen_tool_call",
    record_screen,
    effects=Effect.MACHINE,  # it starts a recorder and writes videos to the artifacts folder
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("RecordScreen"),
    subject=no_subject,
)
