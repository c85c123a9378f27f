"""tools/shell: sessions, streaming, limits, background shells, stdin, await, abort, bad input.

Against the real daemon and real bash. The "FM n" notes name the failure modes of peers listed
in design.md that a test covers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.v1.shell_pb2 import (
    AwaitArgs,
    AwaitToolCall,
    SandboxPolicy,
    ShellResult,
    WriteShellStdinArgs,
    WriteShellStdinToolCall,
)
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import CallOutcome, ExecDaemonClient
from exec_daemon.kernel.processes import all_processes, proc_info
from tests.daemon_process import RunningDaemon, running_daemon
from tests.polling import WAIT_SECONDS, eventually, generous
from tests.sandbox_harness import processes_with_argument
from tests.shell_calls import shell, shell_call

# An rc file that would break a prompt-scraping shell (FM 11): PS1 and PROMPT_COMMAND changed,
# output at start-up, an alias that must keep working.
RC_FILE = """
PS1='$(echo weird) \\w >>> '
PROMPT_COMMAND='echo prompt-command-ran'
echo "rc file says hello"
echo "rc file complains" >&2
alias greet='echo hello from alias'
export FROM_RC=yes
"""


@pytest.fixture(scope="module")
def shell_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("shell")
    home = root / "home"
    home.mkdir()
    (home / ".bashrc").write_text(RC_FILE)
    workspace = root / "workspace"
    workspace.mkdir()
    with running_daemon(workspace, root / "state", env={"HOME": str(home)}) as daemon:
        yield daemon


@pytest.fixture
async def client(shell_daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with shell_daemon.client() as connected:
        yield connected


@pytest.fixture
def agent(request: pytest.FixtureRequest) -> str:
    """A session of its own for every test."""
    return str(request.node.name)


async def busy_session(client: ExecDaemonClient, agent: str) -> asyncio.Task[ShellResult]:
    """The agent's session running a 2 s sleep, started for sure (the next call goes beside it)."""
    marker = f"2.{time.monotonic_ns() % 10**6:06d}"  # seconds, and unique
    busy = asyncio.create_task(shell(client, f"sleep {marker}", agent))
    await eventually(lambda: processes_with_argument(marker), what="the session to be busy")
    return busy


async def shell_outcome(
    client: ExecDaemonClient, command: str, agent: str = "", **kwargs: Any
) -> CallOutcome:
    return await client.run(shell_call(command, **kwargs), agent_id=agent)


def stdout_of(result: ShellResult) -> str:
    case = result.WhichOneof("result")
    assert case in ("success", "failure"), result
    return str(getattr(result, case).stdout)


async def write_stdin(
    client: ExecDaemonClient, shell_id: int, chars: str, close: bool = False
) -> Any:
    call = ToolCall(
        write_shell_stdin_tool_call=WriteShellStdinToolCall(
            args=WriteShellStdinArgs(shell_id=shell_id, chars=chars, close_stdin=close)
        )
    )
    outcome = await client.run(call)
    assert outcome.result is not None, outcome.error
    return outcome.result.write_shell_stdin_tool_call.result


async def await_shell(client: ExecDaemonClient, shell_id: int, **kwargs: Any) -> Any:
    call = ToolCall(await_tool_call=AwaitToolCall(args=AwaitArgs(shell_id=shell_id, **kwargs)))
    outcome = await client.run(call)
    assert outcome.result is not None, outcome.error
    return outcome.result.await_tool_call.result


def exe_name(pid: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return ""


def alive(pid: int) -> bool:
    info = proc_info(pid)
    return info is not None and info.alive


async def all_dead(pids: list[int], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(alive(pid) for pid in pids):
            return True
        await asyncio.sleep(0.02)
    return False


async def read_text(path: Path | str) -> str:
    return await asyncio.to_thread(Path(path).read_text)


async def wait_for_file(path: Path, seconds: float = WAIT_SECONDS, lines: int = 1) -> list[str]:
    def words() -> list[str]:
        return path.read_text().split() if path.exists() else []

    deadline = time.monotonic() + generous(seconds)
    while time.monotonic() < deadline:
        if len(content := await asyncio.to_thread(words)) >= lines:
            return content
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} did not get {lines} lines")


# ---------------------------------------------------------------------------------------------
# Sessions


async def test_session_keeps_cwd_variables_functions_and_aliases(
    client: ExecDaemonClient, agent: str, tmp_path: Path
) -> None:
    first = await shell(
        client,
        f"cd {tmp_path}; export EXPORTED=1; plain=2; declare -a arr=(a b); "
        "hello() { echo hello $1; }; alias hi='echo hi there'",
        agent,
    )
    assert first.WhichOneof("result") == "success"
    assert first.success.working_directory == str(tmp_path)
    second = await shell(client, "pwd; echo $EXPORTED $plain ${arr[1]}; hello you; hi", agent)
    assert stdout_of(second) == f"{tmp_path}\n1 2 b\nhello you\nhi there\n"
    assert second.success.shell_id == first.success.shell_id
    other = await shell(client, "echo ${EXPORTED:-unset}; pwd", agent + "-other")
    assert stdout_of(other).split("\n")[0] == "unset", "another agent has its own session"


async def test_empty_agent_id_is_a_session_too(client: ExecDaemonClient) -> None:
    await shell(client, "export EMPTY_AGENT_VAR=kept", "")
    assert stdout_of(await shell(client, "echo $EMPTY_AGENT_VAR", "")) == "kept\n"


async def test_session_starts_in_the_workspace(
    client: ExecDaemonClient, agent: str, shell_daemon: RunningDaemon
) -> None:
    assert stdout_of(await shell(client, "pwd", agent)) == f"{shell_daemon.workspace}\n"


async def test_rc_file_with_ps1_and_output_does_not_confuse_the_session(
    client: ExecDaemonClient, agent: str
) -> None:
    """FM 11: the rc file changes PS1/PROMPT_COMMAND and prints; the protocol does not care."""
    result = await shell(client, "echo ok; greet; echo $FROM_RC", agent)
    assert result.WhichOneof("result") == "success"
    assert result.success.stdout == "ok\nhello from alias\nyes\n"
    assert result.success.stderr == ""


async def test_exit_code_cwd_timing_pid_and_shell_id_come_back(
    client: ExecDaemonClient, agent: str
) -> None:
    result = await shell(client, "cd /; sleep 0.05; echo out; echo err >&2; (exit 3)", agent)
    failure = result.failure
    assert (failure.exit_code, failure.signal) == (3, "")
    assert failure.working_directory == "/"
    assert (failure.stdout, failure.stderr) == ("out\n", "err\n")
    assert failure.interleaved_output == "out\nerr\n"
    assert failure.execution_time >= 50
    assert failure.pid > 0 and failure.shell_id > 0
    assert (result.pid, result.shell_id) == (failure.pid, failure.shell_id)


async def test_signal_of_a_killed_command_is_reported(client: ExecDaemonClient, agent: str) -> None:
    result = await shell(client, "sleep 5 & kill -KILL $!; wait $!", agent)
    assert (result.failure.exit_code, result.failure.signal) == (137, "SIGKILL")


async def test_working_directory_overrides_the_cwd_for_one_call(
    client: ExecDaemonClient, agent: str, shell_daemon: RunningDaemon
) -> None:
    (shell_daemon.workspace / "sub").mkdir(exist_ok=True)
    await shell(client, "cd /tmp", agent)
    relative = await shell(client, "pwd", agent, working_directory="sub")
    assert stdout_of(relative) == f"{shell_daemon.workspace}/sub\n"
    absolute = await shell(client, "pwd", agent, working_directory="/usr")
    assert stdout_of(absolute) == "/usr\n"
    assert absolute.success.working_directory == "/usr"
    assert stdout_of(await shell(client, "pwd", agent)) == "/tmp\n", "back where the session was"


async def test_heredocs_and_multiline_commands(client: ExecDaemonClient, agent: str) -> None:
    """FM 12."""
    command = """cat <<'EOF'
literal $HOME "quotes" 'single'
EOF
for i in 1 2; do
  echo "line $i"
done
if true; then
  echo \\
    continued
fi
cat <<EOF2
expanded $((6 * 7))
EOF2"""
    result = await shell(client, command, agent)
    assert stdout_of(result) == (
        "literal $HOME \"quotes\" 'single'\nline 1\nline 2\ncontinued\nexpanded 42\n"
    )
    errors = await shell(client, "true\nnosuchcommand_xyz", agent)
    assert errors.failure.stderr == "bash: line 2: nosuchcommand_xyz: command not found\n"


async def test_long_commands(client: ExecDaemonClient, agent: str) -> None:
    long_value = "x" * 200_000
    result = await shell(client, f"v={long_value}; echo ${{#v}}", agent)
    assert stdout_of(result) == "200000\n"
    # The same through a one-shot shell (the session is busy with the sleep).
    busy = await busy_session(client, agent)
    sibling = await shell(client, f"v={long_value}; echo ${{#v}}", agent)
    assert stdout_of(sibling) == "200000\n"
    assert not busy.done(), "it ran beside the busy session"
    await busy


async def test_stdin_is_at_eof_and_pagers_do_not_wait(
    client: ExecDaemonClient, agent: str, tmp_path: Path
) -> None:
    """FM 7: prompts, pagers and tty readers return at once instead of wedging the shell."""
    (tmp_path / "f.txt").write_text("paged text\n")
    read = await shell(client, "read answer; echo read=$?; cat; echo cat=$?", agent, timeout=5000)
    assert stdout_of(read) == "read=1\ncat=0\n"
    git = await shell(
        client,
        f"cd {tmp_path} && git init -q && git -c user.email=a@b -c user.name=n commit -q "
        "--allow-empty -m first && git log --oneline | wc -l && less f.txt && man ls >/dev/null; "
        "echo $PAGER $GIT_PAGER",
        agent,
        timeout=10000,
    )
    assert stdout_of(git) == "1\npaged text\ncat cat\n"
    python = await shell(client, "python3 -c 'input()' 2>&1 | tail -1", agent, timeout=5000)
    assert "EOFError" in stdout_of(python)
    tty = await shell(client, "exec 3</dev/tty && echo has-tty || echo no-tty", agent)
    assert "no-tty" in stdout_of(tty)
    # A prompt or pager that waited would have been ended by its call's timeout: the outputs
    # above would then be partial.


async def test_timeout_ends_the_command_not_the_session(
    client: ExecDaemonClient, agent: str, tmp_path: Path
) -> None:
    """FM 10 and FM 2: partial output comes back, grandchildren die, cwd and variables stay."""
    earlier = await shell(
        client, f"cd {tmp_path}; export KEEP=me; plain=too; sleep 60 & echo $!", agent
    )
    server_pid = int(stdout_of(earlier))
    await asyncio.sleep(0.05)
    pids = tmp_path / "pids"
    started = time.monotonic()
    result = await shell(
        client,
        f"echo partial; echo warn >&2; bash -c 'sleep 100 & echo $! >> {pids}; sleep 100' & "
        f"echo $! >> {pids}; helper() {{ sleep 100; echo not-reached; }}; helper; echo never",
        agent,
        timeout=700,
    )
    elapsed = time.monotonic() - started
    assert result.WhichOneof("result") == "timeout"
    timeout = result.timeout
    assert timeout.timeout_ms == 700
    assert timeout.stdout == "partial\n"
    assert timeout.stderr.startswith("warn\n")
    assert timeout.working_directory == str(tmp_path)
    assert 0.7 <= elapsed < 50  # ended at the timeout, not after the 100 s sleeps
    assert await all_dead([int(pid) for pid in pids.read_text().split()])
    after = await shell(client, "pwd; echo $KEEP $plain", agent)
    assert stdout_of(after) == f"{tmp_path}\nme too\n"
    assert after.success.shell_id == timeout.shell_id, "the same session shell survived"
    assert alive(server_pid), "what an earlier call left running is not the timed-out command's"
    await shell(client, f"kill {server_pid}", agent)


async def test_a_shell_that_ignores_the_interrupt_is_replaced_keeping_its_state(
    client: ExecDaemonClient, agent: str, tmp_path: Path
) -> None:
    await shell(client, f"cd {tmp_path}; export KEEP=yes", agent)
    result = await shell(client, "trap '' USR1; while :; do :; done", agent, timeout=300)
    assert result.WhichOneof("result") == "timeout"
    after = await shell(client, "pwd; echo $KEEP", agent)
    assert stdout_of(after) == f"{tmp_path}\nyes\n"


async def test_exit_and_set_e_restart_the_session_where_it_was(
    client: ExecDaemonClient, agent: str, tmp_path: Path
) -> None:
    exited = await shell(client, f"cd {tmp_path}; export AFTER_EXIT=1; exit 4", agent)
    assert exited.failure.exit_code == 4
    assert exited.failure.shell_exited
    after = await shell(client, "pwd; echo $AFTER_EXIT", agent)
    assert stdout_of(after) == f"{tmp_path}\n1\n"
    errexit = await shell(client, "set -e; false; echo not-reached", agent)
    assert (errexit.failure.exit_code, errexit.failure.stdout) == (1, "")
    assert stdout_of(await shell(client, "echo fine", agent)) == "fine\n"


async def test_a_shell_that_dies_or_is_replaced_ends_its_call(
    client: ExecDaemonClient, agent: str, tmp_path: Path
) -> None:
    """FM 5 on the shell side: the other end of the protocol dying never leaves a call hanging."""
    await shell(client, f"cd {tmp_path}", agent)
    # A call left hanging would end at its 20 s timeout, answered `timeout`.
    killed = await shell(client, "echo before; kill -KILL $$", agent, timeout=20000)
    assert (killed.failure.signal, killed.failure.shell_exited) == ("SIGKILL", True)
    assert killed.failure.stdout == "before\n"
    replaced = await shell(client, "exec sleep 0.3", agent, timeout=20000)
    assert replaced.success.shell_exited
    # A command that replaced the shell runs until the call's timeout, then ends.
    server = await shell(client, "echo up; exec sleep 100", agent, timeout=1000)
    assert server.WhichOneof("result") == "timeout"
    assert server.timeout.stdout == "up\n"
    assert stdout_of(await shell(client, "pwd", agent)) == f"{tmp_path}\n"


async def test_a_second_call_runs_beside_a_busy_session(
    client: ExecDaemonClient, agent: str, tmp_path: Path
) -> None:
    await shell(client, f"cd {tmp_path}; export SHARED=env; fn() {{ echo fn-ok; }}", agent)
    long = await busy_session(client, agent)
    second = await shell(client, "pwd; echo $SHARED $FROM_RC; fn; greet", agent)
    assert not long.done(), "the second call did not wait for the first"
    assert stdout_of(second) == f"{tmp_path}\nenv yes\nfn-ok\nhello from alias\n"
    assert (await long).WhichOneof("result") == "success"


async def test_environment_updates_reach_running_sessions(
    client: ExecDaemonClient, agent: str
) -> None:
    from agent.v1.control_pb2 import UpdateEnvironmentVariablesRequest

    await shell(client, "true", agent)
    await client.control.update_environment_variables(
        UpdateEnvironmentVariablesRequest(env={"FROM_UPDATE": "v1 with space"}),
        headers=client.headers,
    )
    assert stdout_of(await shell(client, "echo $FROM_UPDATE", agent)) == "v1 with space\n"


# ---------------------------------------------------------------------------------------------
# Streaming


async def test_output_streams_within_50ms_in_order(client: ExecDaemonClient, agent: str) -> None:
    command = 'for i in 1 2 3 4 5 6; do echo "$i $(date +%s.%N)"; echo "e$i" >&2; sleep 0.15; done'
    latencies: list[float] = []
    stdout_parts: list[str] = []
    stderr_parts: list[str] = []
    async with client.exec_stream() as stream:
        call = await stream.start(shell_call(command), agent_id=agent)
        async for message in call:
            if message.WhichOneof("message") != "tool_call_delta":
                continue
            received = time.time()
            delta = message.tool_call_delta.shell_tool_call_delta
            if delta.WhichOneof("delta") == "stdout":
                stdout_parts.append(delta.stdout)
                for line in delta.stdout.splitlines():
                    latencies.append(received - float(line.split()[1]))
            else:
                stderr_parts.append(delta.stderr)
    result = call.outcome.result
    assert result is not None
    assert "".join(stdout_parts) == result.shell_tool_call.result.success.stdout
    assert "".join(stderr_parts) == "e1\ne2\ne3\ne4\ne5\ne6\n"
    assert [line.split()[0] for line in "".join(stdout_parts).splitlines()] == list("123456")
    assert len(latencies) == 6
    assert statistics.median(latencies) < 0.05, latencies


async def test_no_output_is_lost_between_quick_calls(client: ExecDaemonClient, agent: str) -> None:
    """The status record can overtake the output in the other pipes: nothing may be dropped."""
    for i in range(150):
        result = await shell(client, f"echo out{i}; echo err{i} >&2", agent)
        assert (result.success.stdout, result.success.stderr) == (f"out{i}\n", f"err{i}\n")


async def test_binary_and_invalid_utf8_output(client: ExecDaemonClient, agent: str) -> None:
    """FM 9."""
    result = await shell(
        client, "printf 'ok \\xff\\xfe end\\n'; head -c 20000 /dev/urandom >&2", agent
    )
    success = result.success
    assert success.stdout == "ok \ufffd\ufffd end\n"
    assert success.decoded_with_replacement
    clean = await shell(client, "printf 'caf\\xc3\\xa9\\n'", agent)
    assert clean.success.stdout == "café\n" and not clean.success.decoded_with_replacement


async def test_multibyte_characters_split_across_reads(
    client: ExecDaemonClient, agent: str
) -> None:
    result = await shell(client, "printf '\\xe2\\x82'; sleep 0.1; printf '\\xac\\n'", agent)
    assert result.success.stdout == "€\n"
    assert not result.success.decoded_with_replacement


# ---------------------------------------------------------------------------------------------
# Limits


async def test_fast_failure_ends_at_once(client: ExecDaemonClient, agent: str) -> None:
    """FM 1: exit 127 answers at once, not at the timeout; in the session and beside it."""
    started = time.monotonic()
    result = await shell(client, "no_such_command_at_all", agent, timeout=30000)
    assert result.failure.exit_code == 127
    assert time.monotonic() - started < 15  # half the call's timeout
    busy = await busy_session(client, agent)
    sibling = await shell(client, "no_such_command_at_all", agent, timeout=30000)
    assert sibling.failure.exit_code == 127
    assert not busy.done(), "the failure answered before the busy session's sleep ended"
    await busy


async def test_quiet_commands_are_not_killed_for_silence(
    client: ExecDaemonClient, agent: str
) -> None:
    """FM 6: no 'no output' heuristic."""
    result = await shell(client, "sleep 2.5; echo finally", agent, timeout=10000)
    assert stdout_of(result) == "finally\n"


async def test_background_ampersand_does_not_keep_the_call_waiting(
    client: ExecDaemonClient, agent: str, tmp_path: Path
) -> None:
    """FM 13, in the session and in a one-shot shell."""
    started = time.monotonic()
    result = await shell(client, f"sleep 30 & echo $! > {tmp_path}/a; echo started", agent)
    assert stdout_of(result) == "started\n"
    assert time.monotonic() - started < 15  # half the background sleep
    busy = await busy_session(client, agent)
    sibling = await shell(client, f"sleep 30 & echo $! > {tmp_path}/b; echo sib", agent)
    assert stdout_of(sibling) == "sib\n"
    assert not busy.done(), "the sibling answered before the busy session's sleep ended"
    await busy
    pids = [int((tmp_path / name).read_text()) for name in ("a", "b")]
    assert all(alive(pid) for pid in pids), "background jobs keep running after the call"
    await shell(client, f"kill {pids[0]} {pids[1]}", agent)


async def test_huge_output_is_capped_spilled_and_keeps_stderr(
    client: ExecDaemonClient, agent: str
) -> None:
    """FM 8 and FM 15: memory holds head + tail, the file holds everything, stderr survives."""
    command = (
        "echo FIRST-LINE; echo early-error >&2; head -c 6000000 /dev/zero | tr '\\0' a; echo; "
        "echo late-error >&2; echo LAST-LINE"
    )
    result = await shell(client, command, agent, timeout=60000)
    success = result.success
    assert success.stdout.startswith("FIRST-LINE\n")
    assert success.stdout.endswith("LAST-LINE\n")
    assert len(success.stdout) < 1_200_000
    assert "cut here" in success.stdout
    assert success.stderr == "early-error\nlate-error\n"
    assert "stdout: 6000022 bytes" in success.truncation_note
    location = success.output_location
    assert location.size_bytes == 6000022 + len("early-error\nlate-error\n")
    spilled = await asyncio.to_thread(Path(location.file_path).read_bytes)
    assert len(spilled) == location.size_bytes
    # Per stream in order (stdout and stderr are two pipes: their mutual order is a race).
    assert spilled.startswith(b"FIRST-LINE\n") and b"\nLAST-LINE\n" in spilled[-40:]
    assert spilled.count(b"a") == 6_000_000 + 2  # and the "a" of "early-error" and "late-error"


async def test_stderr_flood_does_not_push_out_stdout_or_the_end(
    client: ExecDaemonClient, agent: str
) -> None:
    result = await shell(client, "echo keep-me; seq 1 300000 >&2; echo final-error >&2", agent)
    success = result.success
    assert success.stdout == "keep-me\n"
    assert success.stderr.startswith("1\n2\n") and success.stderr.endswith("final-error\n")
    assert "stderr:" in success.truncation_note


async def test_file_output_threshold(client: ExecDaemonClient, agent: str) -> None:
    """The inline answer stops at the threshold and names the file holding everything."""
    everything = "".join(f"{i}\n" for i in range(1, 20001))
    result = await shell(client, "seq 1 20000", agent, file_output_threshold_bytes=1000)
    success = result.success
    location = success.output_location
    assert await read_text(location.file_path) == everything
    assert location.size_bytes == len(everything)
    for inline in (success.stdout, success.interleaved_output):
        head, marker, tail = inline.partition("\n[exec-daemon: ")
        assert marker and len(head) + len(tail.partition("]\n")[2]) <= 1000, len(inline)
        assert everything.startswith(head) and inline.endswith("19999\n20000\n"), inline[-100:]
        assert location.file_path in tail, inline
    assert location.file_path in success.truncation_note
    # Output within the threshold stays whole, without a file.
    fits = await shell(client, "seq 1 100", agent, file_output_threshold_bytes=1000)
    assert fits.success.stdout == "".join(f"{i}\n" for i in range(1, 101))
    small = await shell(client, "echo small", agent)
    assert not small.success.HasField("output_location")


# ---------------------------------------------------------------------------------------------
# Background shells, stdin, await


async def test_background_returns_at_once_and_keeps_its_exit_code(
    client: ExecDaemonClient, agent: str, shell_daemon: RunningDaemon, tmp_path: Path
) -> None:
    """FM 3: addressable by id, output in a file while nobody listens, exit code kept."""
    go = tmp_path / "go"
    # The command cannot end before the test lets it: the call must answer before that.
    command = f"echo hi; until [ -e {go} ]; do sleep 0.02; done; echo bye >&2; exit 3"
    async with shell_daemon.client() as other:
        result = await shell(other, command, agent, is_background=True)
    go.touch()
    assert result.is_background and result.shell_id and result.pid
    assert result.terminals_folder == str(shell_daemon.state_dir / "terminals")
    output_file = Path(result.output_file)
    assert output_file.parent == shell_daemon.state_dir / "terminals"
    assert output_file.name == f"shell-{result.shell_id}.log"
    # The connection that started it is gone; another one awaits it.
    waited = await await_shell(client, result.shell_id, timeout_ms=5000)
    assert waited.success.exited and waited.success.exit_code == 3
    assert await read_text(output_file) == "hi\nbye\n"
    assert waited.success.output_tail == "hi\nbye\n"
    again = await await_shell(client, result.shell_id, timeout_ms=0)
    assert again.success.exited and again.success.exit_code == 3
    meta = json.loads(await read_text(output_file.with_suffix(".json")))
    assert (meta["exit_code"], meta["running"], meta["pid"]) == (3, False, result.pid)


async def test_background_starts_from_the_session_state(
    client: ExecDaemonClient, agent: str, tmp_path: Path
) -> None:
    await shell(client, f"cd {tmp_path}; export BG_VAR=inherited", agent)
    result = await shell(client, "pwd; echo $BG_VAR", agent, is_background=True)
    waited = await await_shell(client, result.shell_id, timeout_ms=5000)
    assert waited.success.exit_code == 0
    assert await read_text(result.output_file) == f"{tmp_path}\ninherited\n"


async def test_await_pattern_and_timeout(client: ExecDaemonClient, agent: str) -> None:
    result = await shell(
        client, "echo starting; sleep 0.3; echo 'server READY on 8080'; sleep 30", agent,
        is_background=True,
    )  # fmt: skip
    matched = await await_shell(client, result.shell_id, pattern=r"READY on (\d+)", timeout_ms=5000)
    assert matched.success.matched and not matched.success.exited
    assert matched.success.matched_text == "READY on 8080"
    timed_out = await await_shell(client, result.shell_id, timeout_ms=200)
    assert timed_out.success.timed_out and not timed_out.success.exited
    assert 150 <= timed_out.success.waited_ms < 2000
    await shell(client, f"kill -- -{result.pid}", agent)
    ended = await await_shell(client, result.shell_id, timeout_ms=5000)
    assert ended.success.exited and ended.success.signal == "SIGTERM"


async def test_write_stdin_to_a_background_shell(client: ExecDaemonClient, agent: str) -> None:
    result = await shell(
        client, "read line; echo got:$line; cat; echo cat-done", agent, is_background=True
    )
    written = await write_stdin(client, result.shell_id, "hello\n")
    assert written.success.bytes_written == 6
    await write_stdin(client, result.shell_id, "rest of it\n", close=True)
    waited = await await_shell(client, result.shell_id, timeout_ms=5000)
    assert waited.success.exit_code == 0
    assert await read_text(result.output_file) == "got:hello\nrest of it\ncat-done\n"
    closed = await write_stdin(client, result.shell_id, "late")
    assert closed.WhichOneof("result") == "error"
    assert "exited" in closed.error.message


async def test_interactive_call_announces_its_shell_and_takes_stdin(
    client: ExecDaemonClient, agent: str
) -> None:
    async with client.exec_stream() as stream:
        call = await stream.start(
            shell_call("read a; echo first:$a; read b; echo second:$b", is_interactive=True),
            agent_id=agent,
        )
        first = await call.__aiter__().__anext__()
        started = first.tool_call_delta.shell_tool_call_delta.started
        assert started.shell_id and started.pid
        await write_stdin(client, started.shell_id, "one\n")
        waiter = await await_shell(client, started.shell_id, pattern="first:one", timeout_ms=5000)
        assert waiter.success.matched
        await write_stdin(client, started.shell_id, "two\n")
        outcome = await call.wait()
    assert outcome.result is not None
    assert outcome.result.shell_tool_call.result.success.stdout == "first:one\nsecond:two\n"


async def test_abort_ends_the_whole_process_group(
    client: ExecDaemonClient, agent: str, tmp_path: Path
) -> None:
    """FM 2 and FM 4: abort kills grandchildren; the partial output is answered."""
    pids = tmp_path / "pids"
    command = (
        f"echo before-abort; bash -c 'sleep 100 & echo $! >> {pids}; sleep 100' & "
        f"echo $! >> {pids}; sleep 100"
    )
    async with client.exec_stream() as stream:
        call = await stream.start(shell_call(command), agent_id=agent)
        await wait_for_file(pids, lines=2)
        await stream.abort(call.id)
        outcome = await call.wait()
    assert outcome.result is not None
    aborted = outcome.result.shell_tool_call.result
    assert aborted.WhichOneof("result") == "aborted"
    assert aborted.aborted.stdout == "before-abort\n"
    assert await all_dead([int(pid) for pid in pids.read_text().split()])
    assert stdout_of(await shell(client, "echo session-alive", agent)) == "session-alive\n"


async def test_client_disconnect_ends_the_command(
    shell_daemon: RunningDaemon, agent: str, tmp_path: Path
) -> None:
    """FM 4 and FM 5: a client that goes away leaves nothing running (unless background)."""
    pids = tmp_path / "pids"
    async with shell_daemon.client() as client:
        stream = client.exec_stream()
        await stream.__aenter__()
        await stream.start(shell_call(f"sleep 100 & echo $! >> {pids}; sleep 100"), agent_id=agent)
        await stream.start(
            shell_call(f"sleep 100 & echo $! >> {pids}; sleep 100"), agent_id=agent, call_id=9
        )
        await wait_for_file(pids, lines=2)
        assert stream._reader is not None
        stream._reader.cancel()
    # The HTTP connection is closed with the client: the daemon cancels the calls.
    assert await all_dead([int(pid) for pid in pids.read_text().split()], seconds=8)


async def test_abort_while_the_session_starts_leaves_no_shell(tmp_path: Path) -> None:
    """An rc file that takes a while: the call is aborted before the session is ready."""
    home = tmp_path / "home"
    home.mkdir()
    rc_sleep = f"0.6{time.monotonic_ns() % 10**6:06d}"  # seconds, and unique
    (home / ".bashrc").write_text(f"sleep {rc_sleep}\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with running_daemon(workspace, tmp_path / "state", env={"HOME": str(home)}) as daemon:
        async with daemon.client() as client, client.exec_stream() as stream:
            call = await stream.start(shell_call("echo never"), agent_id="slow")
            # The session's bash is reading its rc file.
            await eventually(lambda: processes_with_argument(rc_sleep), what="the rc file to run")
            await stream.abort(call.id)
            outcome = await call.wait()
            assert outcome.result is not None
            assert outcome.result.shell_tool_call.result.WhichOneof("result") == "aborted"
        daemon_pid = daemon.process.pid

        def shells() -> list[int]:
            return [
                info.pid
                for info in all_processes()
                if info.ppid == daemon_pid and info.alive and exe_name(info.pid) == "bash"
            ]

        deadline = time.monotonic() + 3
        while shells() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert shells() == []


async def test_idle_sessions_beyond_the_limit_close_and_restart_where_they_were(
    tmp_path: Path,
) -> None:
    from tools.shell.service import MAX_LIVE_SESSIONS

    workspace = tmp_path / "ws"
    workspace.mkdir()
    with running_daemon(workspace, tmp_path / "state", env={"HOME": str(tmp_path)}) as daemon:
        async with daemon.client() as client:
            first = await shell(client, f"cd {tmp_path}; export FIRST=kept; echo $$", "agent-0")
            first_pid = int(first.success.stdout)
            for number in range(1, MAX_LIVE_SESSIONS + 2):
                await shell(client, "true", f"agent-{number}")
            daemon_pid = daemon.process.pid

            def session_shells() -> list[int]:
                return [
                    info.pid
                    for info in all_processes()
                    if info.ppid == daemon_pid and info.alive and exe_name(info.pid) == "bash"
                ]

            deadline = time.monotonic() + 5
            while len(session_shells()) > MAX_LIVE_SESSIONS and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert len(session_shells()) == MAX_LIVE_SESSIONS
            assert not alive(first_pid), "the least recently used session was closed"
            again = await shell(client, "pwd; echo $FIRST", "agent-0")
            assert stdout_of(again) == f"{tmp_path}\nkept\n"


async def test_shutdown_ends_every_shell(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    pids = tmp_path / "pids"
    with running_daemon(workspace, tmp_path / "state") as daemon:
        async with daemon.client() as client:
            background = await shell(
                client, f"sleep 100 & echo $! >> {pids}; sleep 100", is_background=True
            )
            running = asyncio.create_task(
                shell(client, f"sleep 100 & echo $! >> {pids}; sleep 100")
            )
            await wait_for_file(pids, lines=2)
            # stop() fails if the daemon is not gone within SHUTDOWN_SECONDS.
            assert daemon.stop(signal.SIGTERM) == 0
            running.cancel()
    assert await all_dead([background.pid, *(int(pid) for pid in pids.read_text().split())])


# ---------------------------------------------------------------------------------------------
# Bad input


async def test_bad_input_gets_typed_answers_and_the_session_survives(
    client: ExecDaemonClient, agent: str, tmp_path: Path
) -> None:
    assert stdout_of(await shell(client, "export BEFORE=1", agent)) == ""
    empty = await shell(client, "  \n ", agent)
    assert "empty command" in empty.spawn_error.reason
    nul = await shell(client, "echo a\0b", agent)
    assert "NUL" in nul.spawn_error.reason
    missing = await shell(client, "pwd", agent, working_directory=str(tmp_path / "nope"))
    assert missing.spawn_error.reason == f"working directory {tmp_path / 'nope'} does not exist"
    (tmp_path / "file").write_text("")
    not_dir = await shell(client, "pwd", agent, working_directory=str(tmp_path / "file"))
    assert "is not a directory" in not_dir.spawn_error.reason
    zero = await shell(client, "true", agent, timeout=0)
    assert "between 1 and 600000" in zero.rejected.reason
    too_long = await shell(client, "true", agent, timeout=600001)
    assert "above the maximum" in too_long.rejected.reason
    longest = await shell(client, "true", agent, timeout=600000)
    assert longest.WhichOneof("result") == "success"
    assert stdout_of(await shell(client, "echo $BEFORE", agent)) == "1\n"


async def test_unknown_shell_ids_and_bad_await_arguments(
    client: ExecDaemonClient, agent: str
) -> None:
    stdin = await write_stdin(client, 999_999, "x")
    assert stdin.shell_not_found.shell_id == 999_999
    waited = await await_shell(client, 999_999, timeout_ms=10)
    assert waited.WhichOneof("result") == "shell_not_found"
    session = await shell(client, "true", agent)
    to_session = await write_stdin(client, session.shell_id, "x")
    assert "stdin at EOF" in to_session.error.message
    background = await shell(client, "sleep 0.2", agent, is_background=True)
    bad_regex = await await_shell(client, background.shell_id, pattern="(unclosed")
    assert bad_regex.error.code == "invalid_argument"
    too_long = await await_shell(client, background.shell_id, timeout_ms=600_001)
    assert too_long.WhichOneof("result") == "rejected"


# ---------------------------------------------------------------------------------------------
# Sandbox policy


async def test_requested_sandbox_policy_is_carried_into_the_result(
    client: ExecDaemonClient, agent: str
) -> None:
    """Every kind of answer says which policy applies (the sandbox reports the effective one:
    without --sandbox-enabled the command runs unconfined and the policy says so)."""
    policy = SandboxPolicy(
        type=SandboxPolicy.TYPE_WORKSPACE_READWRITE,
        network_access=True,
        additional_readonly_paths=["/opt"],
    )
    for kwargs in ({}, {"is_background": True}, {"timeout": 0}):
        result = await shell(client, "echo x", agent, requested_sandbox_policy=policy, **kwargs)
        assert result.HasField("sandbox_policy"), kwargs
        assert result.sandbox_policy.network_access
    plain = await shell(client, "echo x", agent)
    assert not plain.HasField("sandbox_policy")


async def test_pid_of_session_is_the_session_bash(client: ExecDaemonClient, agent: str) -> None:
    result = await shell(client, "echo $$", agent)
    assert int(result.success.stdout) == result.success.pid
    info = proc_info(result.success.pid)
    assert info is not None and info.sid == result.success.pid
    assert os.path.basename(os.readlink(f"/proc/{result.success.pid}/exe")) == "bash"


# Many agents' shells starting at once (a slow ~/.bashrc): none is degraded, or it says so.

# About a CPU-second of bash per start: 20 at once on two cores would take longer than a
# start may (session.STARTUP_SECONDS) if they all ran together.
SLOW_RC_FILE = "for ((i = 0; i < 450000; i++)); do :; done\nexport FROM_SLOW_RC=yes\n"
CONCURRENT_SHELLS = 20


async def test_many_shells_starting_at_once_all_source_the_rc_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text(SLOW_RC_FILE)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with running_daemon(workspace, tmp_path / "state", env={"HOME": str(home)}) as daemon:
        async with daemon.client() as client:
            answers = await asyncio.gather(
                *(
                    shell(client, "echo $FROM_SLOW_RC", f"agent-{n}", timeout=120_000)
                    for n in range(CONCURRENT_SHELLS)
                )
            )
    degraded = [a.degraded_note for a in answers if a.degraded_note]
    assert degraded == []
    assert [a.success.stdout for a in answers] == ["yes\n"] * CONCURRENT_SHELLS
    assert "starting it without" not in daemon.log()


async def test_a_shell_started_without_its_rc_file_says_so_in_every_result(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("export FROM_RC=yes\nexit 3\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with running_daemon(workspace, tmp_path / "state", env={"HOME": str(home)}) as daemon:
        async with daemon.client() as client:
            first = await shell(client, "echo ran:$FROM_RC", "agent")
            second = await shell(client, "echo again", "agent")
            beside = await shell(client, "echo beside", "agent", is_background=True)
    assert first.success.stdout == "ran:\n"
    assert second.success.stdout == "again\n"
    for answer in (first, second, beside):
        assert f"started without {home}/.bashrc" in answer.degraded_note
        assert "exit status 3" in answer.degraded_note
