"""read_tool_call, edit_tool_call (Write, StrReplace) and delete_tool_call on the real daemon."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon
from tests.shared_daemon import *  # noqa: F403 (the daemon, space and client fixtures)
from tests.workspace_support import (
    case,
    delete_call,
    read_call,
    replace_call,
    result_of,
    tiny_disk_in,
    write_call,
)
from tools import files


def numbered(count: int, width: int = 0) -> str:
    return "".join(f"line {n}{'x' * width}\n" for n in range(1, count + 1))


# ---------------------------------------------------------------------------------------------
# Read


async def test_read_returns_lines_with_numbers_size_and_total(
    client: ExecDaemonClient, space: Path
) -> None:
    path = space / "a.txt"
    path.write_text("one\ntwo\nthree\n")
    result = await result_of(client, read_call(path))
    success = result.success
    assert [(r.start_line, r.end_line, r.contents) for r in success.ranges] == [
        (1, 3, "one\ntwo\nthree")
    ]
    assert success.total_lines == 3
    assert success.file_size == 14
    assert not success.truncated and not success.total_lines_unknown


async def test_read_relative_path_is_relative_to_the_workspace(
    client: ExecDaemonClient, space: Path
) -> None:
    (space / "rel.txt").write_text("hi\n")
    result = await result_of(client, read_call(f"{space.name}/rel.txt"))
    assert result.success.ranges[0].contents == "hi"


async def test_read_offset_limit_and_negative_offset(client: ExecDaemonClient, space: Path) -> None:
    path = space / "n.txt"
    path.write_text(numbered(50))
    window = (await result_of(client, read_call(path, offset=10, limit=3))).success
    assert (window.ranges[0].start_line, window.ranges[0].end_line) == (10, 12)
    assert window.ranges[0].contents == "line 10\nline 11\nline 12"
    tail = (await result_of(client, read_call(path, offset=-2))).success
    assert (tail.ranges[0].start_line, tail.ranges[0].contents) == (49, "line 49\nline 50")
    assert tail.total_lines == 50
    past = (await result_of(client, read_call(path, offset=80))).success
    assert not past.ranges
    assert "past the end" in past.truncation_note and "50 lines" in past.truncation_note


async def test_read_without_limit_stops_at_the_default_and_says_where_to_continue(
    client: ExecDaemonClient, space: Path
) -> None:
    path = space / "long.txt"
    path.write_text(numbered(files.DEFAULT_LINE_LIMIT + 500))
    success = (await result_of(client, read_call(path))).success
    assert success.ranges[0].end_line == files.DEFAULT_LINE_LIMIT
    assert success.truncated
    assert f"offset={files.DEFAULT_LINE_LIMIT + 1}" in success.truncation_note
    assert success.total_lines == files.DEFAULT_LINE_LIMIT + 500


async def test_read_cuts_long_lines_with_a_marker(client: ExecDaemonClient, space: Path) -> None:
    path = space / "wide.txt"
    path.write_text("short\n" + "y" * 50_000 + "\nafter\n")
    success = (await result_of(client, read_call(path))).success
    lines = success.ranges[0].contents.split("\n")
    assert lines[0] == "short" and lines[2] == "after"
    assert lines[1].startswith("y" * files.MAX_LINE_CHARS)
    assert f"[line cut: {50_000 - files.MAX_LINE_CHARS} more characters]" in lines[1]


async def test_read_large_file_seeks_instead_of_loading(
    client: ExecDaemonClient, space: Path
) -> None:
    # Bigger than FULL_COUNT_BYTES: a read from the end numbers lines from the end.
    path = space / "big.log"
    line_count = 1_700_000
    with path.open("w") as out:
        out.write(numbered(line_count, width=10))
    assert path.stat().st_size > files.FULL_COUNT_BYTES
    tail = (await result_of(client, read_call(path, offset=-3))).success
    assert tail.total_lines_unknown and tail.total_lines == 0
    assert (tail.ranges[0].start_line, tail.ranges[0].end_line) == (-3, -1)
    assert tail.ranges[0].contents.split("\n")[-1] == f"line {line_count}{'x' * 10}"
    assert "count from the end" in tail.truncation_note
    middle = (await result_of(client, read_call(path, offset=1_000_000, limit=2))).success
    assert middle.ranges[0].start_line == 1_000_000
    assert middle.ranges[0].contents == f"line 1000000{'x' * 10}\nline 1000001{'x' * 10}"
    end = (await result_of(client, read_call(path, offset=line_count - 1))).success
    assert end.total_lines == line_count and not end.total_lines_unknown


async def test_read_medium_file_counts_lines_exactly(client: ExecDaemonClient, space: Path) -> None:
    path = space / "medium.txt"
    path.write_text(numbered(300_000))  # ~3.5 MB: past the whole-file read, under the count cap
    tail = (await result_of(client, read_call(path, offset=-1))).success
    assert tail.ranges[0].start_line == 300_000 and tail.total_lines == 300_000
    assert tail.ranges[0].contents == "line 300000"


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (3).to_bytes(4, "big") + (2).to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    pixels = zlib.compress(b"".join(b"\x00" + b"\xff\x00\x00" * 3 for _ in range(2)))
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


async def test_read_image_returns_bytes_and_mime(client: ExecDaemonClient, space: Path) -> None:
    path = space / "pixel.png"
    path.write_bytes(_png())
    success = (await result_of(client, read_call(path))).success
    assert success.image.mime_type == "image/png"
    assert success.image.data == path.read_bytes()
    assert (success.image.width, success.image.height) == (3, 2)
    assert not success.ranges


@pytest.mark.parametrize(
    ("name", "head", "mime"),
    [
        ("photo.jpg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", "image/jpeg"),
        ("anim.gif", b"GIF89a\x01\x00\x01\x00\x00\x00\x00", "image/gif"),
        ("pic.webp", b"RIFF\x1a\x00\x00\x00WEBPVP8 ", "image/webp"),
    ],
)
async def test_read_recognises_image_kinds_by_content(
    client: ExecDaemonClient, space: Path, name: str, head: bytes, mime: str
) -> None:
    path = space / name
    path.write_bytes(head + b"\x00" * 32)
    success = (await result_of(client, read_call(path))).success
    assert success.image.mime_type == mime and success.image.data == path.read_bytes()


def _pdf(pages: list[str]) -> bytes:
    writer = PdfWriter()
    for text in pages:
        page = writer.add_blank_page(612, 792)
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
        fonts = DictionaryObject({NameObject("/F1"): writer._add_object(font)})
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): fonts})
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode())
        page[NameObject("/Contents")] = writer._add_object(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


async def test_read_pdf_returns_text_per_page(client: ExecDaemonClient, space: Path) -> None:
    path = space / "doc.pdf"
    path.write_bytes(_pdf(["Hello page one", "Second page here", "Third"]))
    success = (await result_of(client, read_call(path))).success
    assert [(p.page_number, p.text) for p in success.pdf_pages] == [
        (1, "Hello page one"),
        (2, "Second page here"),
        (3, "Third"),
    ]
    assert success.total_pages == 3
    second = (await result_of(client, read_call(path, offset=2, limit=1))).success
    assert [p.text for p in second.pdf_pages] == ["Second page here"]


async def test_read_typed_failures(client: ExecDaemonClient, space: Path) -> None:
    (space / "blob.bin").write_bytes(b"\x00\x01\x02binary\x00")
    (space / "dir").mkdir()
    (space / "broken.pdf").write_bytes(b"%PDF-1.4 nonsense")
    binary = await result_of(client, read_call(space / "blob.bin"))
    assert case(binary) == "not_text_file" and binary.not_text_file.detected_type == "binary"
    assert case(await result_of(client, read_call(space / "dir"))) == "is_directory"
    missing = await result_of(client, read_call(space / "nope.txt"))
    assert case(missing) == "file_not_found" and "does not exist" in missing.file_not_found.reason
    pdf = await result_of(client, read_call(space / "broken.pdf"))
    assert case(pdf) == "error" and pdf.error.code == "unreadable_pdf"
    fifo = space / "pipe"
    os.mkfifo(fifo)
    assert case(await result_of(client, read_call(fifo))) == "not_text_file"


@pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to make a file unreadable to another user"
)
def test_read_without_permission_is_permission_denied(space: Path) -> None:
    path = space / "secret.txt"
    path.write_text("s\n")
    path.chmod(0o600)
    space.chmod(0o755)
    # Root reads everything: the reader runs as nobody to meet a real EACCES.
    code = (
        "from pathlib import Path; from tools.files import _read_sync;"
        f"print(_read_sync(Path({str(path)!r}), 1, None).WhichOneof('result'))"
    )
    setpriv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    out = subprocess.run(
        [*setpriv, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
        check=False,
    )
    if "ModuleNotFoundError" in out.stderr or out.returncode == 126:
        pytest.skip("the project is not importable as another user here")
    assert out.stdout.strip() == "permission_denied", out.stderr


# ---------------------------------------------------------------------------------------------
# Write


async def test_write_creates_parents_and_reports_what_it_did(
    client: ExecDaemonClient, space: Path
) -> None:
    path = space / "new" / "deep" / "file.txt"
    result = await result_of(client, write_call(path, "a\nb\n"))
    assert case(result) == "success"
    assert result.success.created and result.success.bytes_written == 4
    assert result.success.lines_added == 2 and result.success.lines_removed == 0
    assert path.read_text() == "a\nb\n"
    again = await result_of(client, write_call(path, "a\nc\n"))
    assert not again.success.created
    assert (again.success.lines_added, again.success.lines_removed) == (1, 1)
    assert "-b\n+c\n" in again.success.diff


async def test_write_keeps_mode_owner_and_symlinks(client: ExecDaemonClient, space: Path) -> None:
    path = space / "script.sh"
    path.write_text("old\n")
    path.chmod(0o751)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)
    link = space / "link.sh"
    link.symlink_to(path.name)
    await result_of(client, write_call(link, "new\n"))
    assert link.is_symlink() and path.read_text() == "new\n"
    info = path.stat()
    assert info.st_mode & 0o777 == 0o751
    if os.geteuid() == 0:
        assert (info.st_uid, info.st_gid) == (65534, 65534)
    assert sorted(os.listdir(space)) == ["link.sh", "script.sh"]  # no temp file left


async def test_new_files_get_the_umask_mode_not_the_temp_file_mode(
    client: ExecDaemonClient, space: Path
) -> None:
    path = space / "fresh.txt"
    await result_of(client, write_call(path, "x"))
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


async def test_write_is_never_seen_half_written(client: ExecDaemonClient, space: Path) -> None:
    path = space / "flip.txt"
    first, second = "A" * 1_000_000, "B" * 700_000
    path.write_text(first)
    seen: set[str] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            content = path.read_text()
            seen.add("A" if content == first else "B" if content == second else "torn")

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for index in range(6):
            await result_of(client, write_call(path, second if index % 2 == 0 else first))
    finally:
        stop.set()
        watcher.join()
    assert "torn" not in seen and seen


@pytest.fixture
def tiny_disk(space: Path) -> Iterator[Path]:
    with tiny_disk_in(space) as mount_point:
        yield mount_point


async def test_write_on_a_full_disk_keeps_the_old_content(
    client: ExecDaemonClient, tiny_disk: Path
) -> None:
    path = tiny_disk / "config.txt"
    path.write_text("precious\n")
    result = await result_of(client, write_call(path, "x" * 200_000))
    assert case(result) == "error"
    assert result.error.code == "no_space"
    assert "no space left" in result.error.message
    assert path.read_text() == "precious\n"
    assert os.listdir(tiny_disk) == ["config.txt"]


async def test_write_to_protected_paths_is_refused_with_the_reason(
    client: ExecDaemonClient, daemon: RunningDaemon, space: Path
) -> None:
    root = daemon.workspace
    refused = [
        root / ".vscode" / "settings.json",
        root / ".cursor" / "mcp.json",
        root / ".cursorignore",
        space / ".git" / "hooks" / "pre-commit",
        space / "nested" / ".git" / "config",
    ]
    for path in refused:
        result = await result_of(client, write_call(path, "{}"))
        assert case(result) == "permission_denied", path
        assert "protected path" in result.permission_denied.reason
        assert not path.exists()
    rule = root / ".cursor" / "rules" / f"{space.name}.json"
    assert case(await result_of(client, write_call(rule, "{}"))) == "success"
    rule.unlink()


async def test_large_write_streams_its_content_as_deltas(
    daemon: RunningDaemon, space: Path
) -> None:
    path = space / "big.txt"
    content = "é" + "z" * (files.EDIT_DELTA_THRESHOLD * 3)  # a 2-byte char first: chunk seams
    async with daemon.client() as client, client.exec_stream() as stream:
        call = await stream.start(write_call(path, content))
        outcome = await call.wait()
    assert outcome.result is not None
    deltas = [d.edit_tool_call_delta for d in outcome.deltas]
    assert len(deltas) >= 3
    assert "".join(d.content for d in deltas) == content
    assert [d.offset for d in deltas] == sorted(d.offset for d in deltas)
    assert path.read_text() == content


async def test_a_small_edit_of_a_large_file_streams_nothing(
    daemon: RunningDaemon, space: Path
) -> None:
    path = space / "large.txt"
    path.write_text("x" * (files.EDIT_DELTA_THRESHOLD * 4) + "\nneedle\n")
    async with daemon.client() as client, client.exec_stream() as stream:
        small = await (await stream.start(replace_call(path, "needle", "pin"))).wait()
        big_text = "y" * (files.EDIT_DELTA_THRESHOLD * 2)
        big = await (await stream.start(replace_call(path, "pin", big_text))).wait()
    assert small.result is not None and not small.deltas
    assert big.result is not None and big.deltas
    assert "".join(d.edit_tool_call_delta.content for d in big.deltas) == path.read_text()


# ---------------------------------------------------------------------------------------------
# StrReplace


async def test_str_replace_exact_single_match(client: ExecDaemonClient, space: Path) -> None:
    path = space / "code.py"
    path.write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    result = await result_of(client, replace_call(path, "return 1", "return 10"))
    success = result.success
    assert (success.replacements, success.lines_added, success.lines_removed) == (1, 1, 1)
    assert "-    return 1\n+    return 10\n" in success.diff
    assert success.diff.startswith(f"--- a/{space.name}/code.py\n+++ b/{space.name}/code.py\n")
    assert path.read_text() == "def f():\n    return 10\n\n\ndef g():\n    return 2\n"


async def test_str_replace_refuses_zero_or_several_matches(
    client: ExecDaemonClient, space: Path
) -> None:
    path = space / "dup.txt"
    path.write_text("x = 1\nx = 1\n")
    none = await result_of(client, replace_call(path, "y = 2", "z"))
    assert case(none) == "no_match"
    several = await result_of(client, replace_call(path, "x = 1", "x = 2"))
    assert case(several) == "multiple_matches" and several.multiple_matches.match_count == 2
    assert path.read_text() == "x = 1\nx = 1\n"
    everything = await result_of(client, replace_call(path, "x = 1", "x = 2", replace_all=True))
    assert everything.success.replacements == 2
    assert path.read_text() == "x = 2\nx = 2\n"


async def test_str_replace_matches_lf_text_in_a_crlf_file(
    client: ExecDaemonClient, space: Path
) -> None:
    path = space / "win.txt"
    path.write_bytes(b"a\r\nb\r\nc\r\n")
    result = await result_of(client, replace_call(path, "a\nb", "a\nB"))
    assert case(result) == "success"
    assert path.read_bytes() == b"a\r\nB\r\nc\r\n"


async def test_str_replace_edge_cases(client: ExecDaemonClient, space: Path) -> None:
    created = await result_of(client, replace_call(space / "made.txt", "", "hello\n"))
    assert created.success.created and (space / "made.txt").read_text() == "hello\n"
    same = await result_of(client, replace_call(space / "made.txt", "hello", "hello"))
    assert case(same) == "error" and same.error.code == "invalid_argument"
    missing = await result_of(client, replace_call(space / "gone.txt", "a", "b"))
    assert case(missing) == "file_not_found"
    (space / "bin").write_bytes(b"\x00abc")
    assert case(await result_of(client, replace_call(space / "bin", "abc", "x"))) == (
        "not_text_file"
    )


async def test_str_replace_keeps_undecodable_bytes(client: ExecDaemonClient, space: Path) -> None:
    path = space / "latin1.txt"
    path.write_bytes(b"caf\xe9 = 1\nvalue = 2\n")
    await result_of(client, replace_call(path, "value = 2", "value = 3"))
    assert path.read_bytes() == b"caf\xe9 = 1\nvalue = 3\n"


# ---------------------------------------------------------------------------------------------
# Delete


async def test_delete(client: ExecDaemonClient, space: Path) -> None:
    path = space / "doomed.txt"
    path.write_text("12345")
    result = await result_of(client, delete_call(path))
    assert result.success.deleted_file_size == 5 and not path.exists()
    again = await result_of(client, delete_call(path))
    assert case(again) == "file_not_found"
    (space / "folder").mkdir()
    assert case(await result_of(client, delete_call(space / "folder"))) == "is_directory"
    hooks = space / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-push").write_text("#!/bin/sh\n")
    protected = await result_of(client, delete_call(hooks / "pre-push"))
    assert case(protected) == "permission_denied"
    assert (hooks / "pre-push").exists()


async def test_delete_removes_a_symlink_not_its_target(
    client: ExecDaemonClient, space: Path
) -> None:
    target = space / "target.txt"
    target.write_text("keep")
    link = space / "link"
    link.symlink_to(target)
    await result_of(client, delete_call(link))
    assert not link.exists() and target.read_text() == "keep"


async def test_calls_run_concurrently_on_one_stream(daemon: RunningDaemon, space: Path) -> None:
    for index in range(20):
        (space / f"f{index}.txt").write_text(f"content {index}\n")
    async with daemon.client() as client, client.exec_stream() as stream:
        calls = [await stream.start(read_call(space / f"f{i}.txt")) for i in range(20)]
        outcomes = await asyncio.gather(*(call.wait() for call in calls))
    for index, outcome in enumerate(outcomes):
        assert outcome.result is not None
        read = outcome.result.read_tool_call.result.success
        assert read.ranges[0].contents == f"content {index}"
