"""record_screen_tool_call (RecordScreen): START / SAVE / DISCARD a recording of the X display.

ffmpeg (x11grab, H.264) writes to a temporary file; SAVE stops it with `q` on its stdin — the
only stop that leaves a playable mp4 (a killed ffmpeg never writes the index) — and moves the
file into the artifacts folder (`--artifacts-folder`, default /opt/cursor/artifacts) under the
asked-for name, made safe. One recording at a time per daemon.
"""

from __future__ import annotations

import asyncio
import logging
import re
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
from exec_daemon.config import off_without
from exec_daemon.dispatch import CallContext
from exec_daemon.state import Daemon
from tools.display import DisplayService, DisplayUnavailable

log = logging.getLogger(__name__)

RECORDINGS_TMP = Path("/tmp/exec-daemon/recordings")
FRAMES_PER_SECOND = 15
# A forgotten recording must not fill the disk.
MAX_RECORDING_SECONDS = 3600
# A recording saved at once would hold no frame at all: it lasts at least this long.
MIN_RECORDING_SECONDS = 1.0
START_SECONDS = 10.0
# `q` makes ffmpeg finish the file (and move the index to the front: +faststart).
STOP_SECONDS = 15.0
VIDEO_SUFFIXES = {".mp4", ".mov", ".m4v", ".webm", ".mkv", ".avi", ".gif"}


class RecordingError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Recording:
    process: asyncio.subprocess.Process
    path: Path
    started: float
    ffmpeg_log: IO[bytes]

    def log_tail(self) -> str:
        self.ffmpeg_log.seek(0)
        return self.ffmpeg_log.read()[-2000:].decode(errors="replace").strip()

    def close(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
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
    while candidate.exists():
        candidate = folder / f"{stem}-{number}.mp4"
        number += 1
    return candidate


class ScreenRecorder:
    """One per daemon (`daemon.service(ScreenRecorder)`): at most one recording runs."""

    def __init__(self, daemon: Daemon) -> None:
        # Created first, so the daemon closes it after the recorder (services close newest first).
        self.displays = daemon.service(DisplayService)
        self._artifacts = daemon.config.artifacts_folder
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
                raise RecordingError("not_recording", "no recording is going: start one first")
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
                raise RecordingError("not_recording", "no recording is going")
            await self._drop()

    async def aclose(self) -> None:
        async with self._lock:
            await self._drop()

    async def _spawn(self) -> Recording:
        try:
            display = await self.displays.ensure()
        except DisplayUnavailable as exc:
            raise RecordingError("display_unavailable", str(exc)) from None
        if shutil.which("ffmpeg") is None:
            raise RecordingError("unavailable", "ffmpeg is not installed")
        path = await asyncio.to_thread(_new_recording_path)
        ffmpeg_log = tempfile.TemporaryFile(prefix="ffmpeg-")
        process = await asyncio.create_subprocess_exec(
            *ffmpeg_command(display.name, display.width, display.height, path),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=ffmpeg_log,
            # Out of the daemon's process group: a terminal's Ctrl-C must not cut the file short.
            start_new_session=True,
        )
        recording = Recording(process, path, time.monotonic(), ffmpeg_log)
        try:
            await _wait_capturing(recording)
        except RecordingError:
            await _kill(recording.process)
            log.warning("ffmpeg did not start recording %s: %s", display.name, recording.log_tail())
            recording.close()
            raise
        log.info("recording %s to %s (ffmpeg pid %d)", display.name, path, process.pid)
        return recording

    def _keep(self, recorded: Path, requested_name: str) -> Path:
        try:
            self._artifacts.mkdir(parents=True, exist_ok=True)
            destination = unused_path(
                self._artifacts, artifact_name(requested_name, datetime.now())
            )
            shutil.move(recorded, destination)
        except OSError as exc:
            log.warning("keeping the recording in %s failed: %s", self._artifacts, exc)
            raise RecordingError(
                "io_error", f"could not save the recording into {self._artifacts}: {exc.strerror}"
            ) from None
        return destination

    async def _drop(self) -> None:
        recording, self._recording = self._recording, None
        if recording is not None:
            await _kill(recording.process)
            recording.close()


def _new_recording_path() -> Path:
    RECORDINGS_TMP.mkdir(parents=True, exist_ok=True)
    return RECORDINGS_TMP / f"{time.time_ns()}.mp4"


async def _wait_capturing(recording: Recording) -> None:
    """Returns once ffmpeg wrote its first bytes (it has a frame), or fails if it ended."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if recording.process.returncode is not None:
            raise RecordingError("recording_failed", "ffmpeg could not record the display")
        if recording.path.exists() and recording.path.stat().st_size > 0:
            return
        await asyncio.sleep(0.05)
    raise RecordingError("recording_failed", "ffmpeg did not start recording in time")


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
        await _kill(process)
        raise RecordingError("recording_failed", "ffmpeg did not finish the file in time") from None
    if returncode != 0:
        log.warning("ffmpeg exited with %d: %s", returncode, recording.log_tail())
        raise RecordingError("recording_failed", f"ffmpeg failed (exit code {returncode})")


async def _kill(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.kill()
    await process.wait()


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
    except RecordingError as exc:
        return _error(exc.code, exc.message)
    return _error(
        "invalid_argument", "mode must be START_RECORDING, SAVE_RECORDING or DISCARD_RECORDING"
    )
