"""Secret redaction (exec_daemon/guards/redaction.py): no injected secret reaches a client."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from google.protobuf import struct_pb2
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from agent.v1.control_pb2 import (
    GetDiffRequest,
    ReadBinaryFileRequest,
    ReadTextFileRequest,
    ReadTextFileResponse,
    UpdateEnvironmentVariablesRequest,
)
from agent.v1.mcp_pb2 import McpArgs
from agent.v1.web_pb2 import FetchArgs, FetchSuccess
from exec_daemon.client import CallOutcome, ExecDaemonClient
from exec_daemon.guards.redaction import (
    REDACTED,
    SECRET_NAMES_VARIABLE,
    SecretMatcher,
    StreamRedactor,
    redact_message,
)
from exec_daemon.kernel.errors import CodedError
from tests.daemon_process import RunningDaemon, running_daemon
from tests.guards_support import (
    PYTHON,
    GuardedDispatcher,
    bash_one_byte_per_delta,
    call,
    case,
    fails_with_message,
    hook_script,
    result_of,
    shell,
    shell_output,
    write_config,
)
from tests.workspace_support import write_call
from tools import files

SECRET_A = "sk-live-4f9c2e7a1b3d5f60"
SECRET_B = "ghp_Zq8XkLm2Np4Rt6Vw"
# Contains SECRET_C: the longer one must win where both match.
SECRET_C = "ghp_Zq8X"
SHORT = "abc"
SECRET_ENV = {
    "SECRET_A": SECRET_A,
    "SECRET_B": SECRET_B,
    "SECRET_C": SECRET_C,
    "SECRET_SHORT": SHORT,
    SECRET_NAMES_VARIABLE: "SECRET_A, SECRET_B,SECRET_C,SECRET_SHORT,NOT_SET",
}
ALL_SECRETS = (SECRET_A, SECRET_B, SECRET_C)


def assert_clean(outcome: CallOutcome, *secrets: str) -> None:
    """Nothing the client received, deltas or answer or error, holds a secret's bytes."""
    received = b"".join(d.SerializeToString() for d in outcome.deltas)
    if outcome.result is not None:
        received += outcome.result.SerializeToString()
    if outcome.error is not None:
        received += outcome.error.SerializeToString()
    for secret in secrets or ALL_SECRETS:
        assert secret.encode() not in received


# --- the matcher ---------------------------------------------------------------------------------


def test_longest_secret_wins_and_values_under_4_chars_are_skipped() -> None:
    matcher = SecretMatcher([SECRET_A, SECRET_B, SECRET_C, SHORT])
    text = f"a={SECRET_B} c={SECRET_C}x abc {SECRET_A}"
    assert matcher.redact(text) == f"a={REDACTED} c={REDACTED}x abc {REDACTED}"
    assert matcher.redact("nothing here") == "nothing here"


def test_stream_redaction_equals_whole_text_redaction_however_the_text_is_split() -> None:
    rng = random.Random(7)
    for _ in range(400):
        secrets = ["".join(rng.choice("abxy") for _ in range(rng.randint(4, 9))) for _ in range(3)]
        matcher = SecretMatcher(secrets)
        text = "".join(rng.choice("abxyz") for _ in range(rng.randint(0, 80)))
        stream = StreamRedactor()
        pieces = []
        position = 0
        while position < len(text):
            size = rng.randint(1, 6)
            pieces.append(stream.feed(matcher, text[position : position + size]))
            position += size
        pieces.append(stream.flush(matcher))
        assert "".join(pieces) == matcher.redact(text), (secrets, text)


def test_only_a_possible_secret_prefix_is_held_back() -> None:
    matcher = SecretMatcher([SECRET_A])
    stream = StreamRedactor()
    # "sk-li" could still become the secret: held; "done\n" could not: sent at once.
    assert stream.feed(matcher, "out: sk-li") == "out: "
    assert stream.feed(matcher, "ve-4f9c2e7a1b3d5f60 done\n") == f"{REDACTED} done\n"
    assert stream.feed(matcher, "plain line\n") == "plain line\n"
    assert stream.flush(matcher) == ""


def test_long_text_is_redacted_across_its_internal_slices() -> None:
    matcher = SecretMatcher([SECRET_A])
    filler = "x" * (256 * 1024 - 5)
    text = (filler + SECRET_A) * 6
    assert matcher.redact(text) == (filler + REDACTED) * 6


def test_bytes_maps_and_structs_inside_results_are_redacted() -> None:
    matcher = SecretMatcher(ALL_SECRETS)
    body = FetchSuccess(
        body=b"\x00\x01" + SECRET_A.encode(), content_type="application/octet-stream"
    )
    fetch = FetchArgs(url="https://x", headers={"authorization": f"Bearer {SECRET_B}"})
    arguments = struct_pb2.Struct()
    arguments.update({"nested": {"list": [f"key={SECRET_A}"]}})
    mcp = McpArgs(name="t", args=arguments)
    for message in (body, fetch, mcp):
        redact_message(message, matcher)
        assert all(s.encode() not in message.SerializeToString() for s in ALL_SECRETS)
    assert fetch.headers["authorization"] == f"Bearer {REDACTED}"
    assert mcp.args["nested"]["list"][0] == f"key={REDACTED}"


# --- the middleware, around handlers in this process --------------------------------------------


@pytest.fixture
def guarded(tmp_path: Path) -> GuardedDispatcher:
    handlers = {
        "shell_tool_call": bash_one_byte_per_delta,
        "read_lints_tool_call": fails_with_message,
    }
    return GuardedDispatcher.create(
        tmp_path, handlers, env=SECRET_ENV, secret_redaction_enabled=True
    )


SPELL_SECRET = 's=$SECRET_A; for ((i=0; i<${#s}; i++)); do printf %s "${s:i:1}"; done'


async def test_a_secret_printed_one_byte_per_flush_never_reaches_a_delta(
    guarded: GuardedDispatcher,
) -> None:
    answer = await guarded.run(shell(f"printf 'key='; {SPELL_SECRET}; echo ' end'"))
    pieces = [delta.shell_tool_call_delta.stdout for delta in guarded.deltas]
    # Byte by byte around it; the secret's bytes were held until whole, then replaced.
    assert pieces[:5] == ["k", "e", "y", "=", REDACTED]
    assert "".join(pieces) == f"key={REDACTED} end\n"
    assert answer.shell_tool_call.result.success.stdout == f"key={REDACTED} end\n"
    for delta in guarded.deltas:
        assert SECRET_A[:6] not in delta.shell_tool_call_delta.stdout


async def test_a_secret_on_stderr_is_redacted_in_deltas_and_result(
    guarded: GuardedDispatcher,
) -> None:
    answer = await guarded.run(shell(f'({SPELL_SECRET}) >&2; echo "$SECRET_B" >&2; exit 3'))
    assert shell_output(guarded.deltas, "stderr") == f"{REDACTED}{REDACTED}\n"
    assert answer.shell_tool_call.result.failure.stderr == f"{REDACTED}{REDACTED}\n"


async def test_a_secret_at_the_very_end_of_the_output_is_sent_redacted_at_the_end(
    guarded: GuardedDispatcher,
) -> None:
    await guarded.run(shell('printf %s "$SECRET_A"'))
    assert shell_output(guarded.deltas) == REDACTED


async def test_an_exec_error_message_is_redacted(guarded: GuardedDispatcher) -> None:
    with pytest.raises(CodedError) as raised:
        await guarded.run(call("read_lints_tool_call", paths=["x"]))
    assert raised.value.message == f"cannot use {REDACTED}"


async def test_without_the_flag_nothing_is_redacted(tmp_path: Path) -> None:
    plain = GuardedDispatcher.create(
        tmp_path, {"shell_tool_call": bash_one_byte_per_delta}, env=SECRET_ENV
    )
    await plain.run(shell('echo "$SECRET_A"'))
    assert shell_output(plain.deltas) == SECRET_A + "\n"


# --- the real daemon -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("redaction")
    workspace = root / "workspace"
    workspace.mkdir()
    env = {**SECRET_ENV, "HOME": str(root / "home")}
    with running_daemon(
        workspace, root / "state", "--secret-redaction-enabled", env=env
    ) as running:
        yield running


@pytest.fixture
async def client(daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with daemon.client() as connected:
        yield connected


@pytest.fixture
def space(daemon: RunningDaemon, request: pytest.FixtureRequest) -> Path:
    path = daemon.workspace / request.node.name[:60]
    path.mkdir()
    return path


async def test_read_result_is_redacted(client: ExecDaemonClient, space: Path) -> None:
    (space / ".env").write_text(f"A={SECRET_A}\nB={SECRET_B}\nC={SECRET_C}\n")
    outcome = await client.run(call("read_tool_call", path=str(space / ".env")))
    contents = result_of(outcome).success.ranges[0].contents
    assert contents == f"A={REDACTED}\nB={REDACTED}\nC={REDACTED}"
    assert_clean(outcome)


async def test_grep_result_is_redacted_in_lines_and_file_names(
    client: ExecDaemonClient, space: Path
) -> None:
    (space / f"token-{SECRET_A}.txt").write_text(f"password: {SECRET_B}\n")
    outcome = await client.run(call("grep_tool_call", pattern="password", path=str(space)))
    matches = result_of(outcome).success.matches
    assert [m.lines[0].content for m in matches] == [f"password: {REDACTED}"]
    assert REDACTED in matches[0].file
    assert_clean(outcome)


async def test_an_image_read_back_is_not_corrupted_by_redaction(
    client: ExecDaemonClient, space: Path
) -> None:
    image = Image.new("RGB", (4, 4), "red")
    info = PngInfo()
    info.add_text("comment", SECRET_A)  # the secret's bytes, verbatim inside the PNG
    path = space / "picture.png"
    image.save(path, pnginfo=info)
    assert SECRET_A.encode() in path.read_bytes()
    outcome = await client.run(call("read_tool_call", path=str(path)))
    assert result_of(outcome).success.image.data == path.read_bytes()


async def test_output_file_of_a_background_process_is_redacted_when_read_back(
    client: ExecDaemonClient, daemon: RunningDaemon
) -> None:
    # A process the agent started writes its output file as it goes (raw, on disk); what the
    # agent reads back through its tools is redacted.
    terminals = daemon.state_dir / "terminals"
    terminals.mkdir(parents=True, exist_ok=True)
    output = terminals / "job-1.txt"
    script = "import os,sys; print('token', os.environ['SECRET_B'], flush=True)"
    with output.open("w") as sink:
        subprocess.run([sys.executable, "-c", script], stdout=sink, env=SECRET_ENV, check=True)
    assert SECRET_B in output.read_text()
    outcome = await client.run(call("read_tool_call", path=str(output)))
    assert result_of(outcome).success.ranges[0].contents == f"token {REDACTED}"
    grep = await client.run(call("grep_tool_call", pattern="token", path=str(terminals)))
    assert result_of(grep).success.matches[0].lines[0].content == f"token {REDACTED}"
    assert_clean(outcome)
    assert_clean(grep)


async def test_a_secret_added_later_is_redacted_from_then_on(
    client: ExecDaemonClient, space: Path
) -> None:
    late = "late-secret-9d8c7b6a"
    (space / "late.txt").write_text(f"value {late}\n")
    before = await client.run(call("read_tool_call", path=str(space / "late.txt")))
    assert result_of(before).success.ranges[0].contents == f"value {late}"
    names = f"{SECRET_ENV[SECRET_NAMES_VARIABLE]},LATE_SECRET"
    await client.control.update_environment_variables(
        UpdateEnvironmentVariablesRequest(env={"LATE_SECRET": late, SECRET_NAMES_VARIABLE: names}),
        headers=client.headers,
    )
    after = await client.run(call("read_tool_call", path=str(space / "late.txt")))
    assert result_of(after).success.ranges[0].contents == f"value {REDACTED}"
    assert_clean(after, late, *ALL_SECRETS)


async def test_a_hook_message_and_the_rejection_it_causes_are_redacted(
    client: ExecDaemonClient, daemon: RunningDaemon, space: Path
) -> None:
    hooks = daemon.workspace / ".cursor" / "hooks.json"
    command = hook_script(
        space,
        "leaky",
        "print('refused, key', os.environ['SECRET_A'], file=sys.stderr); sys.exit(2)",
    )
    write_config(hooks, {"version": 1, "hooks": {"beforeReadFile": [{"command": command}]}})
    try:
        (space / "f.txt").write_text("x\n")
        outcome = await client.run(call("read_tool_call", path=str(space / "f.txt")))
    finally:
        hooks.unlink()
    result = result_of(outcome)
    assert case(result) == "rejected"
    assert result.rejected.agent_message == f"refused, key {REDACTED}"
    assert_clean(outcome)


async def test_shell_secret_one_byte_per_flush_and_stderr_never_reach_the_client(
    client: ExecDaemonClient,
) -> None:
    script = (
        "import os, sys, time\n"
        "for ch in os.environ['SECRET_A']:\n"
        "    sys.stdout.write(ch); sys.stdout.flush(); time.sleep(0.002)\n"
        "print(); print(os.environ['SECRET_B'], file=sys.stderr)\n"
    )
    async with client.exec_stream() as stream:
        running = await stream.start(shell(f'{PYTHON} -c "{script}"'))
        outcome = await running.wait()
    assert shell_output(outcome.deltas) == f"{REDACTED}\n"
    assert REDACTED in shell_output(outcome.deltas, "stderr")
    assert_clean(outcome)


async def test_background_shell_output_file_is_redacted_when_read_back(
    client: ExecDaemonClient,
) -> None:
    started = await client.run(shell('echo "bg $SECRET_A"; sleep 0.2', is_background=True))
    started_result = result_of(started)
    assert_clean(started)
    output_file = started_result.output_file
    assert output_file
    await client.run(shell("sleep 0.5"))
    outcome = await client.run(call("read_tool_call", path=output_file))
    assert f"bg {REDACTED}" in result_of(outcome).success.ranges[0].contents
    assert_clean(outcome)


# --- secrets at the seams: the output's cut, between stdout and stderr, between edit deltas -----

HEAD_BYTES = 256 * 1024  # what the shell keeps of a long output's start, and of its end


def secret_pieces(secret: str, least: int = 4) -> list[str]:
    """Every piece of `secret` at least `least` characters long that touches one of its ends."""
    return [secret[:n] for n in range(least, len(secret))] + [
        secret[-n:] for n in range(least, len(secret))
    ]


def assert_no_piece(text: str, secret: str) -> None:
    for piece in secret_pieces(secret):
        assert piece not in text, f"{piece!r} of a secret got through"


async def test_a_secret_straddling_the_output_cut_is_not_sent_in_part(
    client: ExecDaemonClient,
) -> None:
    # SECRET_A starts 16 characters before the end of the kept head; SECRET_B's last 10
    # characters begin the kept tail.
    script = (
        "import os, sys\n"
        f"sys.stdout.write('x' * ({HEAD_BYTES} - 16) + os.environ['SECRET_A'] + 'm' * 100000)\n"
        f"sys.stdout.write(os.environ['SECRET_B'] + 'y' * ({HEAD_BYTES} - 10))\n"
    )
    outcome = await client.run(shell(f'{PYTHON} -c "{script}"'))
    result = result_of(outcome).success
    for text in (result.stdout, result.interleaved_output):
        head, marker, tail = text.partition("cut here")
        assert marker, "the output was expected to be cut"
        head = head.rsplit("\n", 1)[0]
        assert head.endswith("x" + REDACTED)
        assert tail.split("\n", 1)[1].startswith(REDACTED + "y")
        assert_no_piece(text, SECRET_A)
        assert_no_piece(text, SECRET_B)
    assert_clean(outcome)


SPLIT_BETWEEN_STREAMS = {
    "stdout then stderr": 'printf "%s" "${SECRET_A:0:10}"; sleep 0.2; printf "%s\\n" "${SECRET_A:10}" >&2',
    "stderr then stdout": 'printf "%s" "${SECRET_A:0:7}" >&2; sleep 0.2; printf "%s\\n" "${SECRET_A:7}"',
    "three pieces": (
        'printf "%s" "${SECRET_A:0:6}"; sleep 0.2; printf "%s" "${SECRET_A:6:8}" >&2; sleep 0.2;'
        ' printf "%s\\n" "${SECRET_A:14}"'
    ),
}


@pytest.mark.parametrize("name", list(SPLIT_BETWEEN_STREAMS))
async def test_a_secret_split_between_stdout_and_stderr_is_masked_in_both(
    client: ExecDaemonClient, name: str
) -> None:
    async with client.exec_stream() as stream:
        running = await stream.start(shell(f"echo start; {SPLIT_BETWEEN_STREAMS[name]}; echo end"))
        outcome = await running.wait()
    result = result_of(outcome).success
    streamed = shell_output(outcome.deltas) + "\n" + shell_output(outcome.deltas, "stderr")
    for text in (streamed, result.stdout, result.stderr, result.interleaved_output):
        assert_no_piece(text, SECRET_A)
    assert REDACTED in result.stdout and REDACTED in result.stderr
    assert result.stdout.startswith("start\n") and result.stdout.endswith("end\n")
    assert_clean(outcome)


async def test_a_secret_across_two_edit_deltas_is_masked_and_offsets_stay_true(
    client: ExecDaemonClient, space: Path
) -> None:
    path = space / "big.txt"
    content = "a" * (files.EDIT_DELTA_CHUNK - 5) + SECRET_A + "b" * files.EDIT_DELTA_THRESHOLD
    async with client.exec_stream() as stream:
        outcome = await (await stream.start(write_call(path, content))).wait()
    assert outcome.result is not None
    deltas = [delta.edit_tool_call_delta for delta in outcome.deltas]
    assert len(deltas) >= 2
    streamed = "".join(delta.content for delta in deltas)
    assert streamed == content.replace(SECRET_A, REDACTED)
    assert_no_piece(streamed, SECRET_A)
    # Each delta's offset is where its text starts in the file on disk.
    raw = path.read_bytes()
    ends = [delta.offset for delta in deltas[1:]] + [len(raw)]
    for delta, end in zip(deltas, ends, strict=True):
        assert raw[delta.offset : end].decode().replace(SECRET_A, REDACTED) == delta.content
    # (The answer echoes the call's own arguments, which came from the client.)
    assert SECRET_A not in str(result_of(outcome))


@pytest.fixture(scope="module")
def repo_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("redaction-repo")
    workspace = root / "workspace"
    workspace.mkdir()
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "first"]):
        subprocess.run(
            ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
            cwd=workspace,
            check=True,
        )
    env = {**SECRET_ENV, "HOME": str(root / "home")}
    with running_daemon(
        workspace, root / "state", "--secret-redaction-enabled", env=env
    ) as running:
        yield running


async def test_get_diff_and_read_text_file_are_redacted(repo_daemon: RunningDaemon) -> None:
    (repo_daemon.workspace / "config.env").write_text(f"TOKEN={SECRET_A}\nOTHER={SECRET_B}\n")
    async with repo_daemon.client() as client:
        diff = (await client.control.get_diff(GetDiffRequest(), headers=client.headers)).diff
        text = await client.control.read_text_file(
            ReadTextFileRequest(path="config.env"), headers=client.headers
        )
        binary = await client.control.read_binary_file(
            ReadBinaryFileRequest(path="config.env"), headers=client.headers
        )
    assert f"+TOKEN={REDACTED}\n+OTHER={REDACTED}\n" in diff
    assert text.content == f"TOKEN={REDACTED}\nOTHER={REDACTED}\n"
    # Binary reads are the orchestrator's byte-exact file transfer: they stay raw (README).
    assert binary.data == (repo_daemon.workspace / "config.env").read_bytes()
    for secret in ALL_SECRETS:
        assert secret not in diff and secret not in text.content


def test_a_cut_right_after_a_secret_that_ends_like_another_begins() -> None:
    """The shell's cut marker after a whole SECRET_A, with a secret starting with its last
    character: the possible start held back must not leave SECRET_A's beginning unmasked."""
    matcher = SecretMatcher([SECRET_A, SECRET_A[-1] + "f" * 30])
    cut = "\n[exec-daemon: 100 bytes of stdout cut here]\n"
    masked = matcher.redact(f"TOKEN={SECRET_A}{cut}tail")
    assert SECRET_A[:8] not in masked
    assert masked == f"TOKEN={REDACTED}{cut}tail"


async def test_a_window_ending_on_a_secret_that_ends_like_another_begins(tmp_path: Path) -> None:
    """The daemon's token is a secret too: one starting with SECRET_A's last character made a
    window ending right after SECRET_A hold that character back for the next window, and send
    the rest of SECRET_A unmasked (seen in CI with a random token starting with "0")."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    text = "".join(f"line {n} TOKEN={SECRET_A} é\n" for n in range(3))
    (workspace / "edge.env").write_text(text)
    token = SECRET_A[-1] + "f" * 63
    with running_daemon(
        workspace, tmp_path / "state", "--secret-redaction-enabled", env=SECRET_ENV, token=token
    ) as daemon:
        async with daemon.client() as client:
            pages, offset = [], 0
            while not pages or not pages[-1].eof:
                request = ReadTextFileRequest(path="edge.env", offset=offset, length=37)
                pages.append(await client.control.read_text_file(request, headers=client.headers))
                offset = pages[-1].next_offset
    assert "".join(page.content for page in pages) == text.replace(SECRET_A, REDACTED)


async def test_read_text_file_windows_never_show_a_piece_of_a_secret(
    repo_daemon: RunningDaemon,
) -> None:
    text = "".join(f"line {n} TOKEN={SECRET_A} é\n" for n in range(40))
    (repo_daemon.workspace / "windows.env").write_text(text)
    async with repo_daemon.client() as client:

        async def window(offset: int, length: int) -> ReadTextFileResponse:
            request = ReadTextFileRequest(path="windows.env", offset=offset, length=length)
            return await client.control.read_text_file(request, headers=client.headers)

        # Every window size cuts some secret somewhere; following next_offset loses nothing.
        for length in (len(SECRET_A) + 1, 37, 64, 100):
            pages, offset = [], 0
            while not pages or not pages[-1].eof:
                pages.append(await window(offset, length))
                offset = pages[-1].next_offset
            assert "".join(page.content for page in pages) == text.replace(SECRET_A, REDACTED)
        # A window started inside a secret shows none of its end either.
        inside = await window(text.index(SECRET_A) + 3, 64)
    assert inside.content.startswith(REDACTED + " é\n")
    assert SECRET_A[3:] not in inside.content
    assert SECRET_A[-4:] not in inside.content
