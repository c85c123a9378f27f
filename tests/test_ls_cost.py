"""ls_tool_call costs what the listed folder holds, not what the repository holds (issue #17).

The handler runs in-process on a real tree; every directory the process opens with
os.scandir is recorded, so a listing that walks the rest of the tree (for ignore files, a
gitignore of the whole repository, a count) fails here however fast the machine is.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.v1.files_pb2 import LsArgs
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.context import CallContext
from exec_daemon.server import new_daemon
from tools import search

SIBLING_FOLDERS = 30
FILES_PER_SIBLING = 20


@pytest.fixture
def big_tree(tmp_path: Path) -> Path:
    """A git repository: `small/` (5 files, one subfolder) among many other folders."""
    workspace = tmp_path / "ws"
    for folder in range(SIBLING_FOLDERS):
        nested = workspace / "other" / f"d{folder:02d}" / "deeper"
        nested.mkdir(parents=True)
        for index in range(FILES_PER_SIBLING):
            (nested / f"f{index}.py").write_text("x = 1\n")
    (workspace / "small" / "sub").mkdir(parents=True)
    for index in range(5):
        (workspace / "small" / f"s{index}.txt").write_text("s\n")
    (workspace / "small" / "sub" / "inner.txt").write_text("i\n")
    (workspace / ".gitignore").write_text("*.log\nbuild/\n")
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    return workspace


@pytest.fixture
def scanned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every directory opened with os.scandir while the test runs."""
    opened: list[str] = []
    real_scandir = os.scandir

    def recording_scandir(path: str | os.PathLike[str] = ".") -> object:
        opened.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", recording_scandir)
    yield opened


async def listing(workspace: Path, path: str, ignore: tuple[str, ...] = ()) -> object:
    daemon = new_daemon(DaemonConfig(auth_token="t", workspace=workspace))
    result = await search.ls(LsArgs(path=path, ignore=list(ignore)), CallContext(daemon=daemon))
    assert result.WhichOneof("result") == "success", result
    return result.success


def _outside(folder: Path, opened: list[str]) -> list[str]:
    return [path for path in opened if not (path + "/").startswith(f"{folder}/")]


async def test_ls_of_a_small_folder_opens_only_that_folder_and_its_subfolders(
    big_tree: Path, scanned: list[str]
) -> None:
    success = await listing(big_tree, "small")
    assert (success.total_files, success.total_dirs) == (6, 1)  # type: ignore[attr-defined]
    assert sorted(scanned) == [str(big_tree / "small"), str(big_tree / "small" / "sub")]


async def test_cursorignore_and_ignore_globs_do_not_make_ls_walk_the_tree(
    big_tree: Path, scanned: list[str]
) -> None:
    (big_tree / ".cursorignore").write_text("small/s0.txt\nother/\n!keep.txt\n")
    success = await listing(big_tree, "small", ignore=("s1.txt",))
    names = sorted(file.name for file in success.root.children_files)  # type: ignore[attr-defined]
    assert names == ["s2.txt", "s3.txt", "s4.txt"]  # .cursorignore and the glob both apply
    assert _outside(big_tree / "small", scanned) == []


async def test_past_its_budget_ls_counts_reached_folders_and_descends_no_further(
    tmp_path: Path, scanned: list[str]
) -> None:
    per_folder = search.MAX_LS_ENTRIES * 2 // 3
    for name in ("a", "b", "c"):
        (tmp_path / name / "deeper" / "deepest").mkdir(parents=True)
        for index in range(per_folder):
            (tmp_path / name / f"f{index:04d}").touch()
    success = await listing(tmp_path, str(tmp_path))
    assert success.truncated  # type: ignore[attr-defined]
    # Read: the root, a/ and b/ (listed), c/ (counted), a/deeper and b/deeper (counted).
    expected = [tmp_path, *(tmp_path / path for path in ("a", "b", "c", "a/deeper", "b/deeper"))]
    assert sorted(scanned) == sorted(str(path) for path in expected)
