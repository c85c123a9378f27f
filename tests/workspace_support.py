"""Helpers for the workspace tool tests: ToolCall builders and running one call on the daemon."""

from __future__ import annotations

import contextlib
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.v1 import files_pb2 as files
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon


def make_space(daemon: RunningDaemon, request: pytest.FixtureRequest) -> Path:
    """A fresh directory of the shared daemon's workspace for one test."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:80]
    path = daemon.workspace / name
    path.mkdir()
    return path


def read_call(path: str | Path, offset: int | None = None, limit: int | None = None) -> ToolCall:
    args = files.ReadToolArgs(path=str(path))
    if offset is not None:
        args.offset = offset
    if limit is not None:
        args.limit = limit
    return ToolCall(read_tool_call=files.ReadToolCall(args=args))


def write_call(path: str | Path, contents: str) -> ToolCall:
    return ToolCall(
        edit_tool_call=files.EditToolCall(args=files.EditArgs(path=str(path), contents=contents))
    )


def replace_call(
    path: str | Path, old: str, new: str, replace_all: bool = False, **extra: Any
) -> ToolCall:
    args = files.EditArgs(
        path=str(path), old_string=old, new_string=new, replace_all=replace_all, **extra
    )
    return ToolCall(edit_tool_call=files.EditToolCall(args=args))


def delete_call(path: str | Path) -> ToolCall:
    return ToolCall(delete_tool_call=files.DeleteToolCall(args=files.DeleteArgs(path=str(path))))


def grep_call(pattern: str, **fields: Any) -> ToolCall:
    args = files.GrepArgs(pattern=pattern, **fields)
    return ToolCall(grep_tool_call=files.GrepToolCall(args=args))


def glob_call(pattern: str, target: str | Path = "") -> ToolCall:
    args = files.GlobToolArgs(glob_pattern=pattern, target_directory=str(target))
    return ToolCall(glob_tool_call=files.GlobToolCall(args=args))


def ls_call(path: str | Path, ignore: list[str] | None = None) -> ToolCall:
    args = files.LsArgs(path=str(path), ignore=ignore or [])
    return ToolCall(ls_tool_call=files.LsToolCall(args=args))


def diff_call(diff: str, base: str | Path = "") -> ToolCall:
    args = files.ApplyAgentDiffArgs(diff=diff, base_directory=str(base))
    return ToolCall(apply_agent_diff_tool_call=files.ApplyAgentDiffToolCall(args=args))


async def result_of(client: ExecDaemonClient, call: ToolCall) -> Any:
    """Runs the call and returns its result message (e.g. a ReadToolResult)."""
    outcome = await client.run(call)
    assert outcome.error is None, outcome.error
    assert outcome.result is not None
    variant = outcome.result.WhichOneof("tool")
    assert variant is not None
    return getattr(outcome.result, variant).result


def case(result: Any) -> str:
    kind = result.WhichOneof("result")
    assert kind is not None
    return str(kind)


@contextlib.contextmanager
def tiny_disk_in(folder: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs at `folder/tiny`, to fill: writes there fail with ENOSPC."""
    mount_point = folder / "tiny"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
