"""The allowlist judges what an allowlisted program runs (exec_daemon/guards/runners.py), and the
git of the agent's shells refuses repositories and programs the agent laid out
(exec_daemon/kernel/git.py, AGENT_GIT_CONFIG), on the real daemon.

Each refusal has its positive control: the plain form of the same program, or the same form with
an allowlisted inner command, runs without approval; and, approved (run_everything), the refused
line does run what it hid, so the refusal is what kept it from running.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.v1.common_pb2 import RunMode
from agent.v1.shell_pb2 import SandboxPolicy
from exec_daemon.cli import resolve_rg_path
from exec_daemon.client import CallOutcome, ExecDaemonClient
from exec_daemon.guards.commands import judge_allowlist
from tests.daemon_process import RunningDaemon, running_daemon
from tests.guards_support import call, case, result_of, shell, write_config
from tests.polling import eventually

RG = resolve_rg_path("rg")  # from PATH, else the venv's: allowlisted by its path
ALLOWLIST = [
    RG,
    "find", "sed", "awk", "xargs", "tar", "rg", "git", "ls", "cat", "echo", "touch", "make",
    "env", "watch", "timeout",
]  # fmt: skip
APPROVED = RunMode.RUN_MODE_RUN_EVERYTHING


def project(root: Path) -> Path:
    workspace = root / "workspace"
    write_config(workspace / ".cursor" / "permissions.json", {"terminalAllowlist": ALLOWLIST})
    (workspace / "a.txt").write_text("x\n")
    (workspace / "Makefile").write_text("all:\n\ttouch made-by-make\n")
    return workspace


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    """Allowlist mode, no sandbox: what the issue's reproductions ran on."""
    root = tmp_path_factory.mktemp("runners")
    workspace = project(root)
    subprocess.run(["tar", "-cf", "a.tar", "a.txt"], cwd=workspace, check=True)
    with running_daemon(
        workspace, root / "state", "--run-mode", "allowlist", env={"HOME": str(root / "home")}
    ) as running:
        yield running


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("runners-sandboxed")
    with running_daemon(
        project(root),
        root / "state",
        "--run-mode",
        "allowlist",
        "--sandbox-enabled",
        env={"HOME": str(root / "home")},
    ) as running:
        yield running


def rejected(outcome: CallOutcome) -> Any:
    result = result_of(outcome)
    assert case(result) == "rejected", result
    return result.rejected.details


def ran(outcome: CallOutcome) -> Any:
    """The shell result of a call that ran (success or failure, not refused)."""
    result = result_of(outcome)
    assert case(result) in ("success", "failure"), result
    return getattr(result, case(result))


@dataclass(frozen=True)
class Runner:
    attack: str  # runs `touch MARKER` through an allowlisted program
    control: str  # the plain or allowlisted-inner form: runs without approval
    approved_runs_it: bool = True  # approved, the attack creates MARKER (not -ok: it asks)


RUNNERS = {
    "find -exec (reproduction 4)": Runner(
        "find . -maxdepth 0 -exec sh -c 'touch MARKER' \\;",
        "find . -maxdepth 0 -exec touch CONTROL \\;",
    ),
    "find -execdir": Runner(
        "find a.txt -execdir sh -c 'touch MARKER' \\;", "find a.txt -execdir touch CONTROL \\;"
    ),
    "find -ok": Runner(
        "find . -maxdepth 0 -ok sh -c 'touch MARKER' \\;",
        "find . -maxdepth 0 -ok touch CONTROL \\; ; touch CONTROL",
        approved_runs_it=False,
    ),
    "find -fprint writes a file": Runner("find . -maxdepth 0 -fprint MARKER", "find . -name a.txt"),
    "sed e (reproduction 4)": Runner("sed -n '1e touch MARKER' a.txt", "sed -n 1p a.txt"),
    "sed s///e": Runner("sed 's/.*/touch MARKER/e' a.txt", "sed 's/x/y/' a.txt"),
    "sed w": Runner("sed -n 'w MARKER' a.txt", "sed -n p a.txt"),
    "xargs sh -c": Runner("echo x | xargs sh -c 'touch MARKER'", "echo CONTROL | xargs touch"),
    "awk system()": Runner("awk 'BEGIN { system(\"touch MARKER\") }'", "awk '{ print $1 }' a.txt"),
    "tar --to-command": Runner(
        "tar --to-command='sh -c \"touch MARKER\"' -xf a.tar", "tar -tf a.tar"
    ),
    "rg --pre": Runner(f"{RG} --pre ./pre.sh x a.txt", f"{RG} x a.txt"),
    "git -c alias": Runner("git -c alias.t='!touch MARKER' t", "git --version"),
    "watch joins its words for sh -c": Runner(
        "timeout 5 watch -t -n 1 touch CONTROL ';' sh -c 'touch MARKER'",
        "timeout 5 watch -x -t -n 1 touch CONTROL",
        approved_runs_it=False,
    ),
}


@pytest.mark.parametrize("name", list(RUNNERS))
async def test_an_allowlisted_program_runs_only_allowlisted_programs(
    daemon: RunningDaemon, name: str
) -> None:
    runner = RUNNERS[name]
    marker, control = daemon.workspace / "MARKER", daemon.workspace / "CONTROL"
    pre = daemon.workspace / "pre.sh"
    pre.write_text(f'#!/bin/sh\ntouch {marker}\ncat "$1"\n')
    pre.chmod(0o755)
    marker.unlink(missing_ok=True)
    control.unlink(missing_ok=True)
    async with daemon.client() as client:
        refused = rejected(await client.run(shell(runner.attack)))
        assert refused.needs_approval, refused
        assert not marker.exists(), f"{runner.attack!r} ran without approval"
        ran(await client.run(shell(runner.control)))
        if "CONTROL" in runner.control:
            assert control.exists(), runner.control
        if runner.approved_runs_it:
            ran(await client.run(shell(runner.attack), run_mode=APPROVED))
            assert marker.exists(), f"approved, {runner.attack!r} did not run its command"
    marker.unlink(missing_ok=True)


async def test_a_build_tool_runs_confined_or_with_approval(
    daemon: RunningDaemon, sandboxed: RunningDaemon
) -> None:
    """`make` runs the Makefile the agent edits: allowlisted, it still needs approval where no
    sandbox can hold it, and runs confined where one can."""
    async with daemon.client() as client:
        refused = rejected(await client.run(shell("make")))
        assert refused.needs_approval and "repository" in refused.reason, refused
        assert not (daemon.workspace / "made-by-make").exists()
        assert ran(await client.run(shell("make --version"))).exit_code == 0
        ran(await client.run(shell("make"), run_mode=APPROVED))
        assert (daemon.workspace / "made-by-make").exists()
    async with sandboxed.client() as client:
        outcome = await client.run(shell("make"))
        assert result_of(outcome).sandbox_policy.type == SandboxPolicy.TYPE_WORKSPACE_READWRITE
        assert ran(outcome).exit_code == 0
        assert (sandboxed.workspace / "made-by-make").exists()


async def test_allowlisted_commands_run_in_the_sandbox_when_it_is_enabled(
    sandboxed: RunningDaemon,
) -> None:
    probe = Path(f"/etc/runners-probe-{os.getpid()}")
    async with sandboxed.client() as client:
        outcome = await client.run(shell(f"touch {probe} || echo denied"))
        assert result_of(outcome).sandbox_policy.type == SandboxPolicy.TYPE_WORKSPACE_READWRITE
        assert "denied" in ran(outcome).stdout
        assert not os.path.exists(probe)  # noqa: ASYNC240
        full_access = {"type": "TYPE_INSECURE_NONE"}
        asked = await client.run(shell("ls", requested_sandbox_policy=full_access))
        assert rejected(asked).needs_approval
        approved = await client.run(
            shell("ls", requested_sandbox_policy=full_access), run_mode=APPROVED
        )
        assert "a.txt" in ran(approved).stdout


# --- git refuses what the agent laid out ----------------------------------------------------------

PLAIN_GIT_ENV = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}


def plain_git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """git as a process outside the daemon's shells runs it (the control: the layout is live)."""
    return subprocess.run(
        ["git", *args], cwd=cwd, env=PLAIN_GIT_ENV, capture_output=True, text=True, timeout=60
    )


async def lay_out_bare_repository(client: ExecDaemonClient, folder: Path, config: str) -> None:
    """The reproduction's layout, written by the agent's file tools: HEAD, config, objects/, refs/."""
    files = {
        "HEAD": "ref: refs/heads/main\n",
        "config": config,
        "objects/info/packs": "",
        "refs/heads/.keep": "",
    }
    for name, text in files.items():
        outcome = await client.run(call("edit_tool_call", path=str(folder / name), contents=text))
        assert case(result_of(outcome)) == "success", result_of(outcome)


def fsmonitor_config(marker: Path) -> str:
    return (
        "[core]\n\trepositoryformatversion = 0\n\tworktree = .\n"
        f'\tfsmonitor = "touch {marker}; false"\n'
    )


async def test_git_refuses_a_bare_repository_the_agent_laid_out(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Reproduction 5, and `git -C sub` and `git add` with a filter driver beside it."""
    marker = tmp_path / "fsmonitor-ran"
    sub = daemon.workspace / "sub"
    config = fsmonitor_config(marker) + f'[filter "x"]\n\tclean = "touch {marker}; cat"\n'
    async with daemon.client() as client:
        await lay_out_bare_repository(client, sub, config)
        await client.run(
            call("edit_tool_call", path=str(sub / ".gitattributes"), contents="* filter=x\n")
        )
        for command, where in (
            ("git status", str(sub)),
            ("git -C sub status", ""),
            ("git add .gitattributes", str(sub)),
        ):
            outcome = await client.run(shell(command, working_directory=where))
            assert "safe.bareRepository" in ran(outcome).stderr, command
            assert not marker.exists(), f"{command} ran the agent's fsmonitor or filter"
        # An approved call that unsets the variables does not carry over to the next call.
        await client.run(shell("unset GIT_CONFIG_COUNT"), run_mode=APPROVED)
        outcome = await client.run(shell("git status", working_directory=str(sub)))
        assert "safe.bareRepository" in ran(outcome).stderr
        assert not marker.exists()
        # Pointing git at it explicitly is a form the allowlist does not accept.
        refused = rejected(await client.run(shell("git --git-dir=sub --work-tree=sub status")))
        assert refused.needs_approval
    # The control: git outside the agent's shells does run the laid-out configuration.
    plain_git("status", cwd=sub)
    assert marker.exists()


async def test_git_runs_no_program_from_a_nested_repository_s_configuration(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """A nested repository whose config names an fsmonitor and a hooks folder (set by a call a
    person approved): the agent's allowlisted git runs neither."""
    fsmonitor, hook = tmp_path / "fsmonitor-ran", tmp_path / "hook-ran"
    nested = daemon.workspace / "nested"
    hooks = daemon.workspace / "nested-hooks"
    hooks.mkdir()
    (hooks / "pre-commit").write_text(f"#!/bin/sh\ntouch {hook}\n")
    (hooks / "pre-commit").chmod(0o755)
    async with daemon.client() as client:
        ran(await client.run(shell("git init -q nested")))
        setup = (
            f"git -C nested config core.fsmonitor 'touch {fsmonitor}; false' && "
            f"git -C nested config core.hooksPath {hooks} && "
            "git -C nested config user.email a@b.c && git -C nested config user.name a"
        )
        refused = rejected(await client.run(shell(setup)))
        assert "git config changes configuration" in refused.reason
        assert ran(await client.run(shell(setup), run_mode=APPROVED)).exit_code == 0
        for command in ("git -C nested status", "git -C nested commit -q --allow-empty -m x"):
            assert ran(await client.run(shell(command))).exit_code == 0, command
        assert not fsmonitor.exists() and not hook.exists()
        # Also in a call a person approved, and in a shell of its own (a background call).
        done = tmp_path / "done"
        commit = f"git -C nested commit -q --allow-empty -m y && touch {done}"
        background = await client.run(shell(commit, is_background=True), run_mode=APPROVED)
        assert result_of(background).is_background, result_of(background)
        await eventually(done.exists, 60.0, "the background commit")
        assert ran(await client.run(shell(commit), run_mode=APPROVED)).exit_code == 0
        assert not fsmonitor.exists() and not hook.exists()
    # The control: git outside the agent's shells runs both.
    assert plain_git("commit", "-q", "--allow-empty", "-m", "z", cwd=nested).returncode == 0
    assert fsmonitor.exists() and hook.exists()


@pytest.mark.parametrize(
    ("command", "allowed"),
    [
        ("git -C sub log --oneline", True),
        ("git -c core.pager='sh -c id' log", False),
        ("git --config-env=core.fsmonitor=X status", False),
        ("git --exec-path=. status", False),
        ("git --bare status", False),
        ("git grep -O'sh -c id' x", False),
        ("git difftool", False),
        ("git st", False),  # not a git command: an alias the config may define
        ("git config --get user.name", True),
        ("git config alias.st '!id'", False),
        ("git init --template=t x", False),
        ("git clone -u 'sh -c id' x y", False),
        ("env -u GIT_CONFIG_COUNT git status", False),
        ("env -i git status", False),
        ("ssh -o ProxyCommand='sh -c id' host", False),
        ("ssh host 'id'", False),  # the remote's shell runs `id`, not allowlisted
        ("ssh host ls", True),
        ("zip -TT 'sh -c id' a.zip a.txt", False),
        ("rsync -e 'sh -c id' a host:b", False),
        ("less '+!id' a.txt", False),
        ("less +10 a.txt", True),
        ("man -P 'sh -c id' ls", False),
        ("tar xIf 'sh -c id' a.tar", False),  # old-style options
        ("tar --checkpoint=1 -cf /dev/null a.txt", True),
        ("awk '/a|b/ { print }' a.txt", True),  # a regexp, not a pipe
        ("awk '{ print > \"f\" }' a.txt", False),
        ("awk '{ \"date\" | getline d }' a.txt", False),
        ("sed --sandbox '1e id' a.txt", True),  # GNU sed refuses e, w and r itself
        ("sed -f script.sed a.txt", False),
        ("find $where -name x", False),  # a word known only at run time may be -exec
        ("timeout 5 find . -exec sh -c id \\;", False),
        ("npm run test", False),
        ("vim -c '!id' a.txt", False),
        ("vim +10 a.txt", True),
        ("apt-get -o APT::Update::Pre-Invoke::=id update", False),
        ("dpkg --post-invoke=id -i x.deb", False),
        ("docker run -v /:/host alpine", False),
        ("docker ps", True),
    ],
)
def test_runner_forms_of_the_table(command: str, allowed: bool) -> None:
    allowlist = [
        *ALLOWLIST, "ssh", "zip", "rsync", "less", "man", "timeout", "npm run test", "vim",
        "apt-get", "dpkg", "docker",
    ]  # fmt: skip
    verdict = judge_allowlist(command, allowlist)
    assert (verdict.refusal is None and verdict.confine is None) is allowed, verdict
