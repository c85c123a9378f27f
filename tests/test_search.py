"""grep_tool_call (real ripgrep), glob_tool_call and ls_tool_call on the real daemon."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon, running_daemon
from tests.shared_daemon import *  # noqa: F403 (the daemon, space and client fixtures)
from tests.workspace_support import (
    case,
    glob_call,
    grep_call,
    ls_call,
    result_of,
)
from tools import search


def tree(root: Path, files: dict[str, str]) -> None:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def git_init(path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(path)], check=True)


# ---------------------------------------------------------------------------------------------
# Grep


async def test_grep_content_with_line_numbers_and_context(
    client: ExecDaemonClient, space: Path
) -> None:
    tree(space, {"a.py": "one\nneedle here\nthree\nfour\n", "b/c.py": "needle\n"})
    result = await result_of(client, grep_call("needle", path=space.name, context=1))
    success = result.success
    assert success.output_mode == "content"
    by_file = {
        m.file: [(ln.line_number, ln.content, ln.is_context) for ln in m.lines]
        for m in success.matches
    }
    assert by_file == {
        f"{space.name}/a.py": [(1, "one", True), (2, "needle here", False), (3, "three", True)],
        f"{space.name}/b/c.py": [(1, "needle", False)],
    }
    assert (success.total_matches, success.total_files) == (2, 2)
    assert [m.file for m in success.matches] == sorted(m.file for m in success.matches)


async def test_grep_before_after_context_and_case(client: ExecDaemonClient, space: Path) -> None:
    tree(space, {"t.txt": "1\n2\nNeedle\n4\n5\n"})
    before = await result_of(client, grep_call("Needle", path=space.name, context_before=2))
    assert [ln.content for ln in before.success.matches[0].lines] == ["1", "2", "Needle"]
    after = await result_of(client, grep_call("Needle", path=space.name, context_after=1))
    assert [ln.content for ln in after.success.matches[0].lines] == ["Needle", "4"]
    sensitive = await result_of(client, grep_call("needle", path=space.name))
    assert not sensitive.success.matches and sensitive.success.total_matches == 0
    insensitive = await result_of(
        client, grep_call("needle", path=space.name, case_insensitive=True)
    )
    assert insensitive.success.total_matches == 1


async def test_grep_type_glob_and_multiline(client: ExecDaemonClient, space: Path) -> None:
    tree(
        space,
        {"m.py": "def f(\n    x):\n", "m.js": "def f(\n", "notes.md": "def f(\n"},
    )
    by_type = await result_of(
        client, grep_call("def", path=space.name, type="py", output_mode="files_with_matches")
    )
    assert list(by_type.success.files) == [f"{space.name}/m.py"]
    by_glob = await result_of(
        client, grep_call("def", path=space.name, glob="*.md", output_mode="files_with_matches")
    )
    assert list(by_glob.success.files) == [f"{space.name}/notes.md"]
    single_line = await result_of(client, grep_call(r"f\(\s+x", path=space.name))
    assert single_line.success.total_matches == 0
    multi = await result_of(client, grep_call(r"f\(\s+x", path=space.name, multiline=True))
    assert multi.success.matches[0].lines[0].content == "def f(\n    x):"


async def test_grep_files_and_count_modes(client: ExecDaemonClient, space: Path) -> None:
    tree(space, {"x.txt": "hit\nhit\nmiss\n", "y.txt": "hit\n", "z.txt": "none\n"})
    listed = await result_of(
        client, grep_call("hit", path=space.name, output_mode="files_with_matches")
    )
    assert list(listed.success.files) == [f"{space.name}/x.txt", f"{space.name}/y.txt"]
    assert listed.success.total_files == 2
    counted = await result_of(client, grep_call("hit", path=space.name, output_mode="count"))
    assert [(c.file, c.count) for c in counted.success.counts] == [
        (f"{space.name}/x.txt", 2),
        (f"{space.name}/y.txt", 1),
    ]
    assert counted.success.total_matches == 3


async def test_grep_head_limit_and_offset_page_through_sorted_results(
    client: ExecDaemonClient, space: Path
) -> None:
    tree(space, {f"f{i:02d}.txt": "hit\nhit\n" for i in range(30)})
    everything = await result_of(client, grep_call("hit", path=space.name, head_limit=1000))
    all_lines = [(m.file, ln.line_number) for m in everything.success.matches for ln in m.lines]
    assert len(all_lines) == 60 and all_lines == sorted(all_lines)
    pages = []
    for offset in range(0, 60, 7):
        page = await result_of(
            client, grep_call("hit", path=space.name, head_limit=7, offset=offset)
        )
        pages += [(m.file, ln.line_number) for m in page.success.matches for ln in m.lines]
        assert page.success.truncated == (offset + 7 < 60)
        assert page.success.total_matches == 60
    assert pages == all_lines
    files_page = await result_of(
        client,
        grep_call("hit", path=space.name, output_mode="files_with_matches", head_limit=5, offset=5),
    )
    assert list(files_page.success.files) == [f"{space.name}/f{i:02d}.txt" for i in range(5, 10)]


async def test_grep_sort_by_modification_time(client: ExecDaemonClient, space: Path) -> None:
    tree(space, {"old.txt": "hit\n", "new.txt": "hit\n", "mid.txt": "hit\n"})
    for age, name in enumerate(["new.txt", "mid.txt", "old.txt"]):
        stamp = 1_700_000_000 - age * 1000
        os.utime(space / name, (stamp, stamp))
    newest = await result_of(
        client, grep_call("hit", path=space.name, sort="modified", output_mode="files_with_matches")
    )
    assert [Path(f).name for f in newest.success.files] == ["new.txt", "mid.txt", "old.txt"]
    oldest = await result_of(
        client,
        grep_call("hit", path=space.name, sort="modified", sort_ascending=True),
    )
    assert [Path(m.file).name for m in oldest.success.matches] == ["old.txt", "mid.txt", "new.txt"]


async def test_grep_respects_gitignore_and_skips_dot_git(
    client: ExecDaemonClient, space: Path
) -> None:
    git_init(space)
    tree(space, {".gitignore": "build/\n", "build/out.txt": "hit\n", "src.txt": "hit\n"})
    (space / ".git" / "hit.txt").write_text("hit\n")
    tree(space, {".hidden/conf.txt": "hit\n"})
    result = await result_of(
        client, grep_call("hit", path=space.name, output_mode="files_with_matches")
    )
    assert sorted(result.success.files) == [
        f"{space.name}/.hidden/conf.txt",
        f"{space.name}/src.txt",
    ]


async def test_grep_typed_failures(client: ExecDaemonClient, space: Path) -> None:
    tree(space, {"a.txt": "x\n"})
    bad = await result_of(client, grep_call("(unclosed", path=space.name))
    assert case(bad) == "invalid_pattern", bad
    assert "unclosed group" in bad.invalid_pattern.reason
    lookaround = await result_of(client, grep_call("a(?=b)", path=space.name))
    assert case(lookaround) == "invalid_pattern", lookaround
    unknown_type = await result_of(client, grep_call("x", path=space.name, type="nosuchtype"))
    assert case(unknown_type) == "error" and unknown_type.error.code == "invalid_argument"
    missing = await result_of(client, grep_call("x", path=f"{space.name}/nope"))
    assert case(missing) == "file_not_found"
    mode = await result_of(client, grep_call("x", output_mode="lines"))
    assert case(mode) == "error"


async def test_grep_pattern_starting_with_a_dash_and_a_single_file(
    client: ExecDaemonClient, space: Path
) -> None:
    tree(space, {"flags.txt": "--verbose\n-v\n"})
    result = await result_of(client, grep_call("--verbose", path=f"{space.name}/flags.txt"))
    assert result.success.matches[0].file == f"{space.name}/flags.txt"
    assert result.success.matches[0].lines[0].content == "--verbose"


async def test_grep_outside_the_workspace_shows_absolute_paths(
    client: ExecDaemonClient, tmp_path: Path
) -> None:
    (tmp_path / "out.txt").write_text("far away\n")
    result = await result_of(client, grep_call("far", path=str(tmp_path)))
    assert result.success.matches[0].file == str(tmp_path / "out.txt")


async def test_grep_cuts_long_lines_and_bounds_output(
    client: ExecDaemonClient, space: Path
) -> None:
    tree(space, {"wide.txt": "hit" + "x" * 10_000 + "\n", "many.txt": "hit\n" * 3000})
    wide = await result_of(client, grep_call("hit", path=f"{space.name}/wide.txt"))
    content = wide.success.matches[0].lines[0].content
    assert len(content) < 2100 and "[line cut:" in content
    many = await result_of(client, grep_call("hit", path=f"{space.name}/many.txt"))
    assert len(many.success.matches[0].lines) == search.DEFAULT_GREP_ENTRIES["content"]
    assert many.success.truncated and many.success.total_matches == 3000


# ---------------------------------------------------------------------------------------------
# Glob


async def test_glob_prepends_double_star_and_lists_newest_first(
    client: ExecDaemonClient, space: Path
) -> None:
    tree(space, {"top.py": "", "a/mid.py": "", "a/b/deep.py": "", "a/readme.md": ""})
    for age, name in enumerate(["a/b/deep.py", "top.py", "a/mid.py"]):
        stamp = 1_700_000_000 - age * 100
        os.utime(space / name, (stamp, stamp))
    result = await result_of(client, glob_call("*.py", space.name))
    assert list(result.success.files) == [
        f"{space.name}/a/b/deep.py",
        f"{space.name}/top.py",
        f"{space.name}/a/mid.py",
    ]
    assert result.success.total_files == 3 and not result.success.truncated
    nested = await result_of(client, glob_call("b/*.py", space.name))
    assert list(nested.success.files) == [f"{space.name}/a/b/deep.py"]


async def test_glob_anchored_absolute_and_gitignore(client: ExecDaemonClient, space: Path) -> None:
    git_init(space)
    tree(space, {"x.py": "", "sub/x.py": "", ".gitignore": "ignored/\n", "ignored/x.py": ""})
    anchored = await result_of(client, glob_call("/x.py", space.name))
    assert list(anchored.success.files) == [f"{space.name}/x.py"]
    absolute = await result_of(client, glob_call(f"{space}/sub/*.py"))
    assert list(absolute.success.files) == [f"{space.name}/sub/x.py"]
    everything = await result_of(client, glob_call("**/*.py", space.name))
    assert sorted(everything.success.files) == [f"{space.name}/sub/x.py", f"{space.name}/x.py"]


async def test_glob_and_grep_globs_do_not_reveal_gitignored_files(
    client: ExecDaemonClient, space: Path
) -> None:
    git_init(space)
    tree(space, {".gitignore": "*.log\nbuild/\n", "a.log": "hit\n", "build/b.txt": "hit\n"})
    tree(space, {"keep.txt": "hit\n"})
    logs = await result_of(client, glob_call("*.log", space.name))
    assert list(logs.success.files) == []
    built = await result_of(client, glob_call("build/*", space.name))
    assert list(built.success.files) == []
    grep_logs = await result_of(
        client, grep_call("hit", path=space.name, glob="*.log", output_mode="count")
    )
    assert list(grep_logs.success.counts) == []
    grep_txt = await result_of(
        client, grep_call("hit", path=space.name, glob="*.txt", output_mode="files_with_matches")
    )
    assert list(grep_txt.success.files) == [f"{space.name}/keep.txt"]


async def test_invalid_globs_are_typed_errors(client: ExecDaemonClient, space: Path) -> None:
    tree(space, {"a.txt": "hit\n"})
    glob_result = await result_of(client, glob_call("src/[", space.name))
    assert case(glob_result) == "error" and "invalid glob" in glob_result.error.message
    grep_result = await result_of(client, grep_call("hit", path=space.name, glob="{a,b"))
    assert case(grep_result) == "error" and "invalid glob" in grep_result.error.message


async def test_glob_bounds_its_result(client: ExecDaemonClient, space: Path) -> None:
    for index in range(search.MAX_GLOB_FILES + 5):
        (space / f"f{index}.txt").touch()
    result = await result_of(client, glob_call("*.txt", space.name))
    assert len(result.success.files) == search.MAX_GLOB_FILES
    assert result.success.truncated and result.success.total_files == search.MAX_GLOB_FILES + 5


async def test_glob_failures(client: ExecDaemonClient, space: Path) -> None:
    missing = await result_of(client, glob_call("*.py", f"{space.name}/nope"))
    assert case(missing) == "file_not_found"
    (space / "file.txt").touch()
    not_dir = await result_of(client, glob_call("*.py", f"{space.name}/file.txt"))
    assert case(not_dir) == "error" and not_dir.error.code == "not_a_directory"
    empty = await result_of(client, glob_call(""))
    assert case(empty) == "error"


# ---------------------------------------------------------------------------------------------
# Ls


def _tree_names(node: object) -> dict[str, object]:
    files = {f.name: None for f in node.children_files}  # type: ignore[attr-defined]
    dirs = {Path(d.abs_path).name: _tree_names(d) for d in node.children_dirs}  # type: ignore[attr-defined]
    return {**files, **dirs}


async def test_ls_returns_a_tree_with_sizes(client: ExecDaemonClient, space: Path) -> None:
    tree(space, {"a.txt": "12345", "src/main.py": "", "src/pkg/mod.py": ""})
    (space / ".git").mkdir()
    (space / "link").symlink_to("a.txt")
    result = await result_of(client, ls_call(space.name))
    success = result.success
    assert success.root.abs_path == str(space)
    assert _tree_names(success.root) == {
        "a.txt": None,
        "link": None,
        "src": {"main.py": None, "pkg": {"mod.py": None}},
    }
    files = {f.name: f for f in success.root.children_files}
    assert files["a.txt"].size == 5 and files["link"].is_symlink
    assert (success.total_files, success.total_dirs) == (4, 2)


async def test_ls_ignore_globs(client: ExecDaemonClient, space: Path) -> None:
    tree(space, {"keep.py": "", "node_modules/x/y.js": "", "debug.log": "", "src/trace.log": ""})
    result = await result_of(client, ls_call(space, ignore=["node_modules", "*.log"]))
    assert _tree_names(result.success.root) == {"keep.py": None, "src": {}}


async def test_ls_is_bounded_and_says_what_it_left_out(
    client: ExecDaemonClient, space: Path
) -> None:
    for index in range(search.MAX_LS_ENTRIES + 10):
        (space / f"f{index:04d}").touch()
    (space / "zdir").mkdir()
    for index in range(5):
        (space / "zdir" / f"{index}").touch()
    result = await result_of(client, ls_call(space))
    success = result.success
    assert success.truncated
    shown = len(success.root.children_files) + len(success.root.children_dirs)
    assert shown == search.MAX_LS_ENTRIES
    assert success.root.omitted_entries == 11


async def test_ls_failures(client: ExecDaemonClient, space: Path) -> None:
    assert case(await result_of(client, ls_call(space / "missing"))) == "file_not_found"
    (space / "f").touch()
    assert case(await result_of(client, ls_call(space / "f"))) == "error"


async def test_a_missing_ripgrep_is_an_exec_error(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with running_daemon(workspace, tmp_path / "state", "--rg-path", "/nonexistent/rg") as daemon:
        async with daemon.client() as client:
            outcome = await client.run(grep_call("x"))
            assert outcome.error is not None and outcome.error.code == "unavailable"
            assert "ripgrep" in outcome.error.message
            listed = await client.run(glob_call("*"))
            assert listed.error is not None and listed.error.code == "unavailable"


def _rg_children(pid: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat_line = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        command, rest = stat_line[stat_line.index("(") + 1 :].split(") ", 1)
        if command == "rg" and int(rest.split()[1]) == pid:
            children.append(int(entry))
    return children


async def test_aborting_a_grep_kills_ripgrep(daemon: RunningDaemon) -> None:
    async with daemon.client() as client, client.exec_stream() as stream:
        call = await stream.start(grep_call("[a-z]+[0-9]{3}zz", path="/usr", multiline=True))
        deadline = asyncio.get_running_loop().time() + 5
        while not _rg_children(daemon.process.pid):
            assert asyncio.get_running_loop().time() < deadline, "rg never started"
            await asyncio.sleep(0.02)
        await stream.abort(call.id)
        outcome = await call.wait()
    assert outcome.result is not None
    assert outcome.result.grep_tool_call.result.WhichOneof("result") == "aborted"
    for _ in range(100):
        if not _rg_children(daemon.process.pid):
            break
        await asyncio.sleep(0.02)
    assert not _rg_children(daemon.process.pid)
