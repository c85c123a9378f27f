"""What a subagent's model sees beyond text: images, as image parts of the OpenAI-compatible chat
message (`{"type": "image_url", "image_url": {"url": "data:image/webp;base64,..."}}`).

- A tool result carrying an image (computer_use's screenshot, read's image) is answered as text
  without the image's bytes; the image follows in a user message (a `tool` message may hold text
  only), one part per image, each after a line saying which call it came from.
- A Task's `attachments` (files for the media review subagent): an image as it is; a video as
  frames sampled evenly over its length by ffmpeg, each after a line with its timestamp. A path
  is opened with the agent's read rules (tools/workspace.py's AgentPaths, as the read tool
  does); what it may not read is a typed error naming the path.

ffprobe and ffmpeg parse that file, which the agent supplied (a crafted one may exploit a
demuxer), so they run bounded (`_bounded`) and, when the sandbox is on (--sandbox-enabled),
confined by it (the ISOLATED_INPUT_ONLY demand of exec_daemon/kernel/sandboxing.py): no network
(no IP socket at all), no writes but to a few devices (/dev/null, ...), its processes and
threads in a PID namespace of their own, at most 64; they read the attachment through the
descriptor the read rules opened, passed on, and write the answer to their stdout pipe. Of the
file system they read nothing else but the system's programs and libraries (/usr, /lib*, the
loader's configuration: sandbox/plan.py's PROGRAM_READS): not the daemon's state, the home or
the workspace, so neither an exploit nor a playlist naming other files (HLS, concat) reaches
them. A kernel without what the sandbox needs gives no frames (unavailable, naming what is
missing), never an unconfined ffmpeg.

Without the sandbox they run unconfined but bounded all the same: at most MEDIA_MEMORY_BYTES
of address space and MEDIA_CPU_SECONDS of CPU (prlimit), no file larger than 0 bytes (a write
to a regular file fails with EFBIG; creating or truncating one is not prevented), no core
dump, no_new_privs (setpriv: a setuid program does not elevate), a minimal environment (not the
agent's: no LD_PRELOAD of its choosing), its time bounded by FFMPEG_SECONDS. There is then no
network or file system confinement.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.paths import PathRefused, open_checked
from exec_daemon.kernel.processes import UNCONFINED, Confinement
from exec_daemon.kernel.protected import resolve_path
from exec_daemon.kernel.runner import HelperFailed, run_helper
from exec_daemon.kernel.sandboxing import ISOLATED_INPUT_ONLY, Sandboxing
from exec_daemon.kernel.state import Daemon
from tools.files import SNIFF_BYTES, image_mime
from tools.workspace import AgentPaths

# An image (attached or sampled) larger than this is refused: it goes into a request body.
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_ATTACHMENTS = 10
# Frames sampled from one video, evenly over its length, each at most the screenshots' size.
FRAMES_PER_VIDEO = 8
FRAME_SIZE = (1280, 800)
FFMPEG_SECONDS = 60.0
MEDIA_MEMORY_BYTES = 1 << 30
MEDIA_CPU_SECONDS = 60
MEDIA_OPEN_FILES = 64
MEDIA_PROGRAMS = ("ffmpeg", "ffprobe", "prlimit", "setpriv")
# Images from tool calls kept in a conversation: older ones are replaced by a line of text
# (every model turn sends the whole conversation again).
KEPT_TOOL_IMAGES = 4
TOOL_IMAGE_PREFIX = "Image from the "
# About a thousand tokens, as providers charge for a screenshot-sized image.
IMAGE_CHARS = 4000
DROPPED_IMAGE = "[an earlier image, dropped to keep the conversation small]"


@dataclass(frozen=True)
class Picture:
    mime: str
    data: bytes
    caption: str


def image_part(picture: Picture) -> dict[str, Any]:
    encoded = base64.b64encode(picture.data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{picture.mime};base64,{encoded}"}}


def pictures_message(intro: str, pictures: Sequence[Picture]) -> dict[str, Any]:
    """A user message: `intro`, then each picture after its caption."""
    content: list[dict[str, Any]] = [{"type": "text", "text": intro}] if intro else []
    for picture in pictures:
        content.append({"type": "text", "text": picture.caption})
        content.append(image_part(picture))
    return {"role": "user", "content": content}


def tool_images_message(pictures: Sequence[Picture]) -> dict[str, Any]:
    return pictures_message("", pictures)


def split_images(result: Message, call_name: str) -> tuple[Message, list[Picture]]:
    """A copy of `result` without the bytes of the images it holds, and those images."""
    copy = type(result)()
    copy.CopyFrom(result)
    found: list[Picture] = []
    _take_images(copy, call_name, found)
    return copy, found


def _take_images(message: Message, call_name: str, found: list[Picture]) -> None:
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.message_type is None or field.message_type.GetOptions().map_entry:
                continue
            for child in value if field.is_repeated else (value,):
                _take_images(child, call_name, found)
        elif field.type == FieldDescriptor.TYPE_BYTES and not field.is_repeated:
            mime = image_mime(value[:SNIFF_BYTES])
            if mime is not None:
                found.append(
                    Picture(mime, value, f"{TOOL_IMAGE_PREFIX}{call_name} call ({field.name}):")
                )
                message.ClearField(field.name)


def drop_old_tool_images(messages: list[dict[str, Any]]) -> None:
    """Keeps the last KEPT_TOOL_IMAGES images that tool calls answered; earlier ones become a
    line of text (the attachments a Task was given stay)."""
    seen = 0
    for message in reversed(messages):
        content = message.get("content")
        if message["role"] != "user" or not isinstance(content, list) or not content:
            continue
        first = content[0]
        if first.get("type") != "text" or not first["text"].startswith(TOOL_IMAGE_PREFIX):
            continue
        for index, part in enumerate(content):
            if part.get("type") == "image_url":
                seen += 1
                if seen > KEPT_TOOL_IMAGES:
                    content[index] = {"type": "text", "text": DROPPED_IMAGE}


def conversation_chars(messages: list[dict[str, Any]]) -> int:
    """The conversation's size in characters for a token estimate, an image counted as
    IMAGE_CHARS (its base64 is no measure of what a model charges for it)."""
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                total += IMAGE_CHARS if part.get("type") == "image_url" else len(str(part))
            total += len(json.dumps({k: v for k, v in message.items() if k != "content"}))
        else:
            total += len(json.dumps(message))
    return total


# --- a Task's attachments ------------------------------------------------------------------------


async def attachment_pictures(daemon: Daemon, paths: Sequence[str]) -> list[Picture]:
    """The pictures of a Task's attachments, in order. Raises CodedError: permission_denied for
    a path the agent may not read, not_found, invalid_argument for a file that is neither an
    image nor a video, unavailable without ffmpeg."""
    if len(paths) > MAX_ATTACHMENTS:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT,
            f"{len(paths)} attachments: give at most {MAX_ATTACHMENTS}",
        )
    pictures: list[Picture] = []
    for given in paths:
        pictures.extend(await _pictures_of(daemon, given))
    return pictures


@dataclass
class _Opened:
    fd: int
    size: int
    head: bytes


def _open_checked(daemon: Daemon, given: str, what: str) -> tuple[Path, _Opened]:
    """`given` opened with the agent's read rules; CodedError naming it as `what`."""
    if not given.strip():
        raise CodedError(ErrorCode.INVALID_ARGUMENT, f"the {what} path is empty")
    path = resolve_path(daemon.workspace, given)
    try:
        opened = open_checked(path, daemon.service(AgentPaths))
    except PathRefused as refused:
        code = (
            ErrorCode.INVALID_ARGUMENT if refused.kind == "invalid" else ErrorCode.PERMISSION_DENIED
        )
        raise CodedError(code, f"{what} {given}: {refused.reason}") from None
    except FileNotFoundError:
        raise CodedError(ErrorCode.NOT_FOUND, f"{what} {given} does not exist") from None
    except PermissionError:
        raise CodedError(
            ErrorCode.PERMISSION_DENIED, f"{what} {given}: no permission to read it"
        ) from None
    except OSError as exc:
        raise CodedError(
            ErrorCode.FAILED_PRECONDITION, f"{what} {given}: cannot open it ({exc.strerror})"
        ) from None
    if opened.is_dir or not _is_regular(opened.info.st_mode):
        opened.close()
        raise CodedError(ErrorCode.INVALID_ARGUMENT, f"{what} {given} is not a regular file")
    try:
        head = os.pread(opened.fd, SNIFF_BYTES, 0)
    except OSError as exc:
        opened.close()
        raise CodedError(
            ErrorCode.FAILED_PRECONDITION, f"{what} {given}: cannot read it ({exc.strerror})"
        ) from None
    return path, _Opened(opened.fd, opened.info.st_size, head)


def _is_regular(mode: int) -> bool:
    return stat.S_ISREG(mode)


def _read_image(opened: _Opened, given: str, what: str) -> bytes:
    if opened.size > MAX_IMAGE_BYTES:
        raise CodedError(
            ErrorCode.TOO_LARGE,
            f"{what} {given} is {opened.size} bytes; an image may have {MAX_IMAGE_BYTES}",
        )
    return os.pread(opened.fd, MAX_IMAGE_BYTES + 1, 0)


def read_agent_image(daemon: Daemon, given: str, what: str) -> Picture:
    """The image at `given` as the agent's read tool may read it (blocking: run in a thread).
    Raises CodedError naming it as `what`: permission_denied, not_found, invalid_argument when
    it is no image (png, jpeg, gif, webp), too_large."""
    path, opened = _open_checked(daemon, given, what)
    try:
        mime = image_mime(opened.head)
        if mime is None:
            raise CodedError(
                ErrorCode.INVALID_ARGUMENT, f"{what} {given} is not an image (png, jpeg, gif, webp)"
            )
        return Picture(mime, _read_image(opened, given, what), str(path))
    finally:
        os.close(opened.fd)


async def _pictures_of(daemon: Daemon, given: str) -> list[Picture]:
    path, opened = await asyncio.to_thread(_open_checked, daemon, given, "attachment")
    try:
        mime = image_mime(opened.head)
        if mime is not None:
            data = await asyncio.to_thread(_read_image, opened, given, "attachment")
            return [Picture(mime, data, f"Attachment {path}:")]
        return await _video_frames(daemon, opened.fd, path, given)
    finally:
        os.close(opened.fd)


async def _video_frames(daemon: Daemon, fd: int, path: Path, given: str) -> list[Picture]:
    if any(shutil.which(program) is None for program in MEDIA_PROGRAMS):
        raise CodedError(
            ErrorCode.UNAVAILABLE,
            f"attachment {given}: ffmpeg, ffprobe, prlimit and setpriv are needed to read videos",
        )
    # The helpers read the file the checks opened (its descriptor, passed on), never the path.
    source = _Source(fd, f"/proc/self/fd/{fd}", await media_confinement(daemon, given))
    duration = await _duration(daemon, source, given)
    frames = []
    # A length ffprobe does not know: the first frame only.
    count = FRAMES_PER_VIDEO if duration > 0 else 1
    for index in range(count):
        at = duration * (index + 0.5) / count
        data = await _frame_at(daemon, source, at, given)
        if data:
            caption = f"Attachment {path}, frame {index + 1} of {count} at {_clock(at)}"
            frames.append(Picture("image/jpeg", data, caption + f" (of {_clock(duration)}):"))
    if not frames:
        raise CodedError(ErrorCode.INVALID_ARGUMENT, f"attachment {given}: no frame could be read")
    return frames


def _clock(seconds: float) -> str:
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes):02d}:{rest:06.3f}"


@dataclass(frozen=True)
class _Source:
    fd: int
    path: str
    confinement: Confinement


async def media_confinement(daemon: Daemon, given: str) -> Confinement:
    """How ffmpeg parsing the agent's `given` file is confined (see the module docstring).
    Raises CodedError(UNAVAILABLE) when the sandbox is on but cannot confine it."""
    decision = await daemon.service(Sandboxing).decide(None, ISOLATED_INPUT_ONLY)
    if decision.refusal:
        raise CodedError(
            ErrorCode.UNAVAILABLE,
            f"attachment {given}: ffmpeg cannot be sandboxed: {decision.refusal}",
        )
    return decision.confinement


def bounded(argv: Sequence[str], confinement: Confinement) -> list[str]:
    """`argv` with the limits every media helper runs under, sandbox or not (the sandbox sets
    no_new_privs itself, and refuses setpriv's attempt to keep capabilities)."""
    limits = [f"--as={MEDIA_MEMORY_BYTES}", f"--cpu={MEDIA_CPU_SECONDS}", "--fsize=0", "--core=0"]
    limits.append(f"--nofile={MEDIA_OPEN_FILES}")
    unprivileged = ["setpriv", "--no-new-privs", "--"] if confinement == UNCONFINED else []
    return ["prlimit", *limits, "--", *unprivileged, *argv]


def media_env() -> dict[str, str]:
    """The environment of a media helper: the daemon's PATH, nothing of the agent's."""
    return {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C"}


async def run_media_helper(
    argv: Sequence[str], source: _Source, given: str, limit: int = MAX_IMAGE_BYTES
) -> tuple[int, bytes, bool]:
    """Runs a media helper on `source`: (exit status, stdout, whether it was cut).
    Raises CodedError naming `given` when it cannot be started or outlives FFMPEG_SECONDS."""
    try:
        done = await run_helper(
            bounded(argv, source.confinement),
            env=media_env(),
            cwd="/",
            time_limit=FFMPEG_SECONDS,
            limit=limit,
            pass_fds=(source.fd,),
            confinement=source.confinement,
        )
    except HelperFailed as failed:
        raise CodedError(failed.code, f"attachment {given}: {failed.message}") from None
    return done.returncode, done.stdout.data, bool(done.stdout.cut)


async def _duration(daemon: Daemon, source: _Source, given: str) -> float:
    argv = ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries"]
    argv += ["stream=duration:format=duration", "-of", "json", source.path]
    returncode, output, _cut = await run_media_helper(argv, source, given, limit=1 << 20)
    found: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        found = json.loads(output.decode("utf-8", "replace"))
    streams = found.get("streams") or []
    if returncode != 0 or not streams:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT,
            f"attachment {given} is neither an image (png, jpeg, gif, webp) nor a video",
        )
    for value in (streams[0].get("duration"), (found.get("format") or {}).get("duration")):
        with contextlib.suppress(TypeError, ValueError):
            seconds = float(str(value))
            if seconds > 0:
                return seconds
    return 0.0


async def _frame_at(daemon: Daemon, source: _Source, at: float, given: str) -> bytes:
    width, height = FRAME_SIZE
    fit = f"scale='min({width},iw)':'min({height},ih)':force_original_aspect_ratio=decrease"
    argv = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-ss", f"{at:.3f}"]
    argv += ["-i", source.path, "-frames:v", "1", "-vf", fit, "-q:v", "4"]
    argv += ["-f", "image2pipe", "-c:v", "mjpeg", "pipe:1"]
    returncode, output, cut = await run_media_helper(argv, source, given)
    if returncode != 0 or cut:
        return b""
    return output
