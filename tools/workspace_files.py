"""The files under a directory that the agent may see, listed by ripgrep (.gitignore, .ignore
and .cursorignore apply; hidden files are included, .git is not). Used by read_lints and
sem_search."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.runner import HelperFailed, start_helper
from exec_daemon.kernel.state import Daemon
from tools.workspace import CursorIgnore, relative_to_workspace

READ_BYTES = 1 << 20


async def list_files(
    daemon: Daemon, directory: Path, limit: int, time_limit: float, *, depth: int | None = None
) -> tuple[list[str], bool]:
    """(absolute paths of up to `limit` files under `directory`, sorted; whether there were
    more); `depth` 1: the files directly in it."""
    relative = relative_to_workspace(daemon.workspace, directory)
    ignore = daemon.service(CursorIgnore).rg_args() if relative is not None else []
    # rg matches .cursorignore's patterns against the paths it walks, relative to its cwd: run
    # it in the workspace on a relative path.
    cwd = daemon.workspace if relative is not None else str(directory)
    command = [
        daemon.config.rg_path, "--no-config", *ignore, "--files", "--hidden", "--null",
        "--glob", "!.git", *(() if depth is None else ("--max-depth", str(depth))),
        "--", relative or ".",
    ]  # fmt: skip
    try:
        rg = await start_helper(
            command, env=daemon.env.snapshot(), cwd=cwd, stdout=asyncio.subprocess.PIPE
        )
    except HelperFailed:
        raise CodedError(
            ErrorCode.UNAVAILABLE, f"ripgrep cannot be started (--rg-path {daemon.config.rg_path})"
        ) from None
    assert rg.process.stdout is not None
    names: list[bytes] = []
    pending = b""
    try:
        async with asyncio.timeout(time_limit):
            while len(names) <= limit and (chunk := await rg.process.stdout.read(READ_BYTES)):
                *complete, pending = (pending + chunk).split(b"\0")
                names += complete
            if len(names) <= limit:
                await rg.wait()
    except TimeoutError:
        raise CodedError(
            ErrorCode.TIMEOUT,
            f"listing the files under {directory} took longer than {time_limit:.0f} s",
        ) from None
    finally:
        await rg.stop(grace=0)
    # Off the event loop: a large workspace's names take tenths of a second to decode and sort.
    paths = await asyncio.to_thread(_absolute_sorted, cwd, names)
    return paths[:limit], len(paths) > limit


def _absolute_sorted(cwd: str, names: list[bytes]) -> list[str]:
    # rg prints "./name" for the "." argument.
    return sorted(f"{cwd}/{os.fsdecode(name.removeprefix(b'./'))}" for name in names)
