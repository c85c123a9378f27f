"""`.cursor/environment.json`: parsing, start + terminals at daemon start, `exec-daemon install`,
and setup_vm_environment_tool_call storing the install command."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agent.v1.agent_pb2 import SetupVmEnvironmentArgs, SetupVmEnvironmentToolCall
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from exec_daemon.kernel.environment_file import (
    EnvironmentConfigError,
    TerminalConfig,
    load_environment,
    parse_environment,
    strip_comments,
)
from exec_daemon.terminals.accounts import AccountError, account_for
from tests.daemon_process import RunningDaemon, free_port, running_daemon
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(60)
SOURCE = Path(".cursor/environment.json")


def write_environment(workspace: Path, text: str) -> Path:
    path = workspace / SOURCE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_comments_and_trailing_commas_are_allowed() -> None:
    text = """
    // The dev set-up
    {
      "install": "npm ci", /* runs on every new VM */
      "start": "echo 'not // a comment' \\"/* nor this */\\"",
      "terminals": [
        {"name": "web", "command": "npm run dev", "description": "the site",},
        [{"command": "npm run worker"}, {"name": "db", "command": "pg"}],
      ],
      "ports": [{"port": 3000, "name": "web"}],
      "build": {"dockerfile": "Dockerfile", "context": ".."},
      "snapshot": "snap-1", "agentCanUpdateSnapshot": true, "name": "dev", "user": "ubuntu",
      "repositoryDependencies": ["github.com/acme/api"],
    }
    """
    config = parse_environment(text, SOURCE)
    assert config.install == "npm ci"
    assert config.start == "echo 'not // a comment' \"/* nor this */\""
    assert config.terminals == (
        TerminalConfig("npm run dev", "web", "the site"),
        TerminalConfig("npm run worker"),
        TerminalConfig("pg", "db"),
    )
    assert strip_comments('{"a": "x,]"}') == '{"a": "x,]"}'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"instal": "npm ci"}', "unknown key 'instal' at the top level (known keys: name,"),
        ('{"update": "npm i"}', "unknown key 'update' at the top level"),
        ('{"terminals": [{"command": "x", "cmd": "y"}]}', "terminals[1]: unknown key 'cmd'"),
        ('{"terminals": [{"name": "web"}]}', "terminals[1]: 'command' is required"),
        ('{"terminals": [[{"command": 1}]]}', "terminals[1][1].command: must be a string"),
        ('{"terminals": {"command": "x"}}', "terminals: must be an array, got an object"),
        ('{"install": false}', "install: must be a string, got true or false"),
        ('{"ports": [{"port": 0}]}', "ports[1].port: must be 1..65535"),
        ('{"ports": [{"port": true}]}', "ports[1].port: must be an integer"),
        ('{"build": {}}', "build: 'dockerfile' is required"),
        ('{"agentCanUpdateSnapshot": "yes"}', "agentCanUpdateSnapshot: must be true or false"),
        ("[]", "top level: must be an object, got an array"),
        ('{"install": "x",\n  "start": }', "not valid JSON: Expecting value at line 2 column"),
        ('{"install": "x" /* never closed', "a /* comment is never closed"),
    ],
)
def test_bad_files_are_rejected_with_a_message_that_says_where(text: str, message: str) -> None:
    with pytest.raises(EnvironmentConfigError) as caught:
        parse_environment(text, SOURCE)
    assert str(caught.value).startswith(f"{SOURCE}: ")
    assert message in str(caught.value)


def test_a_workspace_without_the_file_has_no_environment(tmp_path: Path) -> None:
    assert load_environment(tmp_path) is None


def list_terminals(daemon: RunningDaemon) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{daemon.pty_port}/terminals",
        headers={"Authorization": f"Bearer {daemon.token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        listing: list[dict[str, Any]] = json.loads(response.read())
        return listing


def wait_for(predicate: Any, timeout: float = 15.0) -> None:
    wait_until(predicate, timeout)


def test_the_daemon_runs_start_then_the_terminals(workspace: Path, tmp_path: Path) -> None:
    write_environment(
        workspace,
        """{
          // start must be done before the terminals run
          "start": "sleep 0.5; touch started.marker; echo start-ran",
          "terminals": [
            {"name": "web", "command": "test -f started.marker && echo saw-marker; sleep 60",
             "description": "the dev server"},
            [{"command": "echo pane-$((2+3)); sleep 60"}],
          ],
        }""",
    )
    with running_daemon(workspace, tmp_path / "state") as daemon:
        wait_for(lambda: len(list_terminals(daemon)) == 3)
        by_name = {t["name"]: t for t in list_terminals(daemon)}
        assert set(by_name) == {"start", "web", "terminal 2"}
        assert (by_name["start"]["exited"], by_name["start"]["exit_code"]) == (True, 0)
        assert by_name["web"]["description"] == "the dev server"
        assert not by_name["web"]["exited"]
        # The agent sees each terminal's output in the terminals folder.
        web_log = Path(by_name["web"]["log_path"])
        assert web_log.parent == tmp_path / "state" / "terminals"
        wait_for(lambda: b"saw-marker" in web_log.read_bytes())
        wait_for(lambda: b"pane-5" in Path(by_name["terminal 2"]["log_path"]).read_bytes())
        assert b"start-ran" in Path(by_name["start"]["log_path"]).read_bytes()


def test_a_bad_file_is_reported_and_the_daemon_still_serves(
    workspace: Path, tmp_path: Path
) -> None:
    write_environment(workspace, '{"terminals": [{"command": "sleep 60"}], "typo": 1}')
    with running_daemon(workspace, tmp_path / "state") as daemon:
        wait_for(lambda: "environment.json" in daemon.log())
        assert "unknown key 'typo' at the top level" in daemon.log()
        assert list_terminals(daemon) == []


def run_install_cli(workspace: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exec_daemon", "install", "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_install_streams_its_output_and_returns_the_exit_code(workspace: Path) -> None:
    write_environment(workspace, '{"install": "echo first; sleep 1.5; echo second >&2; exit 7"}')
    process = subprocess.Popen(
        [sys.executable, "-m", "exec_daemon", "install", "--workspace", str(workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    first_at = time.monotonic()
    assert first == "first\n"
    assert process.wait(30) == 7
    assert time.monotonic() - first_at > 1.0, "output came only at the end"
    assert process.stderr is not None
    assert "second" in process.stderr.read()


def test_install_is_safe_to_run_again_and_without_a_file(workspace: Path) -> None:
    completed = run_install_cli(workspace)
    assert completed.returncode == 0
    assert "nothing to do" in completed.stderr
    write_environment(workspace, '{"install": "echo run >> runs.txt"}')
    assert run_install_cli(workspace).returncode == 0
    assert run_install_cli(workspace).returncode == 0
    assert (workspace / "runs.txt").read_text() == "run\nrun\n"
    write_environment(workspace, '{"install": "true", "bogus": 1}')
    completed = run_install_cli(workspace)
    assert completed.returncode == 2
    assert "unknown key 'bogus'" in completed.stderr


def setup_call(command: str) -> ToolCall:
    return ToolCall(
        setup_vm_environment_tool_call=SetupVmEnvironmentToolCall(
            args=SetupVmEnvironmentArgs(install_command=command)
        )
    )


async def test_setup_vm_environment_stores_the_install_command_for_next_time(
    client: ExecDaemonClient, workspace: Path
) -> None:
    path = write_environment(
        workspace,
        '{\n  // kept\n  "terminals": [{"name": "web", "command": "npm run dev"}],\n'
        '  "install": "old"\n}',
    )
    script = "echo deps-$((1+1)) > installed.txt\necho more >> installed.txt"
    outcome = await client.run(setup_call(script + "\n"))
    assert outcome.result is not None, outcome.error
    result = outcome.result.setup_vm_environment_tool_call.result
    assert result.WhichOneof("result") == "success", result
    assert result.success.config_path == str(path)
    assert result.success.install_command == script
    stored = json.loads(path.read_text())
    assert stored == {"terminals": [{"name": "web", "command": "npm run dev"}], "install": script}
    # The next VM session's `exec-daemon install` runs it.
    assert run_install_cli(workspace).returncode == 0
    assert (workspace / "installed.txt").read_text() == "deps-2\nmore\n"


async def test_setup_vm_environment_refuses_empty_scripts_and_broken_files(
    client: ExecDaemonClient, workspace: Path
) -> None:
    outcome = await client.run(setup_call("   \n"))
    assert outcome.result is not None
    error = outcome.result.setup_vm_environment_tool_call.result.error
    assert (error.code, error.message) == (
        "invalid_argument",
        "install_command (the update_script) is empty",
    )
    path = write_environment(workspace, '{"install": "x",')
    outcome = await client.run(setup_call("npm ci"))
    assert outcome.result is not None
    error = outcome.result.setup_vm_environment_tool_call.result.error
    assert error.code == "invalid_config" and "not valid JSON" in error.message
    assert path.read_text() == '{"install": "x",'  # a person's file is never clobbered


as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs a root daemon")


@as_root
def test_start_terminals_and_install_run_as_the_files_user(workspace: Path, tmp_path: Path) -> None:
    rpc, pty = free_port(), free_port()
    write_environment(
        workspace,
        json.dumps(
            {
                "user": "nobody",
                "install": "echo install-as-$(id -un)",
                "start": "echo start-as-$(id -un)",
                "terminals": [{"name": "who", "command": "echo term-as-$(id -un); sleep 600"}],
                "ports": [{"port": 3000, "name": "web"}, {"port": rpc, "name": "api"}],
            }
        ),
    )
    completed = run_install_cli(workspace)
    assert completed.returncode == 0, completed.stderr
    assert "install-as-nobody" in completed.stdout and "as nobody" in completed.stderr
    with running_daemon(workspace, tmp_path / "state", ports=(rpc, pty)) as daemon:
        wait_for(lambda: {t["name"] for t in list_terminals(daemon)} == {"start", "who"})
        by_name = {t["name"]: t for t in list_terminals(daemon)}
        wait_for(lambda: b"start-as-nobody" in Path(by_name["start"]["log_path"]).read_bytes())
        who = by_name["who"]
        wait_for(lambda: b"term-as-nobody" in Path(who["log_path"]).read_bytes())
        # The shell left in the pane once the command is interrupted is the user's too.
        shared = who["shared"]
        tmux = ["tmux", "-S", shared["tmux_socket"], "send-keys", "-t", "=who:"]
        subprocess.run([*tmux, "C-c"], check=True, timeout=10)
        screen = Path(shared["screen_file"])
        wait_for(lambda: "a shell takes its place" in screen.read_text())
        subprocess.run([*tmux, "echo after-as-$(id -un)", "Enter"], check=True, timeout=10)
        wait_for(lambda: "after-as-nobody" in screen.read_text())
        # `ports`: one the daemon holds itself is reported at start.
        assert (
            f"environment.json port {rpc} (api) is the exec daemon's own RPC port" in daemon.log()
        )
        assert "environment.json port 3000 (web): exposed by the orchestrator" in daemon.log()


def test_an_unknown_user_runs_nothing_and_says_why(workspace: Path, tmp_path: Path) -> None:
    write_environment(
        workspace,
        '{"user": "no-such-user-x9", "install": "touch ran", "start": "touch ran",'
        ' "terminals": [{"command": "touch ran"}]}',
    )
    completed = run_install_cli(workspace)
    assert completed.returncode == 2
    assert "user 'no-such-user-x9': no such user on this machine" in completed.stderr
    with running_daemon(workspace, tmp_path / "state") as daemon:
        wait_for(lambda: "no such user" in daemon.log())
        assert "not running environment.json's start and terminals" in daemon.log()
        assert list_terminals(daemon) == []
    assert not (workspace / "ran").exists()


def test_only_a_root_daemon_switches_users(monkeypatch: pytest.MonkeyPatch) -> None:
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert account_for(me) is None and account_for(None) is None  # nothing to switch
    other = "nobody" if me != "nobody" else "root"
    monkeypatch.setattr(os, "geteuid", lambda: 12345)  # neither root nor either user
    with pytest.raises(AccountError, match="only a daemon started as root can run commands as"):
        account_for(other)
