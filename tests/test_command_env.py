"""A shell call's own variables (ShellArgs.env, secret_env): set for that command only, redacted
when declared secret, and judged by the allowlist like the command (exec_daemon/guards/
command_env.py): a variable cannot smuggle an unlisted program past allowlist mode."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.v1.common_pb2 import RunMode
from exec_daemon.client import ExecDaemonClient
from exec_daemon.guards.command_env import command_env_refusal
from tests.daemon_process import RunningDaemon, running_daemon
from tests.guards_support import call, case, result_of, shell, write_config
from tests.polling import file_holds

ALLOWLIST = ["echo", "git status", "bash -c true", "true"]
INJECTED_NAME = "DEPLOY_KEY"
ALLOWLIST_MODE = RunMode.RUN_MODE_ALLOWLIST
APPROVED = RunMode.RUN_MODE_RUN_EVERYTHING


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("command-env")
    workspace = root / "workspace"
    workspace.mkdir()
    write_config(workspace / ".cursor" / "permissions.json", {"terminalAllowlist": ALLOWLIST})
    with running_daemon(
        workspace,
        root / "state",
        "--secret-redaction-enabled",
        env={"CLOUD_AGENT_INJECTED_SECRET_NAMES": INJECTED_NAME},
    ) as running:
        yield running


@pytest.fixture
async def client(daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with daemon.client() as connected:
        yield connected


async def run_shell(
    client: ExecDaemonClient, command: str, run_mode: int = 0, agent_id: str = "", **args: Any
) -> Any:
    return result_of(await client.run(shell(command, **args), agent_id, run_mode=run_mode))


async def test_the_variables_exist_for_that_command_only(client: ExecDaemonClient) -> None:
    first = await run_shell(client, 'echo "[$GREETING] [$OTHER]"', env={"GREETING": "hello"})
    assert first.success.stdout == "[hello] []\n"
    # The session shell never had them: the next command, in the same shell, does not see them.
    after = await run_shell(client, 'echo "[${GREETING-unset}]"')
    assert after.success.stdout == "[unset]\n"
    assert after.success.shell_id == first.success.shell_id
    # An exported variable of the session is overridden for the one command, then is back.
    await run_shell(client, "export MOOD=calm")
    assert (await run_shell(client, "echo $MOOD", env={"MOOD": "busy"})).success.stdout == "busy\n"
    assert (await run_shell(client, "echo $MOOD")).success.stdout == "calm\n"
    # The exit code and the failure case are the command's.
    failed = await run_shell(client, 'exit "$CODE"', env={"CODE": "7"})
    assert failed.failure.exit_code == 7
    # A command with variables that outruns its timeout is ended; the session lives on.
    slow = await run_shell(client, "echo $A; sleep 30", env={"A": "began"}, timeout=1000)
    assert case(slow) == "timeout" and slow.timeout.stdout == "began\n"
    again = await run_shell(client, "echo next")
    assert again.success.stdout == "next\n" and again.success.shell_id == first.success.shell_id


async def test_a_background_shell_gets_them_too(
    client: ExecDaemonClient, daemon: RunningDaemon
) -> None:
    target = daemon.workspace / "background.txt"
    started = await run_shell(
        client, f'echo "$SIGNAL" > {target}', is_background=True, env={"SIGNAL": "from-env"}
    )
    assert started.is_background and started.shell_id  # a background start sets no case
    await file_holds(target, "from-env\n")


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"1X": "v"}, "is not a shell variable name"),
        ({"A-B": "v"}, "is not a shell variable name"),
        ({"__ed_cmd": "rm -rf ~"}, "the daemon's own variable"),
        ({"EXEC_DAEMON_CALL": "x"}, "the daemon's own variable"),
        ({"X": "a\0b"}, "contains a NUL character"),
        ({"X": "x" * 70_000}, "above the limit"),
    ],
)
async def test_bad_variables_are_refused_with_a_reason(
    client: ExecDaemonClient, env: dict[str, str], why: str
) -> None:
    result = await run_shell(client, "echo ran", env=env)
    assert case(result) == "rejected" and why in result.rejected.reason


async def test_a_declared_secret_is_redacted(client: ExecDaemonClient) -> None:
    secret = "s3cret-value-of-the-call"
    outcome = await client.run(
        shell("echo $API; echo $API >&2", env={"API": secret}, secret_env=["API"])
    )
    # The answer echoes the call's args: the value is masked there too.
    assert outcome.result is not None
    assert dict(outcome.result.shell_tool_call.args.env) == {"API": "[REDACTED]"}
    answer = result_of(outcome)
    assert answer.success.stdout == "[REDACTED]\n"
    assert answer.success.stderr == "[REDACTED]\n"
    # Only from that call's answer: a call (perhaps the agent's) cannot make the daemon hide a
    # text from what it sends later (a line of a diff, a command it ran).
    later = await run_shell(client, f"echo {secret}")
    assert later.success.stdout == f"{secret}\n"
    # A variable named in the daemon's injected secret names is one without saying so.
    injected = await run_shell(client, f"echo ${INJECTED_NAME}", env={INJECTED_NAME: "k3y-123456"})
    assert injected.success.stdout == "[REDACTED]\n"
    # Positive control: an undeclared value is sent as it is.
    plain = await run_shell(client, "echo $PLAIN", env={"PLAIN": "visible-value-42"})
    assert plain.success.stdout == "visible-value-42\n"
    # secret_env names a variable of env.
    wrong = await run_shell(client, "true", env={"A": "b"}, secret_env=["B"])
    assert "secret_env: 'B' is not a variable of env" in wrong.rejected.reason


async def test_allowlist_mode_lets_plain_data_variables_through(client: ExecDaemonClient) -> None:
    for env in ({"LANG": "C.UTF-8"}, {"TZ": "Europe/Paris", "NO_COLOR": "1"}, {"CI": "true"}):
        name, value = next(iter(env.items()))
        result = await run_shell(client, f'echo "${name}"', ALLOWLIST_MODE, env=env)
        assert result.success.stdout == f"{value}\n", env


async def test_a_variable_cannot_smuggle_a_program_past_the_allowlist(
    client: ExecDaemonClient, daemon: RunningDaemon, tmp_path: Path
) -> None:
    marker = tmp_path / "smuggled"
    evil = tmp_path / "evil.sh"
    evil.write_text(f"touch {marker}\n")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "git").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (fake_bin / "git").chmod(0o755)
    tricks = [
        ("bash -c true", {"BASH_ENV": str(evil)}),
        ("git status", {"PATH": f"{fake_bin}:/usr/bin:/bin"}),
        ("git status", {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor",
                        "GIT_CONFIG_VALUE_0": str(evil)}),
        ("echo hi", {"LD_PRELOAD": str(tmp_path / "evil.so")}),
        ("true", {"LANG": str(tmp_path)}),  # a locale name that is a path
        ("true", {"TZ": "../../../tmp/x"}),
    ]  # fmt: skip
    for command, env in tricks:
        refused = await run_shell(client, command, ALLOWLIST_MODE, env=env)
        assert case(refused) == "rejected", (command, env)
        assert refused.rejected.details.needs_approval, (command, env)
        assert "env sets" in refused.rejected.reason
        assert not marker.exists(), (command, env)
    # The same commands are allowlisted without the variables (the refusal is the variables').
    for command in ("bash -c true", "git status", "echo hi", "true"):
        allowed = await run_shell(client, command, ALLOWLIST_MODE)
        assert case(allowed) in ("success", "failure"), command
    # Positive control: the tricks are real; approved (run_everything), they run the program.
    for command, env in tricks[:2]:
        await run_shell(client, command, APPROVED, env=env)
        assert marker.exists(), (command, env)
        marker.unlink()


async def test_a_read_only_agent_gets_no_variable_that_runs_code(
    client: ExecDaemonClient,
) -> None:
    started = await client.run(call("task_tool_call", description="look", readonly=True), "main")
    reader = result_of(started).success.agent_id
    refused = await run_shell(client, "git log -1", agent_id=reader, env={"GIT_PAGER": "sh"})
    assert case(refused) == "rejected" and refused.rejected.is_readonly
    assert "env sets 'GIT_PAGER'" in refused.rejected.reason
    allowed = await run_shell(client, "echo $LANG", agent_id=reader, env={"LANG": "C"})
    assert allowed.success.stdout == "C\n"


def test_the_allowlist_names_what_may_pass_and_refuses_the_rest() -> None:
    assert command_env_refusal({"LANG": "en_US.UTF-8", "RUST_LOG": "info,a=debug"}) is None
    for env in (
        {"PATH": "/usr/bin"},
        {"BASH_ENV": "x"},
        {"PYTHONSTARTUP": "x"},
        {"NODE_OPTIONS": "--require=x"},
        {"RUST_LOG": "$(reboot)"},
        {"COLUMNS": "80 90"},
    ):
        assert command_env_refusal(env) is not None, env
