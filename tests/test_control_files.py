"""ControlService file RPCs on the real daemon: directories, text and binary files, git diff and
the workspace changes hash (with real git)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from agent.v1.control_pb2 import (
    GetDiffRequest,
    GetWorkspaceChangesHashRequest,
    ListDirectoryRequest,
    ReadBinaryFileRequest,
    ReadTextFileRequest,
    ReadTextFileResponse,
    WriteBinaryFileRequest,
    WriteTextFileRequest,
)
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon, running_daemon
from tests.shared_daemon import *  # noqa: F403 (the daemon, space and client fixtures)


async def test_list_directory(client: ExecDaemonClient, space: Path) -> None:
    (space / "b.txt").write_text("12345")
    (space / "a_dir").mkdir()
    (space / "link").symlink_to("a_dir")
    (space / "b.txt").chmod(0o640)
    response = await client.control.list_directory(
        ListDirectoryRequest(path=space.name), headers=client.headers
    )
    entries = {e.name: e for e in response.entries}
    assert [e.name for e in response.entries] == ["a_dir", "b.txt", "link"]
    assert entries["a_dir"].is_directory and not entries["a_dir"].is_symlink
    assert entries["b.txt"].size == 5 and entries["b.txt"].mode == 0o640
    assert entries["link"].is_symlink and entries["link"].is_directory
    assert entries["b.txt"].modified_ms > 0


async def test_file_rpc_errors_carry_connect_codes(client: ExecDaemonClient, space: Path) -> None:
    (space / "file.txt").write_text("x")
    (space / "latin1.txt").write_bytes(b"caf\xe9")
    calls = [
        (client.control.list_directory(ListDirectoryRequest(path=f"{space.name}/nope"), headers=client.headers), Code.NOT_FOUND),
        (client.control.list_directory(ListDirectoryRequest(path=f"{space.name}/file.txt"), headers=client.headers), Code.FAILED_PRECONDITION),
        (client.control.read_text_file(ReadTextFileRequest(path=f"{space.name}/nope"), headers=client.headers), Code.NOT_FOUND),
        (client.control.read_text_file(ReadTextFileRequest(path=f"{space.name}/latin1.txt"), headers=client.headers), Code.INVALID_ARGUMENT),
        (client.control.read_text_file(ReadTextFileRequest(path=space.name), headers=client.headers), Code.FAILED_PRECONDITION),
        (client.control.read_binary_file(ReadBinaryFileRequest(path=f"{space.name}/file.txt", offset=99), headers=client.headers), Code.OUT_OF_RANGE),
        (client.control.write_text_file(WriteTextFileRequest(path=space.name, content="x"), headers=client.headers), Code.FAILED_PRECONDITION),
    ]  # fmt: skip
    for pending, code in calls:
        with pytest.raises(ConnectError) as raised:
            await pending
        assert raised.value.code == code
        assert "Traceback" not in raised.value.message


async def test_text_file_roundtrip_is_atomic_and_keeps_mode(
    client: ExecDaemonClient, space: Path
) -> None:
    path = space / "sub" / "notes.md"
    written = await client.control.write_text_file(
        WriteTextFileRequest(path=f"{space.name}/sub/notes.md", content="héllo\n"),
        headers=client.headers,
    )
    assert written.bytes_written == len("héllo\n".encode())
    path.chmod(0o600)
    await client.control.write_text_file(
        WriteTextFileRequest(path=str(path), content="second\n"), headers=client.headers
    )
    assert path.stat().st_mode & 0o777 == 0o600
    read = await client.control.read_text_file(
        ReadTextFileRequest(path=str(path)), headers=client.headers
    )
    assert read.content == "second\n"


async def test_binary_upload_in_chunks_and_windowed_download(
    client: ExecDaemonClient, space: Path
) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    target = f"{space.name}/blob.bin"
    chunk = 1024 * 1024
    for start in range(0, len(data), chunk):
        response = await client.control.write_binary_file(
            WriteBinaryFileRequest(path=target, data=data[start : start + chunk], append=start > 0),
            headers=client.headers,
        )
        assert response.total_size == min(start + chunk, len(data))
    received = b""
    while True:
        window = await client.control.read_binary_file(
            ReadBinaryFileRequest(path=target, offset=len(received), length=chunk),
            headers=client.headers,
        )
        assert window.total_size == len(data)
        received += window.data
        if window.eof:
            break
    assert hashlib.sha256(received).digest() == hashlib.sha256(data).digest()
    whole = await client.control.read_binary_file(
        ReadBinaryFileRequest(path=target), headers=client.headers
    )
    assert whole.data == data and whole.eof
    replaced = await client.control.write_binary_file(
        WriteBinaryFileRequest(path=target, data=b"small"), headers=client.headers
    )
    assert replaced.total_size == 5 and (space / "blob.bin").read_bytes() == b"small"


# ---------------------------------------------------------------------------------------------
# GetDiff and GetWorkspaceChangesHash need the workspace to be a git repository: own daemon.


def git(workspace: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=workspace,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[RunningDaemon]:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    git(workspace, "init", "-q")
    (workspace / ".gitignore").write_text("*.log\n")
    (workspace / "tracked.txt").write_text("one\ntwo\n")
    (workspace / "keep.txt").write_text("same\n")
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "first")
    with running_daemon(workspace, tmp_path / "state") as running:
        yield running


async def test_get_diff_shows_changes_and_untracked_files_without_touching_the_index(
    repo: RunningDaemon,
) -> None:
    workspace = repo.workspace
    (workspace / "tracked.txt").write_text("one\nTWO\n")
    (workspace / "brand_new.py").write_text("print('new')\n")
    (workspace / "debug.log").write_text("ignored\n")
    index = workspace / ".git" / "index"
    index_before = index.read_bytes()
    async with repo.client() as client:
        response = await client.control.get_diff(GetDiffRequest(), headers=client.headers)
    diff = response.diff
    assert "diff --git a/tracked.txt b/tracked.txt" in diff and "-two\n+TWO\n" in diff
    assert "diff --git a/brand_new.py b/brand_new.py" in diff and "+print('new')" in diff
    assert "debug.log" not in diff
    assert index.read_bytes() == index_before
    assert "?? brand_new.py" in git(workspace, "status", "--porcelain")
    # The diff is one git can apply back onto the commit.
    git(workspace, "stash", "-u", "-q")
    subprocess.run(["git", "apply", "-"], input=diff.encode(), cwd=workspace, check=True)
    assert (workspace / "brand_new.py").read_text() == "print('new')\n"


async def test_get_diff_shows_untracked_files_whatever_their_names(repo: RunningDaemon) -> None:
    """Untracked files are added by name: names that read as pathspec magic or globs are
    still just those files (`[ab].txt` must not pull in the ignored `a.txt`)."""
    workspace = repo.workspace
    with (workspace / ".gitignore").open("a") as gitignore:
        gitignore.write("a.txt\n")
    names = ["[ab].txt", ":(exclude)x", ":!y", "*", "new dir/line\nbreak.txt", "-n"]
    for name in names:
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(f"content of {name}\n")
    (workspace / "a.txt").write_text("ignored\n")
    (workspace / "keep.txt").unlink()
    async with repo.client() as client:
        diff = (await client.control.get_diff(GetDiffRequest(), headers=client.headers)).diff
    for name in names:
        assert "+content of " + name.replace("\n", "\n+") in diff, name
    assert "ignored" not in diff
    assert "diff --git a/keep.txt b/keep.txt\ndeleted file" in diff
    assert "?? " not in git(workspace, "status", "--porcelain", "--", "keep.txt")


async def test_get_diff_summarises_huge_and_binary_untracked_files_and_shows_the_rest(
    repo: RunningDaemon,
) -> None:
    workspace = repo.workspace
    (workspace / "tracked.txt").write_text("one\nTWO\n")
    (workspace / "notes.md").write_text("# small and new\n")
    # 300 MB that git reads as text (its first 8000 bytes are), sparse: nothing on disk.
    with (workspace / "huge.log.txt").open("wb") as huge:
        huge.write(b"a line of output\n" * 500)
        huge.truncate(300 * 1024 * 1024)
    (workspace / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    async with repo.client() as client:
        response = await client.control.get_diff(GetDiffRequest(), headers=client.headers)
    omitted = {(f.path, f.size, f.reason) for f in response.omitted}
    assert omitted == {("huge.log.txt", 300 * 1024 * 1024, "too_large"), ("logo.png", 80, "binary")}
    diff = response.diff
    assert "-two\n+TWO\n" in diff and "+# small and new" in diff
    assert "a line of output" not in diff and "b/logo.png" not in diff
    assert "# not shown: huge.log.txt (untracked, 314572800 bytes, too_large)" in diff
    # Still a diff git applies (the summary lines are outside every patch).
    git(workspace, "stash", "-q")
    (workspace / "notes.md").unlink()
    subprocess.run(["git", "apply", "-"], input=diff.encode(), cwd=workspace, check=True)
    assert (workspace / "notes.md").read_text() == "# small and new\n"


async def test_get_diff_of_named_paths_only(repo: RunningDaemon) -> None:
    workspace = repo.workspace
    (workspace / "src").mkdir()
    (workspace / "src" / "new.py").write_text("x = 1\n")
    (workspace / "tracked.txt").write_text("changed\n")
    (workspace / "keep.txt").write_text("changed too\n")
    async with repo.client() as client:

        async def diff_of(*paths: str) -> str:
            request = GetDiffRequest(paths=list(paths))
            return (await client.control.get_diff(request, headers=client.headers)).diff

        only_src = await diff_of("src")
        assert "b/src/new.py" in only_src and "tracked.txt" not in only_src
        both = await diff_of(str(workspace / "tracked.txt"), "src/new.py")
        assert "b/tracked.txt" in both and "b/src/new.py" in both and "keep.txt" not in both
        assert "b/keep.txt" in await diff_of("keep.txt", "no-such-file")
        assert await diff_of("*.txt") == ""
        for outside in ("..", "../repo-other", "/etc/passwd", "src/../../x"):
            with pytest.raises(ConnectError) as raised:
                await diff_of(outside)
            assert raised.value.code == Code.INVALID_ARGUMENT
            assert "outside the workspace" in raised.value.message


async def test_get_diff_against_a_ref_and_bad_refs(repo: RunningDaemon) -> None:
    workspace = repo.workspace
    first = git(workspace, "rev-parse", "HEAD").strip()
    (workspace / "tracked.txt").write_text("one\ntwo\nthree\n")
    git(workspace, "commit", "-qam", "second")
    async with repo.client() as client:
        against_head = await client.control.get_diff(GetDiffRequest(), headers=client.headers)
        against_first = await client.control.get_diff(
            GetDiffRequest(ref=first), headers=client.headers
        )
        for bad in ("no-such-branch", "--output=/tmp/x"):
            with pytest.raises(ConnectError) as raised:
                await client.control.get_diff(GetDiffRequest(ref=bad), headers=client.headers)
            assert raised.value.code == Code.INVALID_ARGUMENT
    assert against_head.diff == ""
    assert "+three" in against_first.diff


async def test_get_diff_outside_a_repository(client: ExecDaemonClient) -> None:
    with pytest.raises(ConnectError) as raised:
        await client.control.get_diff(GetDiffRequest(), headers=client.headers)
    assert raised.value.code == Code.FAILED_PRECONDITION


async def test_workspace_changes_hash_follows_every_change(repo: RunningDaemon) -> None:
    workspace = repo.workspace
    async with repo.client() as client:

        async def current() -> str:
            response = await client.control.get_workspace_changes_hash(
                GetWorkspaceChangesHashRequest(), headers=client.headers
            )
            return response.hash

        clean = await current()
        assert clean and await current() == clean
        (workspace / "tracked.txt").write_text("one\nthree\n")
        modified = await current()
        assert modified != clean and await current() == modified
        # Same size, same second: only the content tells the two edits apart.
        (workspace / "tracked.txt").write_text("one\nfour!\n")
        assert await current() not in (clean, modified)
        (workspace / "tracked.txt").write_text("one\ntwo\n")
        assert await current() == clean
        (workspace / "debug.log").write_text("ignored\n")
        assert await current() == clean
        (workspace / "untracked.txt").write_text("u\n")
        with_untracked = await current()
        assert with_untracked != clean
        (workspace / "untracked.txt").write_text("v\n")
        assert await current() != with_untracked
        (workspace / "untracked.txt").unlink()
        (workspace / "keep.txt").unlink()
        assert await current() != clean


async def test_workspace_changes_hash_without_git(client: ExecDaemonClient, space: Path) -> None:
    first = await client.control.get_workspace_changes_hash(
        GetWorkspaceChangesHashRequest(), headers=client.headers
    )
    (space / "x.txt").write_text("x")
    second = await client.control.get_workspace_changes_hash(
        GetWorkspaceChangesHashRequest(), headers=client.headers
    )
    assert first.hash and second.hash != first.hash


async def test_a_text_file_larger_than_grpcs_default_limit_is_read_in_windows_over_grpc(
    daemon: RunningDaemon, space: Path
) -> None:
    # 5 MiB of 1-, 2-, 3- and 4-byte characters: windows of 1 MiB end inside some of them.
    line = "ascii é € 😀 " * 40 + "\n"
    text = line * (5 * 1024 * 1024 // len(line.encode()) + 1)
    (space / "big.txt").write_text(text)
    read_text = grpc_read_text(daemon)
    windows: list[ReadTextFileResponse] = []
    async with grpc.aio.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        call = read_text(channel)
        offset = 0
        while not windows or not windows[-1].eof:
            request = ReadTextFileRequest(path=f"{space.name}/big.txt", offset=offset, length=2**20)
            windows.append(await call(request, metadata=bearer(daemon)))
            offset = windows[-1].next_offset
        with pytest.raises(grpc.aio.AioRpcError) as whole:
            await call(ReadTextFileRequest(path=f"{space.name}/big.txt"), metadata=bearer(daemon))
    assert "".join(window.content for window in windows) == text
    assert len(windows) == 6 and {w.total_size for w in windows} == {len(text.encode())}
    # gRPC's own 4 MiB limit, named by the client: paging is the way around it.
    assert whole.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_text_windows_refuse_to_start_inside_a_character_and_name_the_size_limit(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "notes.txt").write_text("€" * 100_000)
    with running_daemon(workspace, tmp_path / "state", "--max-message-bytes", "131072") as small:
        async with small.client() as client:

            async def read(**fields: object) -> str:
                request = ReadTextFileRequest(path="notes.txt", **fields)  # type: ignore[arg-type]
                return (
                    await client.control.read_text_file(request, headers=client.headers)
                ).content

            assert await read(offset=3, length=7) == "€€"
            errors = {}
            for name, fields in {
                "inside": {"offset": 1, "length": 9},
                "short": {"length": 2},
                "whole": {},
            }.items():
                with pytest.raises(ConnectError) as raised:
                    await read(**fields)
                errors[name] = (raised.value.code, raised.value.message)
    assert errors["inside"] == (
        Code.INVALID_ARGUMENT,
        f"offset 1 is inside a UTF-8 character of {workspace / 'notes.txt'}",
    )
    assert (
        errors["short"][0] == Code.INVALID_ARGUMENT
        and "shorter than the character" in errors["short"][1]
    )
    assert errors["whole"] == (
        Code.RESOURCE_EXHAUSTED,
        f"{workspace / 'notes.txt'} has 300000 bytes from offset 0, more than one response carries "
        "(65536 bytes: --max-message-bytes less 64 KiB); read it in windows with offset and length",
    )  # fmt: skip


def bearer(daemon: RunningDaemon) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {daemon.token}")]


def grpc_read_text(daemon: RunningDaemon) -> Any:
    def bind(channel: grpc.aio.Channel) -> Any:
        return channel.unary_unary(
            "/agent.v1.ControlService/ReadTextFile",
            request_serializer=ReadTextFileRequest.SerializeToString,
            response_deserializer=ReadTextFileResponse.FromString,
        )

    return bind
