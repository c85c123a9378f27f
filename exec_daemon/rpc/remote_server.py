"""ControlService.DownloadCursorServer with a `url`: an archive of Cursor's remote server.

(Without a url, the request's `commit` is a code-server version, installed by
exec_daemon/rpc/ide.py, which also serves WarmRemoteAccessServer.) A download with a `url`: the archive is
streamed to `~/.cursor-server/downloads/` (a temp file renamed into place when complete), bounded
in size and time, and answered with its path, size and sha256.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import tempfile
import urllib.parse
from pathlib import Path

from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.state import Daemon
from exec_daemon.rpc.http_failures import http_failure, where

log = logging.getLogger(__name__)

MAX_DOWNLOAD_BYTES = 2 * 1024 * 1024 * 1024
DOWNLOAD_TIMEOUT_SECONDS = 600.0
CHUNK_BYTES = 256 * 1024


def download_directory(daemon: Daemon) -> Path:
    home = daemon.env.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".cursor-server" / "downloads"


def _file_name(commit: str, url: str) -> str:
    if commit:
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", commit):
            raise CodedError(
                ErrorCode.INVALID_ARGUMENT, "commit must be letters, digits, '.', '_' or '-'"
            )
        return f"cursor-server-{commit}"
    name = os.path.basename(urllib.parse.urlsplit(url).path)
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-")
    return name or "cursor-server"


def _check_url(url: str) -> None:
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise CodedError(ErrorCode.INVALID_ARGUMENT, "url must be an http or https URL")


async def download_cursor_server(daemon: Daemon, commit: str, url: str) -> tuple[Path, int, str]:
    """Downloads the archive; returns (path, size, sha256 hex)."""
    import httpx

    _check_url(url)
    directory = download_directory(daemon)
    target = directory / _file_name(commit, url)
    try:
        await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=directory)
    except OSError as exc:
        raise CodedError(
            ErrorCode.INTERNAL, f"cannot write to {directory}: {exc.strerror}"
        ) from None
    digest = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "wb") as file:
            timeout = httpx.Timeout(60.0)
            async with (
                asyncio.timeout(DOWNLOAD_TIMEOUT_SECONDS),
                httpx.AsyncClient(timeout=timeout, follow_redirects=True) as client,
                client.stream("GET", url) as response,
            ):
                if not response.is_success:
                    raise CodedError(
                        ErrorCode.UNAVAILABLE,
                        f"the download failed: {where(url)} answered HTTP {response.status_code}",
                    )
                async for chunk in response.aiter_bytes(CHUNK_BYTES):
                    size += len(chunk)
                    if size > MAX_DOWNLOAD_BYTES:
                        raise CodedError(
                            ErrorCode.RESOURCE_EXHAUSTED,
                            f"the download is larger than {MAX_DOWNLOAD_BYTES} bytes",
                        )
                    digest.update(chunk)
                    await asyncio.to_thread(file.write, chunk)
            await asyncio.to_thread(os.fsync, file.fileno())
        await asyncio.to_thread(os.replace, temp_name, target)
    except TimeoutError:
        raise CodedError(
            ErrorCode.DEADLINE_EXCEEDED,
            f"the download did not finish within {DOWNLOAD_TIMEOUT_SECONDS:.0f} s",
        ) from None
    except httpx.HTTPError as exc:
        log.info("downloading the Cursor server from %s failed: %r", url, exc)
        raise CodedError(ErrorCode.UNAVAILABLE, http_failure("download from", url, exc)) from None
    except OSError as exc:
        raise CodedError(ErrorCode.INTERNAL, f"writing {target} failed: {exc.strerror}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
    log.info("downloaded the Cursor server to %s (%d bytes)", target, size)
    return target, size, digest.hexdigest()
