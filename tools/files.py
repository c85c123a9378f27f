"""read_tool_call, edit_tool_call (Write and StrReplace) and delete_tool_call.

Reading never loads a large file whole. Files up to SMALL_FILE_BYTES are read at once. Larger
ones: a positive offset is found by counting b"\\n" in 1 MiB chunks from the start (memchr speed,
one reused buffer); a negative offset by counting backwards from the end in 64 KiB chunks, so the
last lines of a 1 GB file cost a few reads. `total_lines` is exact when it is cheap: the file is
at most FULL_COUNT_BYTES, or the read reached the end anyway. Otherwise (say the last 100 lines
of 1 GB) counting every line would cost far more than the read itself, so the result says
`total_lines_unknown` and, for a read from the end, numbers the lines from the end (-100..-1),
which is exactly what a negative `offset` takes to read more.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from io import BufferedReader
from pathlib import Path

from agent.v1.common_pb2 import FileNotFound, PermissionDenied, ToolError
from agent.v1.files_pb2 import (
    DeleteArgs,
    DeleteResult,
    DeleteSuccess,
    EditArgs,
    EditMultipleMatches,
    EditNoMatch,
    EditResult,
    EditSuccess,
    EditToolCallDelta,
    IsDirectory,
    NotTextFile,
    ReadImage,
    ReadPdfPage,
    ReadRange,
    ReadToolArgs,
    ReadToolResult,
    ReadToolSuccess,
)
from agent.v1.tool_call_pb2 import ToolCallDelta
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.paths import (
    NoRules,
    PathRefused,
    PathRules,
    check_writable,
    delete_checked,
    open_checked,
    read_checked,
)
from exec_daemon.kernel.spec import Effect, HookEvents, Hooks, RunModeRule, Subject, ToolSpec
from tools import notebooks, reports
from tools.diffs import replace_text, unified_diff
from tools.language_servers import LanguageServers
from tools.workspace import (
    AgentPaths,
    atomic_write,
    display_path,
    resolve_path,
    write_rules,
)

log = logging.getLogger(__name__)

# Lines returned when no limit is given.
DEFAULT_LINE_LIMIT = 2000
# A longer line is cut to this many characters, with a marker saying how much was left out.
MAX_LINE_CHARS = 2000
# Text returned by one read; more is cut with a note saying where to continue.
MAX_READ_BYTES = 256 * 1024
# Files up to this size are read whole; larger ones through the seek/scan paths.
SMALL_FILE_BYTES = 1024 * 1024
# total_lines is counted whenever the file is at most this big (≈ 10 ms of memchr).
FULL_COUNT_BYTES = 32 * 1024 * 1024
# Pseudo-files that report size 0 (/proc, /sys) are read up to this much.
UNSIZED_FILE_BYTES = 8 * 1024 * 1024
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_PDF_BYTES = 100 * 1024 * 1024
# Edits load the file; bigger files must be changed another way (shell, apply_agent_diff).
MAX_EDIT_BYTES = 256 * 1024 * 1024
# An edit whose new text (Write's contents, StrReplace's new_string) is larger than this streams
# the new file content as edit_tool_call_delta while it is written.
EDIT_DELTA_THRESHOLD = 64 * 1024
EDIT_DELTA_CHUNK = 64 * 1024
SNIFF_BYTES = 8192
SCAN_CHUNK = 1024 * 1024
TAIL_CHUNK = 64 * 1024

IMAGE_SIGNATURES: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),
)
BINARY_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x7fELF", "elf executable"),
    (b"PK\x03\x04", "zip archive"),
    (b"\x1f\x8b", "gzip archive"),
    (b"\xfd7zXZ", "xz archive"),
    (b"BZh", "bzip2 archive"),
    (b"SQLite format 3\x00", "sqlite database"),
)


# ---------------------------------------------------------------------------------------------
# Read

NO_RULES = NoRules()


@dataclass
class TextWindow:
    ranges: list[ReadRange] = field(default_factory=list)
    total_lines: int | None = None
    truncated: bool = False
    notes: list[str] = field(default_factory=list)


def image_mime(head: bytes) -> str | None:
    for signature, offset, mime in IMAGE_SIGNATURES:
        if head[offset : offset + len(signature)] == signature:
            if mime == "image/webp" and not head.startswith(b"RIFF"):
                continue
            return mime
    return None


def binary_type(head: bytes) -> str | None:
    """What a non-text file is, judged by its first bytes; None when it looks like text."""
    for signature, kind in BINARY_SIGNATURES:
        if head.startswith(signature):
            return kind
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16 text"
    return "binary" if b"\x00" in head else None


def _cut_line(line: bytes, dropped: int = 0) -> str:
    text = line.decode("utf-8", "replace")
    if len(text) <= MAX_LINE_CHARS and not dropped:
        return text
    rest = len(text) - MAX_LINE_CHARS + dropped
    return text[:MAX_LINE_CHARS] + f" … [line cut: {rest} more characters]"


def _strip_eol(line: bytes) -> bytes:
    if line.endswith(b"\n"):
        line = line[:-1]
    if line.endswith(b"\r"):
        line = line[:-1]
    return line


def _count_newlines(file: BufferedReader, start: int, end: int) -> int:
    buffer = bytearray(SCAN_CHUNK)
    file.seek(start)
    count = 0
    remaining = end - start
    while remaining > 0:
        got = file.readinto(buffer)
        if not got:
            break
        got = min(got, remaining)
        count += buffer.count(b"\n", 0, got)
        remaining -= got
    return count


def _seek_line(file: BufferedReader, line: int) -> int | None:
    """The byte offset where 1-based `line` starts; None when the file has fewer lines."""
    if line <= 1:
        return 0
    buffer = bytearray(SCAN_CHUNK)
    to_skip = line - 1
    position = 0
    file.seek(0)
    while True:
        got = file.readinto(buffer)
        if not got:
            return None
        found = buffer.count(b"\n", 0, got)
        if found < to_skip:
            to_skip -= found
            position += got
            continue
        at = -1
        for _ in range(to_skip):
            at = buffer.find(b"\n", at + 1, got)
        start = position + at + 1
        # "Line N" right after the last newline exists only if bytes follow it.
        file.seek(0, os.SEEK_END)
        return start if start < file.tell() else None


def _tail_start(file: BufferedReader, size: int, lines: int) -> tuple[int, int | None]:
    """The offset where the last `lines` lines start, and the file's line count when the file
    has no more than `lines` lines (it was all scanned then)."""
    file.seek(size - 1)
    end = size - 1 if file.read(1) == b"\n" else size
    wanted = lines
    position = end
    while position > 0:
        chunk_start = max(0, position - TAIL_CHUNK)
        file.seek(chunk_start)
        chunk = file.read(position - chunk_start)
        found = chunk.count(b"\n")
        if found >= wanted:
            at = len(chunk)
            for _ in range(wanted):
                at = chunk.rfind(b"\n", 0, at)
            return chunk_start + at + 1, None
        wanted -= found
        position = chunk_start
    return 0, lines - wanted + 1


def _collect_lines(
    file: BufferedReader, start: int, limit: int, budget: int
) -> tuple[list[str], bool, bool]:
    """Up to `limit` lines from byte `start`: (lines, reached the end, stopped by the budget)."""
    file.seek(start)
    lines: list[str] = []
    used = 0
    max_bytes = MAX_LINE_CHARS * 4 + 1
    while len(lines) < limit:
        raw = file.readline(max_bytes)
        if not raw:
            return lines, True, False
        dropped = 0
        if len(raw) == max_bytes and not raw.endswith(b"\n"):
            dropped = _skip_rest_of_line(file)
        text = _cut_line(_strip_eol(raw), dropped)
        used += len(text) + 1
        if used > budget and lines:
            return lines, False, True
        lines.append(text)
    at_end = file.read(1) == b""
    return lines, at_end, False


def _skip_rest_of_line(file: BufferedReader) -> int:
    skipped = 0
    while True:
        chunk = file.read(TAIL_CHUNK)
        if not chunk:
            return skipped
        newline = chunk.find(b"\n")
        if newline != -1:
            file.seek(newline + 1 - len(chunk), os.SEEK_CUR)
            return skipped + newline
        skipped += len(chunk)


def _window_from_lines(
    all_lines: list[bytes], offset: int, limit: int | None, total: int
) -> TextWindow:
    window = TextWindow(total_lines=total)
    if offset < 0:
        first = max(total + offset + 1, 1)
    else:
        first = max(offset, 1)
    if first > total:
        window.notes.append(_past_end_note(first, total))
        return window
    count = limit if limit is not None else DEFAULT_LINE_LIMIT
    chosen: list[str] = []
    used = 0
    for raw in all_lines[first - 1 : first - 1 + count]:
        text = _cut_line(_strip_eol(raw))
        used += len(text) + 1
        if used > MAX_READ_BYTES and chosen:
            window.truncated = True
            break
        chosen.append(text)
    last = first + len(chosen) - 1
    window.ranges.append(ReadRange(start_line=first, end_line=last, contents="\n".join(chosen)))
    _note_rest(window, last, total, limit)
    return window


def _past_end_note(first: int, total: int | None) -> str:
    if total == 0:
        return "the file is empty"
    known = f" (it has {total} lines)" if total is not None else ""
    return f"line {first} is past the end of the file{known}"


def _note_rest(window: TextWindow, last: int, total: int | None, limit: int | None) -> None:
    more = total is None or last < total
    if window.truncated:
        window.notes.append(
            f"output cut at {MAX_READ_BYTES // 1024} KiB after line {last}; "
            f"continue with offset={last + 1}"
        )
    elif limit is None and more and last > 0:
        window.truncated = True
        of = f" of {total}" if total is not None else ""
        window.notes.append(
            f"showing lines up to {last}{of} (default limit {DEFAULT_LINE_LIMIT}); "
            f"continue with offset={last + 1}"
        )


def _read_small(file: BufferedReader, size: int, offset: int, limit: int | None) -> TextWindow:
    data = file.read(size if size else UNSIZED_FILE_BYTES)
    lines = data.splitlines(keepends=True)
    window = _window_from_lines(lines, offset, limit, len(lines))
    if not size and len(data) == UNSIZED_FILE_BYTES:
        window.notes.append(f"only the first {UNSIZED_FILE_BYTES} bytes were read")
    return window


def _read_large_forward(
    file: BufferedReader, size: int, offset: int, limit: int | None
) -> TextWindow:
    first = max(offset, 1)
    start = _seek_line(file, first)
    known_total = _total_lines(file, size) if size <= FULL_COUNT_BYTES else None
    if start is None:
        window = TextWindow(total_lines=known_total)
        window.notes.append(_past_end_note(first, known_total))
        return window
    count = limit if limit is not None else DEFAULT_LINE_LIMIT
    lines, at_end, cut = _collect_lines(file, start, count, MAX_READ_BYTES)
    last = first + len(lines) - 1
    if known_total is None and at_end:
        known_total = last
    window = TextWindow(total_lines=known_total, truncated=cut)
    window.ranges.append(ReadRange(start_line=first, end_line=last, contents="\n".join(lines)))
    _note_rest(window, last, known_total, limit)
    return window


def _total_lines(file: BufferedReader, size: int) -> int:
    total = _count_newlines(file, 0, size)
    file.seek(size - 1)
    return total + (0 if file.read(1) == b"\n" else 1)


def _read_large_tail(file: BufferedReader, size: int, offset: int, limit: int | None) -> TextWindow:
    wanted = -offset
    start, whole_file_lines = _tail_start(file, size, wanted)
    count = min(limit, wanted) if limit is not None else min(wanted, DEFAULT_LINE_LIMIT)
    lines, _, cut = _collect_lines(file, start, count, MAX_READ_BYTES)
    if whole_file_lines is not None:
        window = TextWindow(total_lines=whole_file_lines, truncated=cut)
        first = 1
    elif size <= FULL_COUNT_BYTES:
        window = TextWindow(total_lines=_total_lines(file, size), truncated=cut)
        first = _count_newlines(file, 0, start) + 1
    else:
        # Numbered from the end: counting every line of a huge file is what this path avoids.
        window = TextWindow(total_lines=None, truncated=cut)
        window.notes.append(
            "line numbers count from the end of the file (-1 = the last line): the file is too "
            "large to count its lines for this read"
        )
        first = -wanted
    last = first + len(lines) - 1
    window.ranges.append(ReadRange(start_line=first, end_line=last, contents="\n".join(lines)))
    if cut:
        window.notes.append(
            f"output cut at {MAX_READ_BYTES // 1024} KiB after line {last}; "
            f"continue with offset={last + 1}"
        )
    return window


def read_text_window(file: BufferedReader, size: int, offset: int, limit: int | None) -> TextWindow:
    """The asked-for lines of a text file, without reading more of it than needed."""
    if size <= SMALL_FILE_BYTES:
        return _read_small(file, size, offset, limit)
    if offset < 0:
        return _read_large_tail(file, size, offset, limit)
    return _read_large_forward(file, size, offset, limit)


def _image_size(file: BufferedReader) -> tuple[int, int]:
    from PIL import Image, UnidentifiedImageError  # imported on first use: it is not small

    try:
        file.seek(0)
        with Image.open(file) as image:  # reads the header only
            return int(image.width), int(image.height)
    except (OSError, UnidentifiedImageError, ValueError):
        return 0, 0


def _read_pdf(
    file: BufferedReader, path: Path, size: int, offset: int, limit: int | None
) -> ReadToolResult:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError

    try:
        file.seek(0)
        reader = PdfReader(file)
        if reader.is_encrypted:
            reader.decrypt("")
        total = len(reader.pages)
        first = max(total + offset + 1, 1) if offset < 0 else max(offset, 1)
        last = min(total, first - 1 + (limit if limit is not None else total))
        pages: list[ReadPdfPage] = []
        used = 0
        truncated = False
        for number in range(first, last + 1):
            text = reader.pages[number - 1].extract_text() or ""
            used += len(text)
            if used > MAX_READ_BYTES and pages:
                truncated = True
                break
            pages.append(ReadPdfPage(page_number=number, text=text))
    except FileNotDecryptedError:
        return ReadToolResult(
            error=ToolError(code="unreadable_pdf", message=f"{path} is a password-protected PDF")
        )
    except Exception:
        # pypdf raises many kinds of errors on damaged files; all mean the same to the agent.
        log.info("cannot read PDF %s", path, exc_info=True)
        return ReadToolResult(
            error=ToolError(code="unreadable_pdf", message=f"{path} is not a readable PDF")
        )
    success = ReadToolSuccess(path=str(path), pdf_pages=pages, total_pages=total, file_size=size)
    if truncated:
        success.truncated = True
        success.truncation_note = (
            f"output cut after page {pages[-1].page_number}; continue with "
            f"offset={pages[-1].page_number + 1} (offset and limit count pages for PDFs)"
        )
    return ReadToolResult(success=success)


def _read_refused(refused: PathRefused) -> ReadToolResult:
    if refused.kind == "invalid":
        return ReadToolResult(error=ToolError(code="invalid_argument", message=refused.reason))
    return ReadToolResult(
        permission_denied=PermissionDenied(path=refused.path, reason=refused.reason)
    )


def _read_sync(
    path: Path, offset: int, limit: int | None, rules: PathRules = NO_RULES
) -> ReadToolResult:
    shown = str(path)
    try:
        opened = open_checked(path, rules)
    except PathRefused as refused:
        return _read_refused(refused)
    except FileNotFoundError:
        return ReadToolResult(
            file_not_found=FileNotFound(path=shown, reason=f"{shown} does not exist")
        )
    except PermissionError:
        return ReadToolResult(
            permission_denied=PermissionDenied(path=shown, reason=f"no permission to read {shown}")
        )
    except OSError as exc:
        return ReadToolResult(error=_os_error(exc, shown))
    info = opened.info
    if not stat.S_ISREG(info.st_mode):
        opened.close()
    if stat.S_ISDIR(info.st_mode):
        return ReadToolResult(
            is_directory=IsDirectory(
                path=shown, reason=f"{shown} is a directory; list it with ls instead"
            )
        )
    if not stat.S_ISREG(info.st_mode):
        return ReadToolResult(
            not_text_file=NotTextFile(
                path=shown, reason=f"{shown} is not a regular file", detected_type="special file"
            )
        )
    try:
        with os.fdopen(opened.fd, "rb") as file:
            head = file.read(SNIFF_BYTES)
            mime = image_mime(head)
            if mime is not None:
                return _read_image(file, path, info.st_size, mime)
            if head.startswith(b"%PDF-"):
                if info.st_size > MAX_PDF_BYTES:
                    return _too_large(shown, info.st_size, MAX_PDF_BYTES)
                return _read_pdf(file, path, info.st_size, offset, limit)
            kind = binary_type(head)
            if kind is not None:
                return ReadToolResult(
                    not_text_file=NotTextFile(
                        path=shown,
                        reason=f"{shown} is not a text file ({kind})",
                        detected_type=kind,
                    )
                )
            file.seek(0)
            window = read_text_window(file, info.st_size, offset, limit)
    except PermissionError:
        return ReadToolResult(
            permission_denied=PermissionDenied(path=shown, reason=f"no permission to read {shown}")
        )
    except OSError as exc:
        return ReadToolResult(error=_os_error(exc, shown))
    success = ReadToolSuccess(
        path=shown,
        ranges=window.ranges,
        total_lines=window.total_lines or 0,
        total_lines_unknown=window.total_lines is None,
        file_size=info.st_size,
        truncated=window.truncated,
        truncation_note="; ".join(window.notes),
    )
    return ReadToolResult(success=success)


def _read_image(file: BufferedReader, path: Path, size: int, mime: str) -> ReadToolResult:
    if size > MAX_IMAGE_BYTES:
        return _too_large(str(path), size, MAX_IMAGE_BYTES)
    file.seek(0)
    data = file.read(MAX_IMAGE_BYTES + 1)
    width, height = _image_size(file)
    image = ReadImage(data=data, mime_type=mime, width=width, height=height)
    return ReadToolResult(success=ReadToolSuccess(path=str(path), image=image, file_size=size))


def _too_large(shown: str, size: int, limit: int) -> ReadToolResult:
    return ReadToolResult(
        error=ToolError(
            code="too_large",
            message=f"{shown} is {size} bytes; the limit for this kind of file is {limit}",
        )
    )


def _os_error(exc: OSError, shown: str) -> ToolError:
    log.info("I/O error on %s", shown, exc_info=True)
    name = errno.errorcode.get(exc.errno or 0, "EIO")
    return ToolError(code="io_error", message=f"cannot access {shown} ({name})")


async def read(args: ReadToolArgs, ctx: CallContext) -> ReadToolResult:
    if not args.path:
        return ReadToolResult(error=ToolError(code="invalid_argument", message="path is empty"))
    path = resolve_path(ctx.daemon.workspace, args.path)
    if args.HasField("limit") and args.limit < 0:
        return ReadToolResult(
            error=ToolError(code="invalid_argument", message="limit must not be negative")
        )
    offset = args.offset if args.HasField("offset") else 1
    limit = args.limit if args.HasField("limit") and args.limit > 0 else None
    rules = ctx.daemon.service(AgentPaths)
    return await asyncio.to_thread(_read_sync, path, offset, limit, rules)


# ---------------------------------------------------------------------------------------------
# Edit: Write (contents set) and StrReplace


READ = ToolSpec(
    "read_tool_call",
    read,
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("Read", events=HookEvents.READ_FILE),
    subject=lambda args: Subject(paths_read=(args.path,)),
)


def _denied(path: Path, reason: str) -> EditResult:
    return EditResult(permission_denied=PermissionDenied(path=str(path), reason=reason))


def _refused_edit(refused: PathRefused) -> EditResult:
    if refused.kind == "invalid":
        return EditResult(error=ToolError(code="invalid_argument", message=refused.reason))
    return EditResult(permission_denied=PermissionDenied(path=refused.path, reason=refused.reason))


def write_refusal(path: Path, rules: PathRules) -> PathRefused | None:
    """Why a write to `path` will be refused (checked on the real path), or None."""
    try:
        check_writable(path, rules)
    except PathRefused as refused:
        return refused
    except OSError:
        return None  # the write itself reports it
    return None


def _edit_failure(path: Path, failure: CodedError) -> EditResult:
    if failure.code == "permission_denied":
        return _denied(path, failure.message)
    return EditResult(error=ToolError(code=failure.code, message=failure.message))


def _utf8_chunks(data: bytes) -> Iterator[bytes]:
    """Pieces of about EDIT_DELTA_CHUNK bytes that never split a UTF-8 character."""
    start = 0
    while start < len(data):
        end = min(start + EDIT_DELTA_CHUNK, len(data))
        while end < len(data) and end > start + 1 and data[end] & 0xC0 == 0x80:
            end -= 1
        yield data[start:end]
        start = end


async def _emit(ctx: CallContext, delta: ToolCallDelta) -> None:
    await ctx.emit(delta)


async def _write_streaming(
    path: Path, data: bytes, ctx: CallContext, stream: bool
) -> tuple[int, bool]:
    """Writes atomically in a worker thread; with `stream`, the content also goes out as deltas."""
    rules = write_rules(ctx)
    if not stream:
        return await asyncio.to_thread(atomic_write, path, data, rules=rules)
    loop = asyncio.get_running_loop()
    shown = str(path)

    def send(chunk: bytes, offset: int) -> None:
        delta = ToolCallDelta(
            edit_tool_call_delta=EditToolCallDelta(
                path=shown, content=chunk.decode("utf-8", "replace"), offset=offset
            )
        )
        # Waiting for the send gives the stream's backpressure to the writer.
        asyncio.run_coroutine_threadsafe(_emit(ctx, delta), loop).result()

    return await asyncio.to_thread(
        atomic_write, path, _utf8_chunks(data), on_chunk=send, rules=rules
    )


def _load_text(path: Path, rules: PathRules) -> str | EditResult:
    shown = str(path)
    try:
        data, info = read_checked(path, rules, MAX_EDIT_BYTES + 1)
        if len(data) > MAX_EDIT_BYTES:
            return EditResult(
                error=ToolError(
                    code="too_large",
                    message=f"{shown} is {info.st_size} bytes; edits load the file and stop at "
                    f"{MAX_EDIT_BYTES}",
                )
            )
    except PathRefused as refused:
        return _refused_edit(refused)
    except FileNotFoundError:
        return EditResult(file_not_found=FileNotFound(path=shown, reason=f"{shown} does not exist"))
    except IsADirectoryError:
        return EditResult(error=ToolError(code="is_directory", message=f"{shown} is a directory"))
    except PermissionError:
        return _denied(path, f"no permission to read {shown}")
    except OSError as exc:
        return EditResult(error=_os_error(exc, shown))
    kind = binary_type(data[:SNIFF_BYTES])
    if kind is not None:
        return EditResult(
            not_text_file=NotTextFile(
                path=shown, reason=f"{shown} is not a text file ({kind})", detected_type=kind
            )
        )
    return data.decode("utf-8", "surrogateescape")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


async def _write_file(args: EditArgs, path: Path, ctx: CallContext) -> EditResult:
    loaded = await asyncio.to_thread(_load_text, path, ctx.daemon.service(AgentPaths))
    if isinstance(loaded, EditResult) and loaded.error.code == "is_directory":
        return loaded
    # An old file that is not text (or too big to load) is replaced all the same; the diff then
    # counts only the new lines.
    old = loaded if isinstance(loaded, str) else ""
    return await _write_edit(path, old, args.contents, ctx, streamed_text=args.contents)


async def _write_edit(
    path: Path, old: str, new: str, ctx: CallContext, *, streamed_text: str, replacements: int = 0
) -> EditResult:
    """Writes `new` over `old` atomically and answers with the diff; large edits stream deltas."""
    try:
        large = len(streamed_text) > EDIT_DELTA_THRESHOLD
        written, created = await _write_streaming(path, _encode(new), ctx, stream=large)
    except CodedError as failure:
        return _edit_failure(path, failure)
    await ctx.daemon.service(LanguageServers).file_written(path, new)
    stats = await asyncio.to_thread(
        unified_diff, old, new, display_path(ctx.daemon.workspace, path)
    )
    return EditResult(
        success=EditSuccess(
            path=str(path),
            lines_added=stats.lines_added,
            lines_removed=stats.lines_removed,
            diff=stats.diff,
            created=created,
            bytes_written=written,
            replacements=replacements,
        )
    )


async def _str_replace(args: EditArgs, path: Path, ctx: CallContext) -> EditResult:
    shown = str(path)
    if args.old_string == args.new_string:
        return EditResult(
            error=ToolError(
                code="invalid_argument", message="old_string and new_string are the same"
            )
        )
    old = await asyncio.to_thread(_load_text, path, ctx.daemon.service(AgentPaths))
    if isinstance(old, EditResult):
        if old.WhichOneof("result") == "file_not_found" and not args.old_string:
            # An empty old_string on a missing file creates it (as editors' "new file" edits do).
            args_for_write = EditArgs(path=args.path, contents=args.new_string)
            return await _write_file(args_for_write, path, ctx)
        return old
    if not args.old_string:
        if old:
            return EditResult(
                error=ToolError(
                    code="invalid_argument",
                    message="old_string is empty but the file is not; to replace the whole "
                    "file, send contents instead",
                )
            )
        new, count = args.new_string, 1
    else:
        replaced, count = replace_text(old, args.old_string, args.new_string, args.replace_all)
        if replaced is None and count == 0:
            return EditResult(
                no_match=EditNoMatch(
                    path=shown,
                    reason=f"old_string was not found in {shown} (it must match exactly, "
                    "whitespace and indentation included)",
                )
            )
        if replaced is None:
            return EditResult(
                multiple_matches=EditMultipleMatches(
                    path=shown,
                    match_count=count,
                    reason=f"old_string occurs {count} times in {shown}; add surrounding lines "
                    "to make it unique, or set replace_all",
                )
            )
        new = replaced
    return await _write_edit(path, old, new, ctx, streamed_text=args.new_string, replacements=count)


async def edit(args: EditArgs, ctx: CallContext) -> EditResult:
    if not args.path:
        return EditResult(error=ToolError(code="invalid_argument", message="path is empty"))
    path = resolve_path(ctx.daemon.workspace, args.path)
    refused = await asyncio.to_thread(write_refusal, path, write_rules(ctx))
    if refused is not None:
        return _refused_edit(refused)
    if args.HasField("notebook_cell"):
        return await notebooks.edit_cell(args, path, ctx)
    if args.HasField("contents"):
        return await _write_file(args, path, ctx)
    return await _str_replace(args, path, ctx)


# ---------------------------------------------------------------------------------------------
# Delete


EDIT = ToolSpec(
    "edit_tool_call",
    edit,
    # Absolute paths reach outside the workspace.
    effects=Effect.WORKSPACE | Effect.MACHINE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("Write", events=HookEvents.FILE_EDIT),
    subject=lambda args: Subject(paths_written=(args.path,)),
    edit_lines=reports.edit_lines,
)


def _delete_sync(path: Path, rules: PathRules) -> DeleteResult:
    shown = str(path)
    try:
        info = delete_checked(path, rules)
    except PathRefused as refused:
        if refused.kind == "invalid":
            return DeleteResult(error=ToolError(code="invalid_argument", message=refused.reason))
        return DeleteResult(
            permission_denied=PermissionDenied(path=refused.path, reason=refused.reason)
        )
    except IsADirectoryError:
        return DeleteResult(
            is_directory=IsDirectory(
                path=shown, reason=f"{shown} is a directory; delete removes files only"
            )
        )
    except FileNotFoundError:
        return DeleteResult(
            file_not_found=FileNotFound(
                path=shown, reason=f"{shown} does not exist (nothing was deleted)"
            )
        )
    except PermissionError:
        return DeleteResult(
            permission_denied=PermissionDenied(
                path=shown, reason=f"no permission to delete {shown}"
            )
        )
    except OSError as exc:
        return DeleteResult(error=_os_error(exc, shown))
    return DeleteResult(success=DeleteSuccess(path=shown, deleted_file_size=info.st_size))


async def delete(args: DeleteArgs, ctx: CallContext) -> DeleteResult:
    if not args.path:
        return DeleteResult(error=ToolError(code="invalid_argument", message="path is empty"))
    path = resolve_path(ctx.daemon.workspace, args.path)
    result = await asyncio.to_thread(_delete_sync, path, write_rules(ctx))
    if result.HasField("success"):
        await ctx.daemon.service(LanguageServers).file_deleted(path)
    return result


DELETE = ToolSpec(
    "delete_tool_call",
    delete,
    effects=Effect.WORKSPACE | Effect.MACHINE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("Delete"),
    subject=lambda args: Subject(paths_written=(args.path,)),
)
