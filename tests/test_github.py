"""On the real daemon: RefreshGithubAccessToken (exec_daemon/rpc/github_token.py) reaches new
processes and git's credentials; pr_management (tools/github.py) runs `gh` (a stand-in script
here: GitHub itself cannot be reached) or answers `unavailable` naming what is missing."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from agent.v1.agent_pb2 import PrAction, PrManagementArgs
from agent.v1.control_pb2 import (
    RefreshGithubAccessTokenRequest,
    UpdateEnvironmentVariablesRequest,
)
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tests import shell_calls
from tests.daemon_process import RunningDaemon, running_daemon

TOKEN = "ghs_" + "A1b2C3d4" * 5
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"

FAKE_GH = r"""#!/usr/bin/env python3
# Stands in for the GitHub CLI: records each call, answers like gh does.
import json, os, subprocess, sys
args = sys.argv[1:]
with open(LOG_PATH, "a") as log:
    env = {name: value for name, value in os.environ.items() if name.startswith(("GIT_", "LD_"))}
    token = os.environ.get("GH_TOKEN", "")
    log.write(json.dumps({"args": args, "token": token, "env": env}) + "\n")
if os.path.isdir(".git"):  # gh asks git about the repository, as the real one does
    subprocess.run(["git", "status", "--porcelain"], check=True, stdout=subprocess.DEVNULL)
url = "https://github.com/octo/repo/pull/42"
if args[:2] == ["auth", "token"]:
    sys.exit(1)
if args[:2] == ["pr", "create"]:
    print("Creating pull request for feature into main\n" + url)
elif args[:2] == ["pr", "view"]:
    if "404" in args:
        print("GraphQL: Could not resolve to a PullRequest with the number of 404.", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"number": 42, "url": url, "state": "OPEN", "title": "Fix the parser",
                      "isDraft": True, "headRefName": "feature", "baseRefName": "main"}))
elif args[:2] == ["pr", "comment"]:
    print(url + "#issuecomment-7")
elif args[:2] == ["pr", "edit"]:
    print(url)
"""


async def shell(client: ExecDaemonClient, command: str, agent_id: str) -> str:
    result = await shell_calls.shell(client, command, agent_id)
    assert result.WhichOneof("result") == "success", result
    return str(result.success.stdout)


async def refresh(client: ExecDaemonClient, token: str) -> Any:
    return await client.control.refresh_github_access_token(
        RefreshGithubAccessTokenRequest(access_token=token), headers=client.headers
    )


async def pr(client: ExecDaemonClient, **args: Any) -> Any:
    call = ToolCall()
    call.pr_management_tool_call.args.CopyFrom(PrManagementArgs(**args))
    outcome = await client.run(call)
    assert outcome.error is None, outcome.error
    assert outcome.result is not None
    return outcome.result.pr_management_tool_call.result


async def test_a_refreshed_token_reaches_new_processes_and_git_for_github_only(
    client: ExecDaemonClient, daemon: RunningDaemon
) -> None:
    response = await refresh(client, TOKEN)
    assert response.updated
    assert (await shell(client, 'echo "$GH_TOKEN $GITHUB_TOKEN"', "a1")).split() == [TOKEN, TOKEN]
    fill = (
        "printf 'protocol=https\\nhost=github.com\\npath=octo/repo.git\\n\\n' | git credential fill"
    )
    credentials = await shell(client, fill + "; echo count=$GIT_CONFIG_COUNT", "a1")
    assert f"password={TOKEN}" in credentials.splitlines()
    [first_count] = [line for line in credentials.splitlines() if line.startswith("count=")]
    assert "username=x-access-token" in credentials.splitlines()
    # Another host gets nothing from the helper (git then fails: prompts are off).
    other = "printf 'protocol=https\\nhost=gitlab.com\\n\\n' | git credential fill 2>&1; echo rc=$?"
    assert TOKEN not in await shell(client, other, "a1")

    await refresh(client, TOKEN + "x")
    again = await shell(client, fill + "; echo count=$GIT_CONFIG_COUNT", "a2")
    assert f"password={TOKEN}x" in again.splitlines()
    # The helper's two entries beside the agent shells' git settings, as many as before.
    assert first_count in again.splitlines(), "a refresh replaces the helper, never stacks it"
    assert TOKEN not in daemon.log(), "the token is never logged"


async def test_an_empty_token_is_refused(client: ExecDaemonClient) -> None:
    with pytest.raises(ConnectError) as refused:
        await refresh(client, "  ")
    assert refused.value.code == Code.INVALID_ARGUMENT


async def test_with_secret_redaction_the_token_never_shows_in_tool_output(
    workspace: Path, tmp_path: Path
) -> None:
    with running_daemon(workspace, tmp_path / "state", "--secret-redaction-enabled") as running:
        async with running.client() as client:
            await refresh(client, TOKEN)
            output = await shell(client, 'echo "token: $GH_TOKEN"', "a1")
    assert TOKEN not in output
    assert "[REDACTED]" in output


@pytest.fixture
def fake_gh(tmp_path: Path) -> tuple[Path, Path]:
    """A directory holding the stand-in `gh`, and the log of its calls."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    log = tmp_path / "gh-calls.jsonl"
    gh.write_text(FAKE_GH.replace("LOG_PATH", repr(str(log))))
    gh.chmod(gh.stat().st_mode | stat.S_IEXEC)
    return bin_dir, log


def gh_calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.skipif(shutil.which("gh", path=SYSTEM_PATH) is not None, reason="gh is installed")
async def test_without_gh_pr_management_is_unavailable(workspace: Path, tmp_path: Path) -> None:
    env = {"PATH": SYSTEM_PATH}
    with running_daemon(workspace, tmp_path / "state", env=env) as running:
        async with running.client() as client:
            await refresh(client, TOKEN)
            result = await pr(client, action=PrAction.PR_ACTION_VIEW)
    assert result.error.code == "unavailable"
    assert "gh" in result.error.message and "not installed" in result.error.message


async def test_without_a_token_pr_management_is_unavailable(
    workspace: Path, tmp_path: Path, fake_gh: tuple[Path, Path]
) -> None:
    bin_dir, log = fake_gh
    env = {"PATH": f"{bin_dir}:{SYSTEM_PATH}", "GH_TOKEN": ""}
    env["GITHUB_TOKEN"] = ""
    with running_daemon(workspace, tmp_path / "state", env=env) as running:
        async with running.client() as client:
            result = await pr(client, action=PrAction.PR_ACTION_VIEW)
    assert result.error.code == "unavailable"
    assert "RefreshGithubAccessToken" in result.error.message
    assert [call["args"] for call in gh_calls(log)] == [["auth", "token"]]


async def test_pr_actions_run_gh_with_the_token(
    workspace: Path, tmp_path: Path, fake_gh: tuple[Path, Path]
) -> None:
    bin_dir, log = fake_gh
    env = {"PATH": f"{bin_dir}:{SYSTEM_PATH}"}
    with running_daemon(workspace, tmp_path / "state", env=env) as running:
        async with running.client() as client:
            await refresh(client, TOKEN)
            created = await pr(
                client,
                action=PrAction.PR_ACTION_CREATE,
                title="Fix the parser",
                body="Closes #3",
                base_branch="main",
                draft=True,
            )
            comment = await pr(client, action=PrAction.PR_ACTION_COMMENT, pr_number=42, body="Done")
            missing = await pr(client, action=PrAction.PR_ACTION_VIEW, pr_number=404)
            no_action = await pr(client)
            no_title = await pr(client, action=PrAction.PR_ACTION_CREATE)
    success = created.success
    assert (success.pr_number, success.state, success.title, success.draft) == (
        42,
        "OPEN",
        "Fix the parser",
        True,
    )
    assert success.url == "https://github.com/octo/repo/pull/42"
    assert comment.success.output == "https://github.com/octo/repo/pull/42#issuecomment-7"
    assert missing.error.code == "gh_failed"
    assert "Could not resolve to a PullRequest" in missing.error.message
    assert no_action.error.code == "invalid_argument"
    assert no_title.error.code == "invalid_argument"
    calls = gh_calls(log)
    assert calls[0]["args"] == [
        "pr", "create", "--title", "Fix the parser", "--body", "Closes #3", "--base", "main",
        "--draft",
    ]  # fmt: skip
    assert calls[1]["args"][:3] == ["pr", "view", "42"]
    assert calls[2]["args"] == ["pr", "comment", "42", "--body", "Done"]
    assert all(call["token"] == TOKEN for call in calls)


async def test_gh_and_its_git_ignore_what_the_agent_planted(
    workspace: Path, tmp_path: Path, fake_gh: tuple[Path, Path]
) -> None:
    bin_dir, log = fake_gh
    marker = tmp_path / "PWNED"
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    with (workspace / ".git" / "config").open("a") as config:
        config.write(f'[core]\n\tfsmonitor = "touch {marker}; false #"\n')
    planted = tmp_path / "planted-bin"
    planted.mkdir()
    for name in ("gh", "git"):
        (planted / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (planted / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:{SYSTEM_PATH}"}
    with running_daemon(workspace, tmp_path / "state", env=env) as running:
        async with running.client() as client:
            await refresh(client, TOKEN)
            agent_env = {
                "PATH": f"{planted}:{bin_dir}:{SYSTEM_PATH}",
                "GIT_CONFIG_PARAMETERS": f"'core.fsmonitor=touch {marker} #'",
                "LD_PRELOAD": "/nonexistent.so",
            }
            await client.control.update_environment_variables(
                UpdateEnvironmentVariablesRequest(env=agent_env), headers=client.headers
            )
            viewed = await pr(client, action=PrAction.PR_ACTION_VIEW, pr_number=42)
    assert viewed.success.pr_number == 42, viewed
    assert not marker.exists()
    (call,) = gh_calls(log)
    assert call["token"] == TOKEN
    assert "GIT_CONFIG_PARAMETERS" not in call["env"] and "LD_PRELOAD" not in call["env"]
    assert call["env"]["GIT_DIR"] == str(workspace / ".git")
