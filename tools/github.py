"""pr_management_tool_call, through the GitHub CLI (`gh`).

gh finds its token in `GH_TOKEN` / `GITHUB_TOKEN` of the agent environment, which
ControlService.RefreshGithubAccessToken sets (exec_daemon/rpc/github_token.py).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from dataclasses import dataclass

from agent.v1.agent_pb2 import (
    PrAction,
    PrManagementArgs,
    PrManagementResult,
    PrManagementSuccess,
)
from agent.v1.common_pb2 import ToolError
from exec_daemon.kernel import git
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.git_run import workspace_repository
from exec_daemon.kernel.runner import HelperFailed, run_helper
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, ToolSpec, no_subject
from exec_daemon.kernel.state import Daemon

log = logging.getLogger(__name__)

CREDENTIAL_KEY = "credential.https://github.com.helper"
# git runs this with sh; it answers `get` with the token from the environment git has.
CREDENTIAL_HELPER = '!f() { test "$1" = get || return 0; echo username=x-access-token; echo "password=$GH_TOKEN"; }; f'
TOKEN_VARIABLES = ("GH_TOKEN", "GITHUB_TOKEN")
GH_TIMEOUT_SECONDS = 120.0
MAX_OUTPUT_CHARS = 64 * 1024
PR_VIEW_FIELDS = "number,url,state,title,isDraft,headRefName,baseRefName"
# What gh takes from the agent's environment: the token, which GitHub, proxies.
GH_VARIABLES = (
    *TOKEN_VARIABLES,
    "GH_HOST", "GH_REPO", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN",
    "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy",
)  # fmt: skip


@dataclass
class GhRun:
    returncode: int
    stdout: str
    stderr: str


class GhUnavailable(Exception):
    pass


def _gh_path(env: dict[str, str]) -> str | None:
    return shutil.which("gh", path=env.get("PATH", os.defpath))


async def _run_gh(ctx: CallContext, gh: str, env: dict[str, str], *args: str) -> GhRun:
    done = await run_helper(
        [gh, *args],
        env=env,
        cwd=ctx.daemon.workspace,
        time_limit=GH_TIMEOUT_SECONDS,
        limit=MAX_OUTPUT_CHARS,
        stderr_limit=MAX_OUTPUT_CHARS,
    )
    return GhRun(done.returncode, done.stdout.text(), done.stderr.text())


async def _gh_environment(daemon: Daemon) -> dict[str, str]:
    """gh's environment: its token and host settings from the agent's environment, the rest
    from the daemon's own; the git gh runs is hardened like the daemon's (exec_daemon/kernel/
    git.py) and gets the github.com credential helper. Not the agent's PATH (a planted `gh`
    or `git` would run as the daemon) nor its other variables (GIT_*, LD_PRELOAD, ...)."""
    agent_env = daemon.env.snapshot()
    env = {name: agent_env[name] for name in GH_VARIABLES if name in agent_env}
    env.update({"PATH": os.environ.get("PATH", os.defpath), "HOME": os.environ.get("HOME", "/")})
    env.update({"GH_PROMPT_DISABLED": "1", "GH_NO_UPDATE_NOTIFIER": "1", "NO_COLOR": "1"})
    repository = await workspace_repository(daemon)
    credentials = [(CREDENTIAL_KEY, ""), (CREDENTIAL_KEY, CREDENTIAL_HELPER)]
    env.update(await git.git_environment(repository, credentials))
    return env


async def _gh_ready(ctx: CallContext) -> tuple[str, dict[str, str]]:
    """gh's path and environment, or GhUnavailable naming what is missing."""
    env = await _gh_environment(ctx.daemon)
    gh = _gh_path(env)
    if gh is None:
        raise GhUnavailable("the GitHub CLI (gh) is not installed in the VM")
    if not any(env.get(name) for name in TOKEN_VARIABLES):
        # gh may still be logged in on its own (gh auth login): it answers without the network.
        status = await _run_gh(ctx, gh, env, "auth", "token")
        if status.returncode != 0:
            raise GhUnavailable(
                "no GitHub token: none was given (ControlService.RefreshGithubAccessToken), "
                "GH_TOKEN/GITHUB_TOKEN are unset and gh is not logged in"
            )
    return gh, env


def _error(code: str, message: str) -> PrManagementResult:
    return PrManagementResult(error=ToolError(code=code, message=message))


def _pr_number(url: str) -> int:
    match = re.search(r"/pull/(\d+)", url)
    return int(match.group(1)) if match else 0


def _command(args: PrManagementArgs) -> list[str] | PrManagementResult:
    number = [str(args.pr_number)] if args.pr_number else []
    action = args.action
    if action == PrAction.PR_ACTION_CREATE:
        if not args.title:
            return _error("invalid_argument", "creating a pull request needs a title")
        command = ["pr", "create", "--title", args.title, "--body", args.body]
        if args.base_branch:
            command += ["--base", args.base_branch]
        if args.head_branch:
            command += ["--head", args.head_branch]
        if args.draft:
            command.append("--draft")
        return command
    if action == PrAction.PR_ACTION_UPDATE:
        command = ["pr", "edit", *number]
        if args.title:
            command += ["--title", args.title]
        if args.body:
            command += ["--body", args.body]
        if args.base_branch:
            command += ["--base", args.base_branch]
        if len(command) == 2 + len(number):
            return _error("invalid_argument", "nothing to update: give a title, body or base")
        return command
    if action == PrAction.PR_ACTION_COMMENT:
        if not args.body:
            return _error("invalid_argument", "a comment needs a body")
        return ["pr", "comment", *number, "--body", args.body]
    if action == PrAction.PR_ACTION_VIEW:
        return ["pr", "view", *number, "--json", PR_VIEW_FIELDS]
    return _error("invalid_argument", "action is unspecified (create, update, view or comment)")


def _failure(run: GhRun, command: list[str]) -> PrManagementResult:
    detail = (run.stderr.strip() or run.stdout.strip() or f"exit code {run.returncode}")[:2000]
    return _error("gh_failed", f"gh {' '.join(command[:2])} failed: {detail}")


async def pr_management(args: PrManagementArgs, ctx: CallContext) -> PrManagementResult:
    command = _command(args)
    if isinstance(command, PrManagementResult):
        return command
    try:
        gh, env = await _gh_ready(ctx)
    except GhUnavailable as exc:
        return _error("unavailable", str(exc))
    except CodedError as exc:
        return _error(exc.code, exc.message)
    try:
        run = await _run_gh(ctx, gh, env, *command)
        if run.returncode != 0:
            return _failure(run, command)
        if args.action != PrAction.PR_ACTION_VIEW:
            # Every other action prints a URL; the PR's state comes from a view.
            view_target = [str(args.pr_number or _pr_number(run.stdout))]
            if view_target == ["0"]:
                view_target = []
            view = await _run_gh(ctx, gh, env, "pr", "view", *view_target, "--json", PR_VIEW_FIELDS)
            output = run.stdout.strip()
            if view.returncode != 0:
                url = output.splitlines()[-1] if output else ""
                return PrManagementResult(
                    success=PrManagementSuccess(pr_number=_pr_number(url), url=url, output=output)
                )
        else:
            view, output = run, ""
    except HelperFailed as exc:
        return _error(exc.code, exc.message)
    try:
        info = json.loads(view.stdout)
    except ValueError:
        return _error("gh_failed", "gh pr view printed something that is not JSON")
    return PrManagementResult(
        success=PrManagementSuccess(
            pr_number=int(info.get("number") or 0),
            url=str(info.get("url") or ""),
            state=str(info.get("state") or ""),
            title=str(info.get("title") or ""),
            draft=bool(info.get("isDraft")),
            output=output or view.stdout.strip(),
        )
    )


PR_MANAGEMENT = ToolSpec(
    "pr_management_tool_call",
    pr_management,
    effects=Effect.MACHINE,  # pull requests on GitHub
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("PrManagement"),
    subject=no_subject,
)
