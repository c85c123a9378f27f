"""The TypeScript client (clients/typescript, npm `@exec-daemon/client`) against the real daemon:
every verb, its typed errors and the token on every RPC, the same scenarios
(tests/web/ts_client_scenarios.mjs) in Node and in a headless Chromium page on an origin the
daemon allows (--cors-allowed-origins); and a daemon killed mid-call fails the call as
`Unavailable` rather than leaving it hanging."""

from __future__ import annotations

import json
import os
import queue
import secrets
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_process import RunningDaemon, free_port, running_daemon

ROOT = Path(__file__).resolve().parents[1]
NODE_RUNNER = ROOT / "tests" / "node" / "ts_client.mjs"
PAGE_RUNNER = ROOT / "tests" / "web" / "ts_client_page.mjs"
CHROMIUM = Path("/usr/bin/chromium")
PAGE_PORT = free_port()

pytestmark = pytest.mark.skipif(
    not shutil.which("node") or not (ROOT / "node_modules" / ".bin" / "tsc").exists(),
    reason="needs node and the npm packages: run ./scripts/setup",
)


@pytest.fixture(scope="module")
def built_client() -> Path:
    """The client compiled (a no-op when scripts/setup built it from the same sources)."""
    subprocess.run([str(ROOT / "scripts" / "build-ts-client")], check=True, cwd=ROOT, timeout=300)
    return ROOT / "clients" / "typescript" / "dist" / "index.js"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, built_client: Path) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("ts-client")
    workspace = root / "workspace"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    origin = f"http://localhost:{PAGE_PORT}"
    # A configured MCP server that cannot start: listed by mcp.tools() with its error.
    mcp = json.dumps({"mcpServers": {"broken": {"command": str(root / "no-such-server")}}})
    flags = ("--cors-allowed-origins", origin, "--secret-redaction-enabled", "--mcp-config", mcp)
    with running_daemon(workspace, root / "state", *flags) as running:
        yield running


def last_json_line(completed: subprocess.CompletedProcess[str]) -> Any:
    lines = completed.stdout.strip().splitlines()
    assert completed.returncode == 0 and lines, (completed.stdout[-3000:], completed.stderr[-3000:])
    return json.loads(lines[-1])


def scenario_arguments(daemon: RunningDaemon) -> list[str]:
    return [
        daemon.url,
        daemon.token,
        f"http://127.0.0.1:{free_port()}",
        str(secrets.randbelow(10**6)),
    ]


def judge(seen: dict[str, Any], daemon: RunningDaemon, marker: str) -> None:
    """What a user of every verb would notice, the same in Node and in the browser (`marker`:
    the run's, the last of scenario_arguments)."""
    error = lambda step: seen[step]["error"]  # noqa: E731
    assert seen["ping"]["value"]["pid"] == daemon.process.pid
    run = seen["run"]["value"]
    assert (run["exitCode"], run["stdout"], run["stderr"]) == (3, "out\n", "err\n")
    assert seen["runStreamed"] == "out\n"
    workspace = seen["runCwd"]["value"]["stdout"].strip()
    assert seen["runInCwd"]["value"]["stdout"] == f"{workspace}/sub\n"  # cwd: relative to it
    assert error("timeout")["name"] == "Timeout" and error("timeout")["stdout"] == "early\n"
    assert error("needsApproval")["name"] == "NeedsApproval"
    assert "approved.txt` is not in terminalAllowlist" in error("needsApproval")["message"]
    assert seen["approvedFileExists"]["value"]["exitCode"] == 1  # refused means not run
    assert seen["env"]["value"]["stdout"] == "hi\n"  # the control of envBadName
    assert seen["startEnv"]["value"]["stdout"] == "hey\n"
    assert error("envBadName")["name"] == "InvalidArgument"
    assert "'NOT-A-NAME' is not a shell variable name" in error("envBadName")["message"]
    assert seen["secretEnv"]["value"]["stdout"] == "[REDACTED]\n"

    assert seen["write"]["value"] == len("hello\nworld\n")
    assert seen["read"]["value"] == "hello\nworld\n"
    assert "-world\n+there\n" in seen["edit"]["value"]["diff"]
    assert seen["edit"]["value"]["replacements"] == 1
    assert seen["readAfterEdit"]["value"] == "hello\nthere\n"
    assert (error("editNoMatch")["name"], error("editNoMatch")["code"]) == (
        "InvalidArgument",
        "no_match",
    )
    assert error("editMissingFile")["name"] == "NotFound"
    assert [entry["name"] for entry in seen["list"]["value"]] == ["hello.txt"]
    assert seen["glob"]["value"] == ["notes/hello.txt"]
    assert seen["grep"]["value"]["matches"] == [
        {"file": "notes/hello.txt", "lineNumber": 2, "line": "there"}
    ]
    assert error("grepBadPattern")["code"] == "invalid_pattern"
    assert seen["bytes"]["value"] == [0, 255, 1, 128]
    assert error("readMissing")["name"] == "NotFound"
    assert seen["upload"]["value"] == 6
    assert seen["download"]["value"] == {"size": 6, "bytes": [7, 0, 255, 42, 13, 10]}
    assert error("uploadOntoDirectory")["name"] == "InvalidArgument"
    assert error("uploadOntoDirectory")["message"].endswith("notes is a directory")
    assert error("downloadMissing")["name"] == "NotFound"
    assert "+there\n" in seen["diff"]["value"] and "b/notes/hello.txt" in seen["diff"]["value"]
    assert seen["delete"]["value"] == 4
    assert error("deleteMissing")["name"] == "NotFound"
    assert seen["changesHash"]["value"] != seen["changesHashAfter"]["value"]
    assert seen["call"]["value"] == {"tool": "readTodosToolCall", "result": "success"}
    assert error("callUnknown")["name"] == "InvalidArgument"
    assert any(f"Rule {marker}." in rule for rule in seen["context"]["value"])
    assert error("contextTooManyPaths")["name"] == "InvalidArgument"
    assert seen["mcpTools"]["value"] == ["broken"]

    start = seen["start"]["value"]
    assert start["shellId"] > 0 and start["pid"] > 0
    assert start["midway"] == "got:abc\n"  # output() while it still ran
    assert start["result"]["stdout"] == "got:abc\nrest:\n" and start["result"]["exitCode"] == 0
    assert seen["runningBeforeAbort"] is True  # the control: it ran until aborted
    assert error("abort")["name"] == "Aborted"
    assert seen["goneAfterAbort"] is True

    refused = {verb: step["error"]["name"] for verb, step in seen["wrongToken"].items()}
    assert set(refused.values()) == {"Unauthenticated"}, refused
    assert len(refused) == 19
    assert seen["stillThere"]["value"] == "hello\nthere\n"
    assert error("unreachable")["name"] == "Unavailable"
    every_error = [
        step["error"] for step in seen.values() if isinstance(step, dict) and "error" in step
    ]
    every_error += [step["error"] for step in seen["wrongToken"].values()]
    assert all(error["typed"] for error in every_error)


def test_every_verb_in_node(daemon: RunningDaemon) -> None:
    arguments = scenario_arguments(daemon)
    completed = subprocess.run(
        ["node", str(NODE_RUNNER), "scenarios", *arguments],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )  # fmt: skip
    seen = last_json_line(completed)
    judge(seen, daemon, arguments[-1])
    # Local paths are Node's: a file uploaded from one and downloaded to another is the same.
    assert seen["localCopy"]["value"] == {"sent": 5, "received": 5, "same": True}


@pytest.mark.timeout(240)
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium: run ./scripts/setup")
def test_every_verb_in_chromium_on_an_allowed_origin(daemon: RunningDaemon) -> None:
    arguments = scenario_arguments(daemon)
    completed = subprocess.run(
        ["node", str(PAGE_RUNNER), arguments[0], arguments[1], str(PAGE_PORT), *arguments[2:]],
        capture_output=True, text=True, timeout=220, cwd=ROOT,
    )  # fmt: skip
    page = last_json_line(completed)
    assert page["pageErrors"] == []
    judge(page["seen"], daemon, arguments[-1])


def end_orphaned_session(session: int, workspace: Path) -> None:
    """A daemon killed with SIGKILL leaves its shell session (its own process group) running:
    end it, once it is known to be this test's (its command line names the workspace)."""
    try:
        cmdline = Path(f"/proc/{session}/cmdline").read_bytes()
    except OSError:
        return
    if session > 0 and str(workspace).encode() in cmdline and os.getpgid(session) == session:
        os.killpg(session, signal.SIGKILL)


def test_a_daemon_killed_mid_call_fails_the_call_as_unavailable(
    workspace: Path, tmp_path: Path, built_client: Path
) -> None:
    with running_daemon(workspace, tmp_path / "state") as doomed:
        runner = subprocess.Popen(
            ["node", str(NODE_RUNNER), "killed", doomed.url, doomed.token],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        )  # fmt: skip
        lines: queue.Queue[str] = queue.Queue()
        assert runner.stdout is not None
        stdout = runner.stdout

        def forward() -> None:
            for line in stdout:
                lines.put(line)

        threading.Thread(target=forward, daemon=True).start()
        session = 0
        try:
            running, pid = lines.get(timeout=60).split()
            assert running == "running"
            session = int(pid)
            doomed.process.kill()
            outcome = json.loads(lines.get(timeout=60))
        finally:
            runner.kill()
            runner.wait(timeout=10)
            assert runner.stderr is not None
            runner.stderr.close()
            end_orphaned_session(session, workspace)
    assert outcome == {"error": {"name": "Unavailable", "code": "unavailable", "typed": True}}
