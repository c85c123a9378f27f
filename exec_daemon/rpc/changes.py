"""GetDiff and GetWorkspaceChangesHash: what changed in the workspace, from git.

GetDiff shows untracked files too: they are listed (`git ls-files --others`) and added with
`git add --intent-to-add` to a copy of the index (GIT_INDEX_FILE), so the user's index is never
written. An untracked file that is binary (a NUL in its first 8000 bytes, git's own test) or
larger than UNTRACKED_SHOWN_BYTES is left out and summarised instead (path, size, why), so one
300 MB log or build output does not cost the whole diff. The request may name paths: the diff
is then of those only.

GetWorkspaceChangesHash hashes `git status --porcelain=v2` (HEAD commit, every changed or
untracked non-ignored path with its mode and object ids) plus, per listed path, its lstat
(size, mtime, ctime, inode) and, for files up to CONTENT_HASH_BYTES, its content: so a second
edit of an already-modified file changes the hash even within one mtime tick. git answers from
its index's stat cache, so the cost is one lstat per tracked file plus a directory walk for
untracked ones, not reading the tree. GIT_OPTIONAL_LOCKS=0 keeps it from rewriting the index.
Outside a git repository the hash covers every file ripgrep lists (gitignore rules apply).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.git_run import EMPTY_TREE, run_git
from exec_daemon.kernel.state import Daemon

CONTENT_HASH_BYTES = 1024 * 1024
UNTRACKED_SHOWN_BYTES = 1024 * 1024
# git's own test for a binary file: a NUL byte in its first 8000 bytes.
BINARY_SNIFF_BYTES = 8000


@dataclass(frozen=True)
class OmittedFile:
    """An untracked file GetDiff leaves out: `reason` is "binary" or "too_large"."""

    path: str
    size: int
    reason: str


@dataclass(frozen=True)
class WorkspaceDiff:
    text: str
    omitted: tuple[OmittedFile, ...]


async def _git_dir_index(daemon: Daemon) -> Path | None:
    """The index file of the workspace's repository; None when it is not in one."""
    run = await run_git(daemon, "rev-parse", "--path-format=absolute", "--git-path", "index")
    if run.returncode != 0:
        return None
    return Path(run.stdout.decode().strip())


async def _resolve_base(daemon: Daemon, ref: str) -> str:
    if not ref:
        head = await run_git(daemon, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        return head.stdout.decode().strip() if head.returncode == 0 else EMPTY_TREE
    if ref.startswith("-"):
        raise CodedError(ErrorCode.INVALID_ARGUMENT, f"{ref!r} is not a git revision")
    run = await run_git(daemon, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if run.returncode != 0:
        raise CodedError(
            ErrorCode.INVALID_ARGUMENT, f"{ref!r} is not a commit of the workspace repository"
        )
    return run.stdout.decode().strip()


def diff_pathspecs(workspace: str, paths: Sequence[str]) -> list[str]:
    """git pathspecs for the paths a GetDiff names (all of the workspace when none), taken
    literally; a path outside the workspace is INVALID_ARGUMENT. git itself never follows a
    symbolic link inside a pathspec ("beyond a symbolic link"), so the spelling is checked."""
    if not paths:
        return ["."]
    roots = {os.path.normpath(workspace), os.path.realpath(workspace)}
    specs: list[str] = []
    for path in paths:
        if not path or "\x00" in path:
            raise CodedError(ErrorCode.INVALID_ARGUMENT, f"{path!r} is not a path")
        full = os.path.normpath(os.path.join(workspace, path))
        root = next((r for r in roots if full == r or full.startswith(r.rstrip("/") + "/")), None)
        if root is None:
            raise CodedError(
                ErrorCode.INVALID_ARGUMENT, f"{path!r} is outside the workspace {workspace}"
            )
        specs.append(":(literal)" + os.path.relpath(full, root))
    return specs


async def workspace_diff(
    daemon: Daemon, ref: str, max_bytes: int, paths: Sequence[str] = ()
) -> WorkspaceDiff:
    """The diff of the workspace (tracked and untracked files) against `ref` (empty = HEAD),
    of `paths` only when some are named; binary or large untracked files are only listed."""
    pathspecs = diff_pathspecs(daemon.workspace, paths)
    index = await _git_dir_index(daemon)
    if index is None:
        raise CodedError(ErrorCode.FAILED_PRECONDITION, "the workspace is not in a git repository")
    base = await _resolve_base(daemon, ref)
    with tempfile.TemporaryDirectory(prefix="exec-daemon-diff-") as scratch:
        temp_index = Path(scratch) / "index"
        if index.exists():
            # copy2 keeps the index's mtime: git trusts the stat data of entries older than
            # the index file, so a fresh mtime would hide a same-size edit made just before.
            await asyncio.to_thread(shutil.copy2, index, temp_index)
        omitted = await _intend_to_add_untracked(daemon, temp_index, pathspecs)
        run = await run_git(
            daemon,
            "diff",
            "--no-color",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            base,
            "--",
            *pathspecs,
            index_file=str(temp_index),
            max_output=max_bytes,
        )
    if run.returncode != 0:
        raise CodedError(ErrorCode.INTERNAL, f"git diff failed: {run.stderr[:500]}")
    text = run.stdout.decode("utf-8", "replace")
    # git apply skips lines outside a patch: the diff stays appliable with these in it.
    for file in omitted:
        text += f"# not shown: {file.path} (untracked, {file.size} bytes, {file.reason})\n"
    return WorkspaceDiff(text, omitted)


def _omission(workspace: str, name: bytes) -> OmittedFile | None:
    """Why the untracked file `name` (relative to the workspace) is left out of the diff, if it
    is: larger than UNTRACKED_SHOWN_BYTES, or binary. Blocking: file I/O."""
    path = os.path.join(os.fsencode(workspace), name)
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    shown = name.decode("utf-8", "replace")
    if info.st_size > UNTRACKED_SHOWN_BYTES:
        return OmittedFile(shown, info.st_size, "too_large")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        head = os.read(fd, BINARY_SNIFF_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return OmittedFile(shown, info.st_size, "binary") if b"\x00" in head else None


def _sort_untracked(workspace: str, names: list[bytes]) -> tuple[list[bytes], list[OmittedFile]]:
    shown: list[bytes] = []
    omitted: list[OmittedFile] = []
    for name in names:
        omission = _omission(workspace, name)
        if omission is None:
            shown.append(name)
        else:
            omitted.append(omission)
    return shown, omitted


async def _intend_to_add_untracked(
    daemon: Daemon, index: Path, pathspecs: Sequence[str]
) -> tuple[OmittedFile, ...]:
    """Marks the untracked, non-ignored files intent-to-add in `index`, so a diff shows them;
    answers those left out (binary or too large).

    Listed first, then added by name: `git add --all` would also refresh every tracked
    file's stat data, which the diff does again (about a third of GetDiff at 100k files)."""
    listed = await run_git(
        daemon,
        "ls-files",
        "-z",
        "--others",
        "--exclude-standard",
        "--",
        *pathspecs,
        index_file=str(index),
    )
    if listed.returncode != 0:
        raise CodedError(ErrorCode.INTERNAL, f"git ls-files failed: {listed.stderr[:500]}")
    listed_names = [name for name in listed.stdout.split(b"\x00") if name]
    untracked, omitted = await asyncio.to_thread(_sort_untracked, daemon.workspace, listed_names)
    if not untracked:
        return tuple(omitted)
    pathspec_file = index.with_name("untracked")
    # :(literal): a file named `*.py` is that file, not a glob.
    await asyncio.to_thread(
        pathspec_file.write_bytes, b"".join(b":(literal)" + name + b"\x00" for name in untracked)
    )
    added = await run_git(
        daemon,
        "add",
        "--intent-to-add",
        f"--pathspec-from-file={pathspec_file}",
        "--pathspec-file-nul",
        index_file=str(index),
    )
    if added.returncode != 0:
        raise CodedError(
            ErrorCode.INTERNAL, f"git add --intent-to-add failed: {added.stderr[:500]}"
        )
    return tuple(omitted)


def _path_fingerprint(root: str, relative: bytes) -> bytes:
    path = os.path.join(os.fsencode(root), relative)
    try:
        info = os.lstat(path)
    except OSError:
        return b"missing"
    stamp = f"{info.st_mode}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}:{info.st_ino}"
    if not (os.path.isfile(path) and info.st_size <= CONTENT_HASH_BYTES):
        return stamp.encode()
    try:
        with open(path, "rb") as file:
            return stamp.encode() + hashlib.sha256(file.read()).digest()
    except OSError:
        return stamp.encode()


def _status_paths(porcelain: bytes) -> list[bytes]:
    """The worktree paths named by `git status --porcelain=v2 -z` records."""
    paths: list[bytes] = []
    records = porcelain.split(b"\x00")
    index = 0
    while index < len(records):
        record = records[index]
        kind = record[:1]
        if kind == b"1":
            paths.append(record.split(b" ", 8)[8])
        elif kind == b"2":
            paths.append(record.split(b" ", 9)[9])
            index += 1  # the original path follows as its own record
        elif kind == b"u":
            paths.append(record.split(b" ", 10)[10])
        elif kind in (b"?", b"!"):
            paths.append(record[2:])
        index += 1
    return paths


def _hash_status(root: str, porcelain: bytes) -> str:
    digest = hashlib.sha256(b"git\x00")
    digest.update(porcelain)
    for path in _status_paths(porcelain):
        digest.update(b"\x00" + path + b"\x00" + _path_fingerprint(root, path))
    return digest.hexdigest()


async def _hash_without_git(daemon: Daemon) -> str:
    try:
        process = await asyncio.create_subprocess_exec(
            daemon.config.rg_path,
            "--no-config",
            "--files",
            "--hidden",
            "--null",
            "--glob",
            "!.git",
            cwd=daemon.workspace,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        raise CodedError(
            ErrorCode.UNAVAILABLE, "ripgrep cannot be started to list the files"
        ) from None
    stdout, _ = await process.communicate()
    names = sorted(name for name in stdout.split(b"\x00") if name)

    def digest() -> str:
        hashed = hashlib.sha256(b"files\x00")
        for name in names:
            hashed.update(name + b"\x00" + _path_fingerprint(daemon.workspace, name) + b"\x00")
        return hashed.hexdigest()

    return await asyncio.to_thread(digest)


async def workspace_changes_hash(daemon: Daemon) -> str:
    """Stable while nothing changes; different once any tracked or untracked file changes."""
    top = await run_git(daemon, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        return await _hash_without_git(daemon)
    run = await run_git(
        daemon,
        "status",
        "--porcelain=v2",
        "-z",
        "--branch",
        "--untracked-files=all",
        "--ignore-submodules=dirty",
        "--",
        ".",
    )
    if run.returncode != 0:
        raise CodedError(ErrorCode.INTERNAL, f"git status failed: {run.stderr[:500]}")
    # Status paths are relative to the repository's top directory.
    root = top.stdout.decode("utf-8", "surrogateescape").strip()
    return await asyncio.to_thread(_hash_status, root, run.stdout)
