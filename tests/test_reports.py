"""tools/reports.py on the real daemon: bugfix reports in the artifacts folder, and AI
attribution from git plus the daemon's record of the agent's edits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from agent.v1 import agent_pb2 as agent
from agent.v1.files_pb2 import ApplyAgentDiffArgs, EditArgs
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon
from tools.reports import diff_lines_by_file


async def run(client: ExecDaemonClient, variant: str, args: Any) -> Any:
    call = ToolCall()
    getattr(call, variant).args.CopyFrom(args)
    outcome = await client.run(call, agent_id="agent-1")
    assert outcome.error is None, outcome.error
    assert outcome.result is not None
    return getattr(outcome.result, variant).result


def read_text(path: Path) -> str:
    return path.read_text()


def git(workspace: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=workspace,
        check=True,
        capture_output=True,
    )


def commit_files(workspace: Path, files: dict[str, str]) -> None:
    git(workspace, "init", "-q", "-b", "main")
    for name, content in files.items():
        (workspace / name).write_text(content)
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "base")


async def test_bugfix_results_become_a_json_report_in_the_artifacts_folder(
    client: ExecDaemonClient, daemon: RunningDaemon
) -> None:
    args = agent.ReportBugfixResultsArgs(
        tool_call_id="call-7",
        results=[
            agent.BugfixResult(
                bug_id="BUG-1", status="fixed", summary="off by one", files_changed=["a.py"]
            ),
            agent.BugfixResult(bug_id="BUG-2", status="not_reproduced"),
        ],
    )
    result = await run(client, "report_bugfix_results_tool_call", args)
    assert result.WhichOneof("result") == "success", result
    path = Path(result.success.report_path)
    assert path.parent == daemon.state_dir / "artifacts"
    assert result.success.result_count == 2
    report = json.loads(read_text(path))
    assert report["tool_call_id"] == "call-7"
    assert report["agent_id"] == "agent-1"
    assert report["results"][0] == {
        "bug_id": "BUG-1",
        "status": "fixed",
        "summary": "off by one",
        "files_changed": ["a.py"],
    }
    assert report["results"][1]["status"] == "not_reproduced"


async def test_bugfix_reports_with_bad_statuses_or_no_results_are_refused(
    client: ExecDaemonClient, daemon: RunningDaemon
) -> None:
    bad = agent.ReportBugfixResultsArgs(results=[agent.BugfixResult(bug_id="B", status="done")])
    result = await run(client, "report_bugfix_results_tool_call", bad)
    assert result.error.code == "invalid_argument"
    assert "fixed" in result.error.message
    empty = await run(client, "report_bugfix_results_tool_call", agent.ReportBugfixResultsArgs())
    assert empty.error.code == "invalid_argument"
    assert not (daemon.state_dir / "artifacts").exists() or not list(
        (daemon.state_dir / "artifacts").iterdir()
    )


def by_path(result: Any) -> dict[str, tuple[int, int, int, int]]:
    return {
        item.path: (
            item.ai_lines_added,
            item.ai_lines_removed,
            item.total_lines_added,
            item.total_lines_removed,
        )
        for item in result.success.files
    }


async def test_attribution_counts_only_the_lines_the_agents_edit_tools_wrote(
    client: ExecDaemonClient, workspace: Path
) -> None:
    commit_files(workspace, {"app.py": "a = 1\nb = 2\nc = 3\n", "notes.txt": "one\ntwo\n"})
    # The agent: replaces a line in app.py, writes a new file, applies a diff to notes.txt.
    edit = EditArgs(path="app.py", old_string="b = 2\n", new_string="b = 20\nb2 = 21\n")
    assert (await run(client, "edit_tool_call", edit)).WhichOneof("result") == "success"
    write = EditArgs(path="new.py", contents="x = 1\ny = 2\n")
    assert (await run(client, "edit_tool_call", write)).WhichOneof("result") == "success"
    diff = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
    applied = await run(client, "apply_agent_diff_tool_call", ApplyAgentDiffArgs(diff=diff))
    assert applied.WhichOneof("result") == "success", applied
    # A person (or the agent's shell): appends to app.py, creates a file.
    with (workspace / "app.py").open("a") as file:
        file.write("d = 4\n")
    (workspace / "manual.txt").write_text("by hand\n")

    result = await run(client, "ai_attribution_tool_call", agent.AiAttributionArgs())
    assert result.WhichOneof("result") == "success", result
    assert result.success.ai_edits_recorded
    assert by_path(result) == {
        "app.py": (2, 1, 3, 1),
        "new.py": (2, 0, 2, 0),
        "notes.txt": (1, 1, 1, 1),
        "manual.txt": (0, 0, 1, 0),
    }
    only = await run(client, "ai_attribution_tool_call", agent.AiAttributionArgs(paths=["app.py"]))
    assert list(by_path(only)) == ["app.py"]


async def test_without_a_record_of_agent_edits_nothing_is_attributed_and_it_says_so(
    client: ExecDaemonClient, workspace: Path
) -> None:
    commit_files(workspace, {"app.py": "a = 1\n"})
    (workspace / "app.py").write_text("a = 2\n")
    result = await run(client, "ai_attribution_tool_call", agent.AiAttributionArgs())
    assert not result.success.ai_edits_recorded
    assert "no record" in result.success.note
    assert by_path(result) == {"app.py": (0, 0, 1, 1)}


async def test_attribution_outside_a_git_repository_is_a_typed_error(
    client: ExecDaemonClient,
) -> None:
    result = await run(client, "ai_attribution_tool_call", agent.AiAttributionArgs())
    assert result.error.code == "failed_precondition"


def test_git_diffs_are_read_by_their_hunk_counts() -> None:
    diff = (
        "diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n"
        "@@ -1 +1 @@\n--- old comment\n+++ new comment\n"
    )
    assert diff_lines_by_file(diff, trust_counts=True) == {
        "q.sql": (["++ new comment"], ["-- old comment"])
    }


async def test_attribution_in_a_workspace_below_the_repository_root(
    client: ExecDaemonClient, workspace: Path
) -> None:
    repo = workspace.parent
    (repo / "outside.txt").write_text("outside\n")
    (workspace / "inside.py").write_text("a = 1\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "outside.txt", "workspace/inside.py")
    git(repo, "commit", "-q", "-m", "base")
    (repo / "outside.txt").write_text("changed outside\n")
    edit = EditArgs(path="inside.py", old_string="a = 1\n", new_string="a = 2\n")
    assert (await run(client, "edit_tool_call", edit)).WhichOneof("result") == "success"
    write = EditArgs(path="sub/new.py", contents="b = 1\n")
    assert (await run(client, "edit_tool_call", write)).WhichOneof("result") == "success"
    result = await run(client, "ai_attribution_tool_call", agent.AiAttributionArgs())
    assert by_path(result) == {"inside.py": (1, 1, 1, 1), "sub/new.py": (1, 0, 1, 0)}
