"""ControlService's file RPCs: ListDirectory, Read/WriteTextFile, Read/WriteBinaryFile.

These serve the orchestrator, not the agent: no .cursorignore, no protected paths.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from exec_daemon.kernel.errors import CodedError, ErrorCode
from tools.workspace import atomic_write, resolve_path, write_failure, write_target

log = logging.getLogger(__name__)

# Room left in a response for everything but the payload.
MESSAGE_OVERHEAD = 64 * 1024
_RPC_CODES = {
    ErrorCode.NO_SPACE: ErrorCode.RESOURCE_EXHAUSTED,
    ErrorCode.PERMISSION_DENIED: ErrorCode.PERMISSION_DENIED,
    ErrorCode.READ_ONLY: ErrorCode.FAILED_PRECONDITION,
    ErrorCode.IS_DIRECTORY: ErrorCode.FAILED_PRECONDITION,
    ErrorCode.NOT_A_DIRECTORY: ErrorCode.FAILED_PRECONDITION,
    ErrorCode.INVALID_ARGUMENT: ErrorCode.INVALID_ARGUMENT,
    ErrorCode.TOO_LARGE: ErrorCode.RESOURCE_EXHAUSTED,
}


@dataclass
class DirectoryEntryInfo:
    name: str
    is_directory: bool
    is_symlink: bool
    size: int
    modified_ms: int
    mode: int


def _rpc_failure(exc: OSError, path: Path, action: str) -> CodedError:
    if isinstance(exc, FileNotFoundError):
        return CodedError(ErrorCode.NOT_FOUND, f"{path} does not exist")
    if isinstance(exc, PermissionError):
        return CodedError(ErrorCode.PERMISSION_DENIED, f"no permission to {action} {path}")
    if isinstance(exc, IsADirectoryError):
        return CodedError(ErrorCode.FAILED_PRECONDITION, f"{path} is a directory")
    if isinstance(exc, NotADirectoryError):
        return CodedError(ErrorCode.FAILED_PRECONDITION, f"{path} is not a directory")
    log.info("%s %s failed", action, path, exc_info=True)
    return CodedError(ErrorCode.INTERNAL, f"could not {action} {path}")


def _from_write_failure(failure: CodedError) -> CodedError:
    return CodedError(_RPC_CODES.get(failure.code, ErrorCode.INTERNAL), failure.message)


def _list_directory_sync(path: Path) -> list[DirectoryEntryInfo]:
    try:
        with os.scandir(path) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
    except OSError as exc:
        raise _rpc_failure(exc, path, "list") from None
    listed = []
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
            is_dir = entry.is_dir(follow_symlinks=True)
        except OSError:
            continue
        listed.append(
            DirectoryEntryInfo(
                name=entry.name,
                is_directory=is_dir,
                is_symlink=stat.S_ISLNK(info.st_mode),
                size=info.st_size if stat.S_ISREG(info.st_mode) else 0,
                modified_ms=int(info.st_mtime * 1000),
                mode=stat.S_IMODE(info.st_mode),
            )
        )
    return listed


async def list_directory(workspace: str, path: str) -> list[DirectoryEntryInfo]:
    return await asyncio.to_thread(_list_directory_sync, resolve_path(workspace, path))


def _read_bounded(path: Path, offset: int, length: int) -> tuple[bytes, int]:
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            if offset > size:
                raise CodedError(
                    ErrorCode.OUT_OF_RANGE, f"offset {offset} is past the end ({size} bytes)"
                )
            file.seek(offset)
            return file.read(length), size
    except OSError as exc:
        raise _rpc_failure(exc, path, "read") from None


@dataclass(frozen=True)
class TextWindow:
    text: str
    total_size: int
    next_offset: int
    # Up to `context_bytes` of the text just before the window (for redaction at its edge).
    before: str = ""


# The longest UTF-8 encoding of one character.
_UTF8_MAX_BYTES = 4


def _read_text_sync(
    path: Path, offset: int, length: int, max_bytes: int, context_bytes: int
) -> TextWindow:
    """`length` bytes (0: the rest, which must fit in `max_bytes`) from `offset`, shortened to
    end on a whole character."""
    whole_rest = length == 0
    data, size = _read_bounded(
        path, offset, max_bytes + 1 if whole_rest else min(length, max_bytes)
    )
    if whole_rest and len(data) > max_bytes:
        raise CodedError(
            ErrorCode.RESOURCE_EXHAUSTED,
            f"{path} has {size - offset} bytes from offset {offset}, more than one response "
            f"carries ({max_bytes} bytes: --max-message-bytes less {MESSAGE_OVERHEAD // 1024} "
            f"KiB); read it in windows with offset and length",
        )
    if data and 0x80 <= data[0] < 0xC0:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT, f"offset {offset} is inside a UTF-8 character of {path}"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        cut_inside_last_character = (
            offset + len(data) < size
            and exc.reason == "unexpected end of data"
            and exc.start > len(data) - _UTF8_MAX_BYTES
        )
        if not cut_inside_last_character:
            raise CodedError(
                ErrorCode.INVALID_ARGUMENT,
                f"{path} is not UTF-8 text (at byte {offset + exc.start}); use ReadBinaryFile",
            ) from None
        if exc.start == 0:
            raise CodedError(
                ErrorCode.INVALID_ARGUMENT,
                f"length {length} is shorter than the character at offset {offset} of {path}",
            ) from None
        data = data[: exc.start]
        text = data.decode("utf-8")
    start = max(0, offset - context_bytes)
    before = _read_bounded(path, start, offset - start)[0] if context_bytes and offset else b""
    return TextWindow(text, size, offset + len(data), before.decode("utf-8", "ignore"))


async def read_text_file(
    workspace: str,
    path: str,
    offset: int,
    length: int,
    max_message_bytes: int,
    context_bytes: int = 0,
) -> TextWindow:
    """A window of the file's text (the rest of it when `length` is 0), bounded by the message
    size and ending on a whole character, with up to `context_bytes` of what precedes it."""
    limit = max(max_message_bytes - MESSAGE_OVERHEAD, 1)
    resolved = resolve_path(workspace, path)
    return await asyncio.to_thread(_read_text_sync, resolved, offset, length, limit, context_bytes)


async def read_binary_file(
    workspace: str, path: str, offset: int, length: int, max_message_bytes: int
) -> tuple[bytes, int]:
    """A window of the file (bounded by the message size) and the file's size."""
    limit = max(max_message_bytes - MESSAGE_OVERHEAD, 1)
    length = min(length, limit) if length else limit
    return await asyncio.to_thread(_read_bounded, resolve_path(workspace, path), offset, length)


async def write_file(workspace: str, path: str, data: bytes) -> int:
    """Replaces (or creates) the file atomically; returns the bytes written."""
    try:
        written, _ = await asyncio.to_thread(atomic_write, resolve_path(workspace, path), data)
    except CodedError as failure:
        raise _from_write_failure(failure) from None
    return written


def _append_sync(path: Path, data: bytes) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(write_target(path), "ab") as file:
            file.write(data)
            file.flush()
            return os.fstat(file.fileno()).st_size
    except OSError as exc:
        raise _from_write_failure(write_failure(exc, path)) from None


async def append_file(workspace: str, path: str, data: bytes) -> int:
    """Appends a chunk (a large upload in pieces); returns the file's new size."""
    return await asyncio.to_thread(_append_sync, resolve_path(workspace, path), data)
