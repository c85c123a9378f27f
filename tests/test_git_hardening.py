"""The daemon's own git (exec_daemon/kernel/git.py) against a repository the agent could write:
each trap names a marker command (`touch <marker>`) through one git feature that can run a
program, the daemon's git path runs (GetDiff, GetWorkspaceChangesHash, ai_attribution), and the
marker must not exist while the answer stays right (or is a clear FAILED_PRECONDITION).

Real git in temp repositories, a real daemon over loopback."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError

from agent.v1.control_pb2 import (
    GetDiffRequest,
    GetWorkspaceChangesHashRequest,
    UpdateEnvironmentVariablesRequest,
)
from agent.v1.shell_pb2 import SandboxPolicy, ShellArgs, ShellToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from exec_daemon.kernel import git as kernel_git
from exec_daemon.kernel.errors import CodedError
from tests.daemon_process import RunningDaemon, running_daemon
from tests.workspace_support import case, result_of, write_call

pytestmark = pytest.mark.timeout(120)

TRACKED_BEFORE, TRACKED_AFTER = "one\n", "two\n"


def git(cwd: Path, *args: str) -> str:
    """The test's own git (not the daemon's), with no user or system config."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    return subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t",
         "-c", "protocol.file.allow=always", *args],
        cwd=cwd, env=env, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


def seed(workspace: Path) -> None:
    """A repository with one committed file changed and one untracked file."""
    workspace.mkdir(parents=True, exist_ok=True)
    git(workspace, "init", "-q", "-b", "main")
    (workspace / "tracked.txt").write_text(TRACKED_BEFORE)
    git(workspace, "add", "tracked.txt")
    git(workspace, "commit", "-qm", "first")
    (workspace / "tracked.txt").write_text(TRACKED_AFTER)
    (workspace / "new.txt").write_text("brand new\n")


def add_config(git_dir: Path, text: str) -> None:
    with (git_dir / "config").open("a") as config:
        config.write(text)


def ran(marker: Path) -> bool:
    return marker.exists()


def trap(marker: Path) -> str:
    """A command line that leaves `marker` behind (as git-config values quote it)."""
    return f"touch {marker}; false #"


def config_value(command: str) -> str:
    return '"' + command.replace("\\", "\\\\").replace('"', '\\"') + '"'


def assert_right_diff(diff: str) -> None:
    assert "diff --git a/tracked.txt b/tracked.txt" in diff
    assert "-one\n+two\n" in diff
    assert "diff --git a/new.txt b/new.txt" in diff and "+brand new\n" in diff


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "PWNED"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The seeded repository the conftest's `daemon` and `client` fixtures serve."""
    workspace = tmp_path / "workspace"
    seed(workspace)
    return workspace


async def get_diff(client: ExecDaemonClient) -> str:
    response = await client.control.get_diff(GetDiffRequest(), headers=client.headers)
    return str(response.diff)


async def changes_hash(client: ExecDaemonClient) -> str:
    response = await client.control.get_workspace_changes_hash(
        GetWorkspaceChangesHashRequest(), headers=client.headers
    )
    return str(response.hash)


async def assert_untrapped(client: ExecDaemonClient, workspace: Path, marker: Path) -> None:
    """GetDiff answers the right diff, the hash answers and follows a change, nothing ran."""
    assert_right_diff(await get_diff(client))
    before = await changes_hash(client)
    (workspace / "tracked.txt").write_text("three\n")
    assert await changes_hash(client) != before
    assert not ran(marker), "git ran the planted command"


async def assert_refused(client: ExecDaemonClient, marker: Path, *words: str) -> None:
    for call in (get_diff, changes_hash):
        with pytest.raises(ConnectError) as refused:
            await call(client)
        assert refused.value.code == Code.FAILED_PRECONDITION
        assert all(word in refused.value.message for word in words), refused.value.message
    assert not ran(marker), "git ran the planted command"


def fsmonitor_repository(path: Path, source: Path, marker: Path) -> Path:
    """A copy of `source`'s git dir whose config runs the marker as fsmonitor hook."""
    shutil.copytree(source / ".git", path)
    add_config(path, f"[core]\n\tfsmonitor = {config_value(trap(marker))}\n")
    return path


# --- the repository's indirections --------------------------------------------------------------


def plant_commondir(git_dir: Path, target: Path, relative: bool) -> None:
    named = os.path.relpath(target, git_dir) if relative else str(target)
    (git_dir / "commondir").write_text(named + "\n")


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
async def test_a_planted_commondir_is_ignored(
    client: ExecDaemonClient, workspace: Path, tmp_path: Path, marker: Path, relative: bool
) -> None:
    evil = fsmonitor_repository(tmp_path / "evil-common", workspace, marker)
    plant_commondir(workspace / ".git", evil, relative)
    await assert_untrapped(client, workspace, marker)


@pytest.mark.parametrize(
    "section", ["[include]", '[includeIf "gitdir:/"]'], ids=["include", "includeIf"]
)
async def test_a_config_that_includes_another_file_is_refused(
    client: ExecDaemonClient, workspace: Path, marker: Path, section: str
) -> None:
    planted = workspace / "innocent.cfg"
    planted.write_text(f"[core]\n\tfsmonitor = {config_value(trap(marker))}\n")
    add_config(workspace / ".git", f"{section}\n\tpath = {planted}\n")
    await assert_refused(client, marker, "includes other files")


async def test_a_git_file_pointing_into_the_workspace_is_refused(
    client: ExecDaemonClient, workspace: Path, marker: Path
) -> None:
    hidden = workspace / "build" / "cache"
    hidden.parent.mkdir()
    (workspace / ".git").rename(hidden)
    add_config(hidden, f"[core]\n\tfsmonitor = {config_value(trap(marker))}\n")
    (workspace / ".git").write_text("gitdir: build/cache\n")
    await assert_refused(client, marker, "points inside the workspace")


async def test_a_linked_worktree_works_and_its_commondir_must_stay_outside(
    tmp_path: Path, marker: Path
) -> None:
    main = tmp_path / "main"
    seed(main)
    git(main, "stash", "-u", "-q")
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", str(linked))
    (linked / "tracked.txt").write_text(TRACKED_AFTER)
    (linked / "new.txt").write_text("brand new\n")
    with running_daemon(linked, tmp_path / "state") as running:
        async with running.client() as client:
            await assert_untrapped(client, linked, marker)
            # The worktree's commondir now names a config the agent wrote inside the workspace.
            evil = fsmonitor_repository(linked / "vendor-git", main, marker)
            (main / ".git" / "worktrees" / "linked" / "commondir").write_text(f"{evil}\n")
            await assert_refused(client, marker, "commondir", "inside the workspace")


async def test_a_symlinked_dot_git_is_refused(
    client: ExecDaemonClient, workspace: Path, tmp_path: Path, marker: Path
) -> None:
    elsewhere = fsmonitor_repository(tmp_path / "elsewhere", workspace, marker)
    shutil.rmtree(workspace / ".git")
    (workspace / ".git").symlink_to(elsewhere)
    await assert_refused(client, marker, "symbolic link")


async def test_a_workspace_below_the_repository_top_past_an_empty_dot_git(tmp_path: Path) -> None:
    top = tmp_path / "top"
    seed(top)
    workspace = top / "sub"
    (workspace / ".git").mkdir(parents=True)  # as the sandbox's placeholder for a missing .git
    (workspace / "x.txt").write_text("x\n")
    with running_daemon(workspace, tmp_path / "state") as running:
        async with running.client() as client:
            diff = await get_diff(client)
    assert "diff --git a/sub/x.txt b/sub/x.txt" in diff and "tracked.txt" not in diff


async def test_core_worktree_cannot_move_the_work_tree(
    client: ExecDaemonClient, workspace: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "tracked.txt").write_text("somewhere else\n")
    add_config(workspace / ".git", f"[core]\n\tworktree = {other}\n")
    assert_right_diff(await get_diff(client))


async def test_alternates_add_objects_but_run_nothing(
    client: ExecDaemonClient, workspace: Path, tmp_path: Path, marker: Path
) -> None:
    evil = fsmonitor_repository(tmp_path / "alternate", workspace, marker)
    add_config(evil, f"[core]\n\thooksPath = {tmp_path}\n")
    (workspace / ".git" / "objects" / "info" / "alternates").write_text(f"{evil / 'objects'}\n")
    await assert_untrapped(client, workspace, marker)


# --- config keys that run programs --------------------------------------------------------------


@pytest.mark.parametrize("via", ["config", "config.worktree"])
async def test_fsmonitor_is_off(
    client: ExecDaemonClient, workspace: Path, marker: Path, via: str
) -> None:
    git_dir = workspace / ".git"
    if via == "config":
        add_config(git_dir, f"[core]\n\tfsmonitor = {config_value(trap(marker))}\n")
    else:
        add_config(git_dir, "[extensions]\n\tworktreeConfig = true\n")
        (git_dir / "config.worktree").write_text(
            f"[core]\n\tfsmonitor = {config_value(trap(marker))}\n"
        )
    await assert_untrapped(client, workspace, marker)


def write_hook(folder: Path, marker: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("post-index-change", "pre-auto-gc", "reference-transaction"):
        hook = folder / name
        hook.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\n")
        hook.chmod(0o755)


@pytest.mark.parametrize("where", ["hooks dir", "core.hooksPath"])
async def test_hooks_do_not_run(
    client: ExecDaemonClient, workspace: Path, marker: Path, where: str
) -> None:
    if where == "hooks dir":
        write_hook(workspace / ".git" / "hooks", marker)
    else:
        write_hook(workspace / "scripts" / "hooks", marker)
        add_config(workspace / ".git", f"[core]\n\thooksPath = {workspace / 'scripts' / 'hooks'}\n")
    await assert_untrapped(client, workspace, marker)


@pytest.mark.parametrize("kind", ["diff.external", "driver command", "textconv"])
async def test_diff_programs_do_not_run(
    client: ExecDaemonClient, workspace: Path, marker: Path, kind: str
) -> None:
    command = config_value(trap(marker))
    (workspace / ".gitattributes").write_text("*.txt diff=pretty\n")
    key = {"diff.external": "[diff]\n\texternal", "driver command": '[diff "pretty"]\n\tcommand'}
    if kind == "textconv":
        add_config(workspace / ".git", f'[diff "pretty"]\n\ttextconv = {command}\n')
    else:
        add_config(workspace / ".git", f"{key[kind]} = {command}\n")
    await assert_untrapped(client, workspace, marker)


@pytest.mark.parametrize("kind", ["clean", "process", "clean of a dotted driver name"])
async def test_filter_drivers_do_not_run_whatever_their_name(
    client: ExecDaemonClient, workspace: Path, marker: Path, kind: str
) -> None:
    name = "lfs.v2" if "dotted" in kind else "secret"
    key = "process" if kind == "process" else "clean"
    (workspace / ".gitattributes").write_text(f"*.txt filter={name}\n")
    command = config_value(f"touch {marker}; cat")
    add_config(workspace / ".git", f'[filter "{name}"]\n\t{key} = {command}\n\trequired = true\n')
    await assert_untrapped(client, workspace, marker)


async def test_a_submodule_is_not_entered(
    client: ExecDaemonClient, workspace: Path, tmp_path: Path, marker: Path
) -> None:
    library = tmp_path / "library"
    seed(library)
    git(library, "add", "-A")
    git(library, "commit", "-qm", "library")
    git(workspace, "submodule", "add", "-q", str(library), "lib")
    git(workspace, "commit", "-qm", "submodule", "--", ".gitmodules", "lib")
    add_config(
        workspace / ".git" / "modules" / "lib",
        f"[core]\n\tfsmonitor = {config_value(trap(marker))}\n",
    )
    write_hook(workspace / ".git" / "modules" / "lib" / "hooks", marker)
    (workspace / "lib" / "tracked.txt").write_text("dirty inside the submodule\n")
    await assert_untrapped(client, workspace, marker)


async def test_an_untracked_nested_repository_is_not_entered(
    client: ExecDaemonClient, workspace: Path, marker: Path
) -> None:
    nested = workspace / "nested"
    seed(nested)
    add_config(nested / ".git", f"[core]\n\tfsmonitor = {config_value(trap(marker))}\n")
    write_hook(nested / ".git" / "hooks", marker)
    await assert_untrapped(client, workspace, marker)


# --- the agent's environment ----------------------------------------------------------------


async def update_env(client: ExecDaemonClient, env: dict[str, str]) -> None:
    await client.control.update_environment_variables(
        UpdateEnvironmentVariablesRequest(env=env), headers=client.headers
    )


@pytest.mark.parametrize(
    "variables",
    ["GIT_DIR", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_EXTERNAL_DIFF", "GIT_WORK_TREE"],
)
async def test_git_variables_from_the_agent_environment_are_not_used(
    client: ExecDaemonClient, workspace: Path, tmp_path: Path, marker: Path, variables: str
) -> None:
    command = trap(marker)
    env = {
        "GIT_DIR": {"GIT_DIR": str(fsmonitor_repository(tmp_path / "evil", workspace, marker))},
        "GIT_CONFIG_PARAMETERS": {"GIT_CONFIG_PARAMETERS": f"'core.fsmonitor={command}'"},
        "GIT_CONFIG_COUNT": {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "core.fsmonitor",
            "GIT_CONFIG_VALUE_0": command,
        },
        "GIT_EXTERNAL_DIFF": {"GIT_EXTERNAL_DIFF": str(write_script(tmp_path, marker))},
        "GIT_WORK_TREE": {"GIT_WORK_TREE": str(tmp_path)},
    }[variables]
    await update_env(client, env)
    await assert_untrapped(client, workspace, marker)


def write_script(folder: Path, marker: Path) -> Path:
    script = folder / "trap.sh"
    script.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\n")
    script.chmod(0o755)
    return script


async def test_a_path_with_a_planted_git_is_not_used(
    client: ExecDaemonClient, workspace: Path, tmp_path: Path, marker: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text(f'#!/bin/sh\ntouch {shlex.quote(str(marker))}\nexec /usr/bin/git "$@"\n')
    fake.chmod(0o755)
    await update_env(client, {"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    await assert_untrapped(client, workspace, marker)


async def test_a_session_export_does_not_reach_the_daemon_git(
    client: ExecDaemonClient, workspace: Path, marker: Path
) -> None:
    call = ToolCall(
        shell_tool_call=ShellToolCall(
            args=ShellArgs(
                command=f"export GIT_CONFIG_PARAMETERS=\"'core.fsmonitor={trap(marker)}'\""
            )
        )
    )
    outcome = await client.run(call, agent_id="agent-1")
    assert outcome.result is not None and outcome.result.shell_tool_call.result.HasField("success")
    await assert_untrapped(client, workspace, marker)


# --- the runner -----------------------------------------------------------------------------


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


async def wait_gone(pgid: int) -> None:
    deadline = time.monotonic() + 10
    while group_alive(pgid) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not group_alive(pgid), "a child of git outlived its run"


async def test_a_run_past_its_time_is_killed_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"echo $$ > {pid_file}; sleep 60 & sleep 60"
    with pytest.raises(CodedError, match="took longer"):
        await kernel_git._execute(["sh", "-c", script], str(tmp_path), {}, 0.5, None)
    await wait_gone(int(pid_file.read_text()))


async def test_output_past_the_limit_is_refused_and_the_run_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"echo $$ > {pid_file}; yes; sleep 60"
    with pytest.raises(CodedError, match="wrote more than"):
        await kernel_git._execute(["sh", "-c", script], str(tmp_path), {}, 30, 1 << 20)
    await wait_gone(int(pid_file.read_text()))


async def test_a_cancelled_run_leaves_no_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"echo $$ > {pid_file}; sleep 60"
    task = asyncio.create_task(
        kernel_git._execute(["sh", "-c", script], str(tmp_path), {}, 30, None)
    )
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_gone(int(pid_file.read_text()))


# --- issue 10 item 1 end to end: a sandboxed agent against the daemon's git -------------------


@pytest.fixture
def sandboxed(workspace: Path, tmp_path: Path) -> Iterator[RunningDaemon]:
    with running_daemon(workspace, tmp_path / "state", "--sandbox-enabled") as running:
        yield running


async def sandboxed_shell(client: ExecDaemonClient, command: str) -> str:
    policy = SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READWRITE)
    call = ToolCall(
        shell_tool_call=ShellToolCall(
            args=ShellArgs(command=command, requested_sandbox_policy=policy)
        )
    )
    outcome = await client.run(call, agent_id="agent-1")
    assert outcome.result is not None, outcome.error
    result = outcome.result.shell_tool_call.result
    assert result.sandbox_policy.type == SandboxPolicy.TYPE_WORKSPACE_READWRITE
    case = result.WhichOneof("result")
    assert case in ("success", "failure"), result
    part = getattr(result, case)
    return str(part.stdout) + str(part.stderr)


async def test_a_sandboxed_shell_cannot_turn_commondir_into_a_root_command(
    sandboxed: RunningDaemon, workspace: Path, tmp_path: Path, marker: Path
) -> None:
    evil = tmp_path / "evil"
    config = f"[core]\\n\\tfsmonitor = {config_value(trap(marker))}\\n"
    script = f"""
        cp -r .git {evil} && printf '%b' {shlex.quote(config)} >> {evil}/config
        echo {evil} > .git/commondir && echo PLANTED
        """
    async with sandboxed.client() as client:
        assert "PLANTED" in await sandboxed_shell(client, script)
        await assert_untrapped(client, workspace, marker)


@pytest.mark.parametrize(
    "target",
    [
        ".git/info/attributes",
        ".git/config.worktree",
        ".git/worktrees/x/commondir",
        ".git/modules/lib/config",
        ".git/hooks/post-index-change",
        ".git/remotes/origin",
    ],
)
async def test_a_sandboxed_shell_cannot_write_git_indirections(
    sandboxed: RunningDaemon, workspace: Path, target: str
) -> None:
    script = (
        f"mkdir -p $(dirname {target}) 2>/dev/null; echo x > {target} 2>/dev/null && echo WROTE;"
        " echo y > tracked.txt && git add tracked.txt && echo GIT-WORKS"
    )
    async with sandboxed.client() as client:
        text = await sandboxed_shell(client, script)
    assert "WROTE" not in text and "GIT-WORKS" in text, text
    written = workspace / target
    # A missing protected file may stand as an empty placeholder while sandboxes run.
    assert not written.is_file() or written.read_text() == ""


async def test_an_existing_commondir_cannot_be_rewritten(
    sandboxed: RunningDaemon, workspace: Path, tmp_path: Path
) -> None:
    # A main repository's harmless `commondir` naming itself: protected once it exists.
    (workspace / ".git" / "commondir").write_text(".\n")
    async with sandboxed.client() as client:
        text = await sandboxed_shell(client, f"echo {tmp_path} > .git/commondir && echo WROTE")
        assert "WROTE" not in text
        assert_right_diff(await get_diff(client))
    assert (workspace / ".git" / "commondir").read_text() == ".\n"


# --- the file tools use the same rules ------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        ".git/commondir",
        ".git/info/attributes",
        ".git/worktrees/w/commondir",
        "sub/.git",
        ".git",
        ".cursor/worktrees/w/.git",
        ".cursor/worktrees/w/.git/config",
    ],
)
async def test_the_edit_tool_cannot_write_git_indirections(
    client: ExecDaemonClient, workspace: Path, target: str
) -> None:
    path = workspace / target
    result = await result_of(client, write_call(path, "gitdir: /tmp\n"))
    assert case(result) == "permission_denied", result
    assert "protected path" in result.permission_denied.reason
    assert_right_diff(await get_diff(client))


async def test_the_edit_tool_may_still_write_git_data(
    client: ExecDaemonClient, workspace: Path
) -> None:
    path = workspace / ".git" / "refs" / "heads" / "copy"
    head = git(workspace, "rev-parse", "HEAD")
    assert case(await result_of(client, write_call(path, head))) == "success"
    assert git(workspace, "rev-parse", "copy") == head
