"""ControlService.ListArtifacts / UploadArtifacts: the files in the artifacts folder
(screenshots, recordings, reports) and their upload to a URL the orchestrator gives.

An upload PUTs each file with its bytes streamed from disk (64 KiB pieces, never the whole
file in memory), a few files at a time. A file counts as uploaded while its size and mtime are
those it had when its upload succeeded (kept in memory for the daemon's life).
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import os
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISLNK, S_ISREG
from typing import TYPE_CHECKING

from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.state import Daemon
from exec_daemon.rpc.http_failures import http_failure

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

MAX_ARTIFACTS = 10_000
UPLOAD_CHUNK_BYTES = 64 * 1024
PARALLEL_UPLOADS = 4
UPLOAD_TIMEOUT_SECONDS = 300.0
# Extensions Python's table lacks or gets wrong for what lands here.
EXTRA_MIME_TYPES = {".webp": "image/webp", ".mp4": "video/mp4", ".webm": "video/webm"}


@dataclass(frozen=True)
class ArtifactInfo:
    path: str  # relative to the artifacts folder
    size: int
    mime_type: str
    modified_ms: int
    uploaded: bool


@dataclass(frozen=True)
class UploadOutcome:
    uploaded: list[ArtifactInfo]
    failures: list[tuple[str, str]]  # (path, reason)


def mime_type(path: str) -> str:
    extension = os.path.splitext(path)[1].lower()
    guessed = EXTRA_MIME_TYPES.get(extension) or mimetypes.guess_type(path)[0]
    return guessed or "application/octet-stream"


class UploadedArtifacts:
    """(size, mtime_ns) of each artifact when its upload succeeded."""

    def __init__(self, daemon: Daemon) -> None:
        self.folder = Path(daemon.config.artifacts_folder)
        self._stamps: dict[str, tuple[int, int]] = {}

    def is_uploaded(self, relative: str, info: os.stat_result) -> bool:
        return self._stamps.get(relative) == (info.st_size, info.st_mtime_ns)

    def mark(self, relative: str, info: os.stat_result) -> None:
        self._stamps[relative] = (info.st_size, info.st_mtime_ns)


def _walk(folder: Path) -> list[tuple[str, os.stat_result]]:
    """Regular files under `folder` (relative paths, sorted), skipping hidden ones (such as
    the temp files of writes in progress)."""
    found: list[tuple[str, os.stat_result]] = []
    for directory, subdirectories, names in os.walk(folder):
        subdirectories[:] = sorted(name for name in subdirectories if not name.startswith("."))
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = os.path.join(directory, name)
            try:
                info = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            if not os.path.isfile(path) or os.path.islink(path):
                continue
            found.append((os.path.relpath(path, folder), info))
            if len(found) >= MAX_ARTIFACTS:
                return found
    return found


def _info(relative: str, stat: os.stat_result, uploaded: bool) -> ArtifactInfo:
    return ArtifactInfo(
        path=relative,
        size=stat.st_size,
        mime_type=mime_type(relative),
        modified_ms=stat.st_mtime_ns // 1_000_000,
        uploaded=uploaded,
    )


async def list_artifacts(daemon: Daemon) -> list[ArtifactInfo]:
    store = daemon.service(UploadedArtifacts)
    files = await asyncio.to_thread(_walk, store.folder)
    return [_info(relative, stat, store.is_uploaded(relative, stat)) for relative, stat in files]


def upload_target(upload_url: str, relative: str) -> str:
    quoted = urllib.parse.quote(relative)
    if "{path}" in upload_url:
        return upload_url.replace("{path}", quoted)
    return upload_url.rstrip("/") + "/" + quoted


def _check_url(upload_url: str) -> None:
    if not upload_url:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT,
            "upload_url is required (this daemon has no upload endpoint)",
        )
    parsed = urllib.parse.urlsplit(upload_url.replace("{path}", "x"))
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise CodedError(ErrorCode.INVALID_ARGUMENT, "upload_url must be an http or https URL")


def _select(
    store: UploadedArtifacts, paths: list[str]
) -> tuple[list[tuple[str, os.stat_result]], list[tuple[str, str]]]:
    """The artifacts to upload (asked-for ones, or all not yet uploaded) and those refused."""
    if not paths:
        return [(rel, st) for rel, st in _walk(store.folder) if not store.is_uploaded(rel, st)], []
    chosen, refused = [], []
    root = os.path.normpath(store.folder)
    real_root = os.path.realpath(root)
    where = (
        f"artifacts are the files under {root} (--artifacts-folder), named relative to it; "
        f"workspace files are not artifacts"
    )
    for path in paths:
        absolute = os.path.normpath(os.path.join(root, path))
        if not absolute.startswith(root + os.sep):
            refused.append((path, f"not inside the artifacts folder: {where}"))
            continue
        try:
            info = os.lstat(absolute)
        except OSError:
            refused.append((path, f"no such artifact: {where}"))
            continue
        # What it resolves to counts: a link (of the file or of a folder on its way) could
        # make any file the daemon can read an "artifact".
        if S_ISLNK(info.st_mode):
            refused.append((path, "a symbolic link: artifacts are regular files"))
            continue
        if not os.path.realpath(absolute).startswith(real_root + os.sep):
            refused.append((path, "its folder is a symbolic link out of the artifacts folder"))
            continue
        if not S_ISREG(info.st_mode):
            refused.append((path, "not a regular file"))
            continue
        chosen.append((os.path.relpath(absolute, root), info))
    return chosen, refused


async def _file_chunks(path: Path) -> AsyncIterator[bytes]:
    # O_NOFOLLOW: a file swapped for a link after it was chosen is not followed either.
    descriptor = await asyncio.to_thread(os.open, path, os.O_RDONLY | os.O_NOFOLLOW)
    file = os.fdopen(descriptor, "rb")
    try:
        while chunk := await asyncio.to_thread(file.read, UPLOAD_CHUNK_BYTES):
            yield chunk
    finally:
        await asyncio.to_thread(file.close)


async def _put(
    client: httpx.AsyncClient, url: str, path: Path, stat: os.stat_result, mime: str
) -> str | None:
    """PUTs one file; None when the server took it, else why not."""
    import httpx

    headers = {"content-type": mime, "content-length": str(stat.st_size)}
    try:
        response = await client.put(url, content=_file_chunks(path), headers=headers)
    except httpx.TimeoutException:
        return f"the upload did not finish within {UPLOAD_TIMEOUT_SECONDS:.0f} s"
    except httpx.HTTPError as exc:
        log.info("uploading %s failed: %r", path, exc)
        return http_failure("upload to", url, exc)
    except OSError as exc:
        return f"cannot read the file ({exc.strerror})"
    if not response.is_success:
        return f"the server answered HTTP {response.status_code}"
    return None


async def upload_artifacts(daemon: Daemon, paths: list[str], upload_url: str) -> UploadOutcome:
    import httpx

    _check_url(upload_url)
    store = daemon.service(UploadedArtifacts)
    chosen, failures = await asyncio.to_thread(_select, store, paths)
    uploaded: list[ArtifactInfo] = []
    gate = asyncio.Semaphore(PARALLEL_UPLOADS)

    async def upload_one(client: httpx.AsyncClient, relative: str, stat: os.stat_result) -> None:
        async with gate:
            path = store.folder / relative
            url = upload_target(upload_url, relative)
            failure = await _put(client, url, path, stat, mime_type(relative))
        if failure is not None:
            failures.append((relative, failure))
            return
        store.mark(relative, stat)
        uploaded.append(_info(relative, stat, True))

    timeout = httpx.Timeout(UPLOAD_TIMEOUT_SECONDS, connect=30.0)
    async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
        await asyncio.gather(*(upload_one(client, rel, stat) for rel, stat in chosen))
    uploaded.sort(key=lambda artifact: artifact.path)
    return UploadOutcome(uploaded=uploaded, failures=failures)
