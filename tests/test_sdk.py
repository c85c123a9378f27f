"""The Python SDK (exec_daemon/sdk/) against the real daemon: every verb, sync and async, its
typed errors, the token found as `./scripts/serve` keeps it, and a daemon killed mid-call."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.v1 import agent_pb2, files_pb2
from agent.v1.control_pb2 import GetDiffRequest
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient, TokenNotFound, find_token
from exec_daemon.sdk import (
    Aborted,
    ConnectionLost,
    InvalidArgument,
    NeedsApproval,
    NotFound,
    PermissionDenied,
    Rejected,
    Sandbox,
    Timeout,
    ToolFailed,
    Unauthenticated,
    Unavailable,
    connect,
    connect_async,
)
from exec_daemon.sdk.aio import as_tool_call
from tests.daemon_process import RunningDaemon, free_port, running_daemon
from tests.polling import wait_until


def git(workspace: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(workspace), *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("sdk")
    workspace = root / "workspace"
    workspace.mkdir()
    git(workspace, "init", "-q")
    (workspace / "README.md").write_text("hello\n")
    (workspace / "AGENTS.md").write_text("Run the tests with pytest.\n")
    git(workspace, "add", ".")
    git(workspace, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    with running_daemon(workspace, root / "state") as running:
        yield running


def pty_url(daemon: RunningDaemon) -> str:
    return f"ws://127.0.0.1:{daemon.pty_port}"


@pytest.fixture(scope="module")
def sandbox(daemon: RunningDaemon) -> Iterator[Sandbox]:
    with connect(daemon.url, daemon.token, pty_url=pty_url(daemon)) as connected:
        yield connected


# -- the token ---------------------------------------------------------------------------------


def test_the_token_comes_from_the_argument_the_environment_or_serves_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EXEC_DAEMON_AUTH_TOKEN", raising=False)
    nested = tmp_path / "repo" / "src"
    nested.mkdir(parents=True)
    with pytest.raises(TokenNotFound, match="no token"):
        find_token(start=nested)
    kept = tmp_path / "repo" / ".exec-daemon-token"
    kept.write_text("from-the-file\n")
    kept.chmod(0o644)
    with pytest.raises(TokenNotFound, match="chmod 600"):
        find_token(start=nested)
    kept.chmod(0o600)
    assert find_token(start=nested) == "from-the-file"  # found in a folder above
    monkeypatch.setenv("EXEC_DAEMON_AUTH_TOKEN", "from-the-env")
    assert find_token(start=nested) == "from-the-env"
    assert find_token("given", start=nested) == "given"


def test_connect_finds_the_token_file_in_the_current_folder(
    daemon: RunningDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EXEC_DAEMON_AUTH_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Unauthenticated, match="no token"):
        connect(daemon.url)
    kept = tmp_path / ".exec-daemon-token"
    kept.write_text(daemon.token + "\n")
    kept.chmod(0o600)
    with connect(daemon.url.removeprefix("http://")) as found:
        assert found.ping().workspace == str(daemon.workspace)


def test_a_wrong_token_and_no_daemon_are_typed(daemon: RunningDaemon) -> None:
    with pytest.raises(Unauthenticated):
        connect(daemon.url, "wrong-token")
    with pytest.raises(Unavailable):
        connect(f"http://127.0.0.1:{free_port()}", "any")


async def test_every_control_rpc_of_the_low_level_client_carries_the_token(
    daemon: RunningDaemon,
) -> None:
    # The module's other tests change the workspace too, in any order (pytest-randomly): the
    # answer is known to hold this test's own change, not to be empty.
    changed = f"token-check-{secrets.token_hex(4)}.txt"
    (daemon.workspace / changed).write_text("changed\n")
    async with ExecDaemonClient(daemon.url, daemon.token) as client:
        answer = await client.control.get_diff(GetDiffRequest())  # no headers= by hand
        assert f"b/{changed}" in answer.diff


# -- shell -------------------------------------------------------------------------------------


def test_run_returns_exit_code_and_output_and_streams_it(sandbox: Sandbox) -> None:
    printed: list[str] = []
    ok = sandbox.shell.run("echo one; echo two >&2", on_stdout=printed.append)
    assert (ok.exit_code, ok.stdout, ok.stderr, ok.spill) == (0, "one\n", "two\n", None)
    assert "".join(printed) == "one\n"
    failed = sandbox.shell.run("exit 3")
    assert failed.exit_code == 3 and not failed.ok
    here = sandbox.shell.run("pwd", cwd=".git")
    assert here.stdout.strip().endswith("/.git")
    with_env = sandbox.shell.run('echo "$GREETING"', env={"GREETING": "hi"})
    assert with_env.stdout == "hi\n"
    with pytest.raises(InvalidArgument, match="above the maximum"):
        sandbox.shell.run("true", timeout=601)
    with pytest.raises(InvalidArgument, match="not a shell variable name"):
        sandbox.shell.run("true", env={"NOT-A-NAME": "x"})


def test_run_raises_timeout_with_the_output_so_far(sandbox: Sandbox) -> None:
    with pytest.raises(Timeout) as raised:
        sandbox.shell.run("echo started; sleep 30", timeout=1)
    assert raised.value.stdout == "started\n"


def test_a_long_output_spills_to_a_file_that_downloads(sandbox: Sandbox, tmp_path: Path) -> None:
    result = sandbox.shell.run("head -c 700000 /dev/zero | tr '\\0' a")
    assert result.spill is not None and result.truncation_note
    local = tmp_path / "spill"
    assert sandbox.files.download(result.spill, local) == 700_000
    assert local.read_bytes() == b"a" * 700_000


def test_a_call_outside_the_allowlist_needs_approval(sandbox: Sandbox) -> None:
    with pytest.raises(NeedsApproval) as raised:
        sandbox.shell.run("touch approved.txt", run_mode="allowlist")
    assert "terminalAllowlist" in raised.value.message
    assert raised.value.details.needs_approval
    assert sandbox.shell.run("touch approved.txt", run_mode="run_everything").ok
    with pytest.raises(InvalidArgument):
        sandbox.shell.run("true", run_mode="whatever")


def test_start_gives_a_handle_to_write_to_wait_for_and_abort(sandbox: Sandbox) -> None:
    seen: list[str] = []
    handle = sandbox.shell.start("read line; echo got $line; cat", on_stdout=seen.append)
    assert handle.write_stdin("first\n") == len("first\n")
    wait_until(lambda: "got first" in handle.output().stdout, what="the echo of the first line")
    handle.write_stdin("second\n", close=True)
    result = handle.wait(timeout=60)
    assert result.stdout == "got first\nsecond\n" and result.exit_code == 0
    assert "".join(seen) == result.stdout
    with pytest.raises(NotFound):
        handle.write_stdin("late\n")
    sleeper = sandbox.shell.start("echo up; sleep 60")
    wait_until(lambda: sleeper.output().stdout == "up\n", what="the sleeper's first line")
    sleeper.abort()
    with pytest.raises(Aborted):
        sleeper.wait(timeout=60)


# -- files, git, context, mcp ------------------------------------------------------------------


def test_files_round_trip(sandbox: Sandbox, daemon: RunningDaemon, tmp_path: Path) -> None:
    assert sandbox.files.write("notes/a.txt", "one\ntwo\n") == 8
    assert sandbox.files.read("notes/a.txt") == "one\ntwo\n"
    edited = sandbox.files.edit("notes/a.txt", "two", "three")
    assert "+three" in edited.diff
    with pytest.raises(ToolFailed) as no_match:
        sandbox.files.edit("notes/a.txt", "absent", "x")
    assert no_match.value.code == "no_match"
    assert [entry.name for entry in sandbox.files.list("notes")] == ["a.txt"]
    assert sandbox.files.glob("**/a.txt") == ["notes/a.txt"]
    matches = sandbox.files.grep("thr", "notes")
    assert matches.matches[0].lines[0].content == "three"
    with pytest.raises(InvalidArgument):
        sandbox.files.grep("(unclosed")
    sandbox.files.write("notes/raw.bin", bytes(range(256)))
    assert sandbox.files.read_bytes("notes/raw.bin") == bytes(range(256))
    sandbox.files.delete("notes/a.txt")
    assert not (daemon.workspace / "notes" / "a.txt").exists()
    with pytest.raises(NotFound):
        sandbox.files.delete("notes/a.txt")
    with pytest.raises(NotFound):
        sandbox.files.read("notes/a.txt")


def test_files_larger_than_a_window_go_in_windows(daemon: RunningDaemon, tmp_path: Path) -> None:
    data = os.urandom(300_000)
    local = tmp_path / "big.bin"
    local.write_bytes(data)
    text = "line of text\n" * 30_000
    with connect(daemon.url, daemon.token, chunk_bytes=64 * 1024) as small_windows:
        assert small_windows.files.upload(local, "big/upload.bin") == len(data)
        assert (daemon.workspace / "big" / "upload.bin").read_bytes() == data
        assert small_windows.files.download("big/upload.bin", tmp_path / "back") == len(data)
        assert (tmp_path / "back").read_bytes() == data
        assert small_windows.files.write("big/text.txt", text) == len(text)
        assert small_windows.files.read("big/text.txt") == text
        assert small_windows.files.read_bytes("big/upload.bin") == data


def test_git_diff_and_changes_hash_follow_the_workspace(sandbox: Sandbox) -> None:
    before = sandbox.git.changes_hash()
    sandbox.files.edit("README.md", "hello", "hello, world")
    assert "+hello, world" in sandbox.git.diff()
    assert sandbox.git.changes_hash() != before
    sandbox.files.edit("README.md", "hello, world", "hello")


def test_context_and_mcp_tools(sandbox: Sandbox) -> None:
    rules = sandbox.context(["README.md"]).rules
    assert any("Run the tests with pytest." in rule.content for rule in rules)
    assert sandbox.mcp.tools() == []


def test_call_runs_any_tool_and_types_its_refusals(sandbox: Sandbox) -> None:
    read = sandbox.call(files_pb2.ReadToolArgs(path="README.md"))
    assert read.ranges[0].contents == "hello"
    wrapped = ToolCall(ls_tool_call=files_pb2.LsToolCall(args=files_pb2.LsArgs(path=".")))
    assert sandbox.call(wrapped, check=False).WhichOneof("result") == "success"
    pid = sandbox.ping().pid
    with pytest.raises(PermissionDenied):
        sandbox.call(files_pb2.ReadToolArgs(path=f"/proc/{pid}/environ"))
    with pytest.raises(PermissionDenied, match="protected path"):
        sandbox.call(files_pb2.EditArgs(path=".git/hooks/pre-commit", contents="x"))
    task = agent_pb2.TaskArgs(description="look around", readonly=True)
    reader = sandbox.call(task).agent_id
    with pytest.raises(Rejected) as refused:
        sandbox.call(files_pb2.EditArgs(path="mine.txt", contents="x"), agent_id=reader)
    assert not isinstance(refused.value, NeedsApproval)
    assert refused.value.details.source == "readonly_agent"
    with pytest.raises(InvalidArgument):
        sandbox.call(GetDiffRequest())


def test_every_tool_call_variant_can_be_called_by_its_args() -> None:
    variants = ToolCall.DESCRIPTOR.oneofs_by_name["tool"].fields
    assert len(variants) == 36
    for variant in variants:
        args_class = getattr(ToolCall(), variant.name).args.__class__
        assert as_tool_call(args_class()).WhichOneof("tool") == variant.name


# -- terminals ---------------------------------------------------------------------------------


def test_a_terminal_takes_input_and_reports_its_exit(
    sandbox: Sandbox, daemon: RunningDaemon
) -> None:
    terminal = sandbox.terminals.open("bash --norc --noprofile", cols=100, rows=30)
    assert terminal.id
    terminal.send("echo $((6 * 7))\n")
    seen = b""
    while b"42\r\n" not in seen:
        seen += terminal.read(timeout=30)
    terminal.resize(120, 40)
    terminal.send("exit 5\n")
    while terminal.read(timeout=30):
        pass
    assert terminal.exit_code == 5
    with (
        connect(daemon.url, daemon.token) as wrong_port,
        pytest.raises(Unavailable),
    ):
        wrong_port.aio.pty_url = f"ws://127.0.0.1:{free_port()}"
        wrong_port.terminals.open()


# -- async ---------------------------------------------------------------------------------------


async def test_the_async_sdk_has_the_same_shape(daemon: RunningDaemon) -> None:
    async with await connect_async(daemon.url, daemon.token) as sandbox:
        printed: list[str] = []

        async def collect(text: str) -> None:
            printed.append(text)

        result = await sandbox.shell.run("echo async", on_stdout=collect)
        assert result.stdout == "async\n" and printed == ["async\n"]
        await sandbox.files.write("async.txt", "a\n")
        await sandbox.files.edit("async.txt", "a", "b")
        assert "+b" in await sandbox.git.diff()
        handle = await sandbox.shell.start("sleep 60")
        await handle.abort()
        with pytest.raises(Aborted):
            await handle.wait()
        # A cancelled wait aborts the command on the daemon.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(sandbox.shell.run("sleep 60"), 1)
        assert (await sandbox.shell.run("echo still here")).stdout == "still here\n"


# -- a daemon that goes away -------------------------------------------------------------------


def run_in_thread(function: Any) -> tuple[threading.Thread, list[BaseException | object]]:
    outcome: list[BaseException | object] = []

    def target() -> None:
        try:
            outcome.append(function())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def test_a_daemon_killed_mid_call_fails_it_typed_and_the_next_call_reconnects(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    ports = (free_port(), free_port())
    with running_daemon(workspace, tmp_path / "state", ports=ports) as first:
        token = first.token
        sandbox = connect(first.url, token)
        handle = sandbox.shell.start("echo running; sleep 120")
        wait_until(lambda: handle.output().stdout == "running\n", what="the call running")
        thread, outcome = run_in_thread(lambda: handle.wait())
        first.process.send_signal(signal.SIGKILL)
        thread.join(60)
        assert not thread.is_alive(), "the pending call hung"
        assert isinstance(outcome[0], ConnectionLost), outcome
        with pytest.raises(Unavailable):
            sandbox.shell.run("echo nobody there")
    try:
        with running_daemon(workspace, tmp_path / "state2", token=token, ports=ports):
            assert sandbox.shell.run("echo back").stdout == "back\n"
    finally:
        sandbox.close()


def test_a_silent_daemon_fails_the_pending_call_instead_of_hanging(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    with connect(daemon.url, daemon.token, heartbeat_timeout=2.0) as watched:
        handle = watched.shell.start("echo running; sleep 60")
        wait_until(lambda: handle.output().stdout == "running\n", what="the call running")
        daemon.process.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(ConnectionLost, match="no word from the daemon"):
                handle.wait(timeout=60)
        finally:
            daemon.process.send_signal(signal.SIGCONT)
        assert watched.shell.run("echo awake").stdout == "awake\n"
