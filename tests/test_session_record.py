"""The session record (--record): a scripted session (shell, edit, a refused call, a subagent,
a fetch, a PTY terminal) comes back from ControlService.GetSessionRecord complete and in order,
outlives a restart of the daemon, is exported by `exec-daemon record export`, and never holds
a declared secret (exec_daemon/telemetry/session_record.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from connectrpc.errors import ConnectError

from agent.v1.common_pb2 import RunMode
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from exec_daemon.kernel.state_root import default_record_folder
from sandbox.proxy import ALLOW_PRIVATE_ENV
from tests.daemon_process import RunningDaemon, free_port, running_daemon
from tests.guards_support import hook_script, write_config
from tests.loopback_http import serving_http
from tests.model_servers import Final, ScriptedModel, ToolCalls, served_model
from tests.polling import WAIT_SECONDS, generous
from tests.shell_calls import shell_call
from tests.test_mcp import SERVER_MODULE, wait_for_port
from tests.test_model_tools import run_task, task_call
from tests.test_pty_server import connect

ROOT = Path(__file__).resolve().parents[1]
SECRET = "s3cr3t-hunter2-value"
SECRET_ENV = {"RECORD_SECRET": SECRET, "CLOUD_AGENT_INJECTED_SECRET_NAMES": "RECORD_SECRET"}


class Hello(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = b"hello from loopback\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def record_folder(tmp_path: Path) -> Iterator[Path]:
    """The workspace's default record folder (beside the state roots), removed afterwards."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    folder = default_record_folder(workspace)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def model() -> Iterator[tuple[ScriptedModel, str]]:
    with served_model() as served:
        yield served


@pytest.fixture(scope="module")
def mcp_port() -> Iterator[int]:
    """An MCP server over streamable HTTP on loopback (tests/test_mcp.py's demo server)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", SERVER_MODULE, "--http", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_port(port, process)
        yield port
    finally:
        process.terminate()
        process.wait(10)


@contextlib.contextmanager
def recording_daemon(
    tmp_path: Path, endpoint: str, mcp_port: int, *extra: str
) -> Iterator[RunningDaemon]:
    mcp = {"mcpServers": {"web": {"url": f"http://127.0.0.1:{mcp_port}/mcp"}}}
    flags = ["--record", "--model-endpoint", endpoint, "--model", "main-model"]
    flags += ["--fetch-allow-private", "127.0.0.0/8", "--mcp-config", json.dumps(mcp), *extra]
    with running_daemon(tmp_path / "ws", tmp_path / "state", *flags, env=SECRET_ENV) as daemon:
        yield daemon


def case(outcome: Any) -> str:
    result = getattr(outcome.result, outcome.result.WhichOneof("tool")).result
    return str(result.WhichOneof("result"))


async def entries(client: ExecDaemonClient, agent_id: str = "", since: int = 0) -> list[Any]:
    return [json.loads(e.json) async for e in client.session_record(agent_id, since)]


def segments(folder: Path) -> list[Path]:
    return sorted(folder.glob("segment-*.jsonl"))


def files_holding(folder: Path, needle: bytes) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


def calls_of(record: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [entry for entry in record if entry["kind"] == kind]


SESSION_FILES = {"made-by-command.txt", "notes.txt"}  # the shell's file, the edit's file


async def with_session_files_changed(client: ExecDaemonClient) -> list[dict[str, Any]]:
    """The record, once the workspace watcher's entries for the session's files are in it (under
    load it may report the shell's file and the edit's in two entries, either one first)."""
    deadline = time.monotonic() + generous(WAIT_SECONDS)
    while True:
        record = await entries(client)
        changes = [c for e in calls_of(record, "file_change") for c in e["changes"]]
        if SESSION_FILES <= {path.rsplit("/", 1)[-1] for _kind, path in changes}:
            return record
        assert time.monotonic() < deadline, f"no file_change for {SESSION_FILES}: {changes}"
        await asyncio.sleep(0.2)


async def run_scripted_session(
    daemon: RunningDaemon, scripted: ScriptedModel, fetch_url: str
) -> None:
    workspace = daemon.workspace
    async with daemon.client() as client:
        made = shell_call("echo out-$RECORD_SECRET; echo x > made-by-command.txt")
        assert case(await client.run(made, agent_id="main")) == "success"
        edit = ToolCall(
            edit_tool_call={"args": {"path": str(workspace / "notes.txt"), "contents": "tea\n"}}
        )
        assert case(await client.run(edit, agent_id="main")) == "success"
        refused = await client.run(
            shell_call("touch refused-marker"), agent_id="main", run_mode=RunMode.RUN_MODE_ALLOWLIST
        )
        assert case(refused) == "rejected"
        assert not (workspace / "refused-marker").exists()
        fetch = ToolCall(fetch_tool_call={"args": {"url": fetch_url}})
        assert case(await client.run(fetch, agent_id="main")) == "success"
        over_http = {"provider_identifier": "web", "tool_name": "echo", "args": {"text": "hi"}}
        mcp = ToolCall(mcp_tool_call={"args": over_http})
        assert case(await client.run(mcp, agent_id="main")) == "success"
        scripted.turns = [
            ToolCalls((("shell", {"command": "echo from-the-subagent"}),)),
            Final("done"),
        ]
        result, _ = await run_task(client, task_call("Say hi", agent_id="sub-1"))
        assert result.WhichOneof("result") == "success", result
    async with connect(daemon, "/terminals/new?cols=80&rows=24") as session:
        # Typed: the terminal echoes the secret back, and the command prints it again.
        await session.ws.send(f"echo pty-{SECRET}-end\r".encode())
        await session.until(b"-end\r\n")


async def test_a_scripted_session_comes_back_whole_in_order_and_outlives_a_restart(
    tmp_path: Path, record_folder: Path, model: tuple[ScriptedModel, str], mcp_port: int
) -> None:
    scripted, endpoint = model
    with serving_http(Hello) as server:
        fetch_url = f"http://127.0.0.1:{server.server_address[1]}/hello"
        with recording_daemon(tmp_path, endpoint, mcp_port) as daemon:
            await run_scripted_session(daemon, scripted, fetch_url)
            async with daemon.client() as client:
                record = await with_session_files_changed(client)

    seqs = [entry["seq"] for entry in record]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    main_calls = [(e["kind"], e["tool"]) for e in record if e["agent"] == "main"]
    assert main_calls[:3] == [
        ("call", "shell_tool_call"),
        ("result", "shell_tool_call"),
        ("cast", "shell_tool_call"),
    ]
    tools_called = [e["tool"] for e in calls_of(record, "call") if e["agent"] == "main"]
    assert tools_called == [
        "shell_tool_call",
        "edit_tool_call",
        "shell_tool_call",
        "fetch_tool_call",
        "mcp_tool_call",
        "task_tool_call",
    ]
    [cast] = [e for e in calls_of(record, "cast") if e["agent"] == "main"]
    header, *events = cast["asciicast"].splitlines()
    assert json.loads(header)["version"] == 2
    assert "out-[REDACTED]" in "".join(json.loads(event)[2] for event in events)

    [edit] = calls_of(record, "edit")
    assert edit["path"].endswith("notes.txt") and "+tea" in edit["diff"]
    [refusal] = [e for e in calls_of(record, "result") if e["refused"]]
    assert refusal["outcome"] == "rejected" and refusal["reason"]
    assert refusal["guards"]["run_mode"] == "allowlist"
    assert refusal["refused_by"] == "permissions" and refusal["needs_approval"] is True
    [fetched, mcp] = calls_of(record, "egress")
    assert fetched["host"] == "127.0.0.1" and fetched["allowed"] is True
    assert mcp["server"] == "web" and mcp["url"].endswith("/mcp") and mcp["host"] == "127.0.0.1"

    sub = [e for e in record if e["agent"] == "sub-1"]
    assert [e["kind"] for e in sub][:2] == ["call", "result"]
    assert all(e["parent"] == "main" for e in sub)
    assert sub[0]["args"]["command"] == "echo from-the-subagent"
    task_result = next(e for e in calls_of(record, "result") if e["tool"] == "task_tool_call")
    assert sub[-1]["seq"] < task_result["seq"]

    pty_text = "".join(text for e in calls_of(record, "pty") for _at, text in e["events"])
    assert "pty-[REDACTED]-end" in pty_text

    # The secret is in no entry, and in no file of the record folder.
    assert SECRET not in json.dumps(record)
    assert not files_holding(record_folder, SECRET.encode())

    # A restart on the same workspace: the record goes on where it stopped.
    with recording_daemon(tmp_path, endpoint, mcp_port) as daemon:
        async with daemon.client() as client:
            assert case(await client.run(shell_call("echo after-restart"), agent_id="other")) == (
                "success"
            )
            after = await entries(client)
            since = await entries(client, since=seqs[-1])
            only_main = await entries(client, agent_id="main")
        exported = tmp_path / "export.jsonl"
        export = subprocess.run(
            [sys.executable, "-m", "exec_daemon", "record", "export", "--url", daemon.url,
             "-o", str(exported)],
            env={"EXEC_DAEMON_AUTH_TOKEN": daemon.token, "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert [e["seq"] for e in after[: len(record)]] == seqs
    assert [e["args"]["command"] for e in calls_of(since, "call")] == ["echo after-restart"]
    assert all(e["seq"] > seqs[-1] for e in since)
    assert {e["agent"] for e in only_main} == {"main", "sub-1"}
    assert export.returncode == 0, export.stderr
    lines = exported.read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [e["seq"] for e in after]
    assert SECRET not in exported.read_text()


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


BROWSER_READY = (
    Path("/usr/bin/chromium").exists()
    and shutil.which("node") is not None
    and (ROOT / "node_modules" / "playwright-core").is_dir()
)


@pytest.mark.skipif(
    not BROWSER_READY, reason="needs chromium, node, playwright-core: scripts/setup"
)
async def test_the_record_replays_in_a_browser(
    tmp_path: Path, record_folder: Path, model: tuple[ScriptedModel, str], mcp_port: int
) -> None:
    scripted, endpoint = model
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with serving_http(Hello) as server:
        fetch_url = f"http://127.0.0.1:{server.server_address[1]}/hello"
        with recording_daemon(tmp_path, endpoint, mcp_port) as daemon:
            await run_scripted_session(daemon, scripted, fetch_url)
            entries_url = f"http://127.0.0.1:{daemon.pty_port}/record/entries"
            assert await asyncio.to_thread(http_status, entries_url) == 401
            assert await asyncio.to_thread(http_status, entries_url + "?token=wrong") == 401
            browser = await asyncio.to_thread(
                subprocess.run,
                ["node", str(ROOT / "tests" / "web" / "record.mjs"),
                 f"http://127.0.0.1:{daemon.pty_port}", daemon.token, str(shots)],
                capture_output=True, text=True, timeout=180, cwd=ROOT,
            )  # fmt: skip
    assert browser.returncode == 0, browser.stderr
    seen = json.loads(browser.stdout.splitlines()[-1])
    assert "token=" not in seen["address"]
    assert seen["rows"] >= 15
    assert seen["refusedRows"] == 1 and seen["allRefused"]
    assert "out-[REDACTED]" in seen["cast"]
    assert "+tea" in seen["diffAdded"][0]
    assert "pty-[REDACTED]-end" in seen["pty"]
    assert SECRET not in browser.stdout
    assert seen["errors"] == []


async def test_a_daemon_without_record_answers_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    with running_daemon(tmp_path / "ws", tmp_path / "state") as daemon:
        async with daemon.client() as client:
            with pytest.raises(ConnectError) as refused:
                await entries(client)
    assert refused.value.code.value == "failed_precondition"
    assert "--record" in refused.value.message


async def test_the_agent_cannot_rewrite_the_record(tmp_path: Path, record_folder: Path) -> None:
    rw = {"type": "TYPE_WORKSPACE_READWRITE"}
    flags = ("--record", "--sandbox-enabled")
    # The sandbox's proxy may reach loopback (the operator's switch), so its answers are real.
    env = {ALLOW_PRIVATE_ENV: "127.0.0.0/8"}
    with (
        serving_http(Hello) as server,
        running_daemon(tmp_path / "ws", tmp_path / "state", *flags, env=env) as d,
    ):
        port = server.server_address[1]
        async with d.client() as client:
            curls = (
                f"curl -sS -m 10 http://localhost:{port}/allowed; "
                f"curl -sS -m 10 http://127.0.0.1:{port}/refused; true"
            )
            networked = {**rw, "network_allow": ["localhost"]}
            proxied = ToolCall(
                shell_tool_call={"args": {"command": curls, "requested_sandbox_policy": networked}}
            )
            answer = await client.run(proxied, agent_id="main")
            assert "hello from loopback" in str(answer.result), answer.result
            # A hook's answer: the refusal it makes, and who made it, is in the record.
            deny = {"permission": "deny", "user_message": "no rm -rf here"}
            hook = hook_script(tmp_path / "hooks", "deny", f"print(json.dumps({deny!r}))\n")
            hooks = {"beforeShellExecution": [{"command": hook, "matcher": "rm -rf"}]}
            write_config(d.workspace / ".cursor" / "hooks.json", {"version": 1, "hooks": hooks})
            denied = await client.run(shell_call("rm -rf build"), agent_id="hooked")
            assert case(denied) == "rejected"
            [hooked] = [e for e in await entries(client, "hooked") if e["kind"] == "result"]
            assert hooked["refused"] and hooked["outcome"] == "rejected"
            assert "no rm -rf here" in json.dumps(hooked["result"]), hooked
            assert hooked["refused_by"] == "hook" and hooked["needs_approval"] is False
            egress = [e for e in await entries(client) if e["kind"] == "egress"]
            assert [(e["tool"], e["host"], e["allowed"]) for e in egress] == [
                ("sandbox_proxy", "localhost", True),
                ("sandbox_proxy", "127.0.0.1", False),
            ]
            assert "allowlist" in egress[1]["reason"]
            assert case(await client.run(shell_call("echo first"), agent_id="main")) == "success"
            await entries(client)  # written
            [segment] = [p.name for p in segments(record_folder)]
            script = (
                f"echo forged >> {record_folder}/{segment}; echo append=$?; "
                f"touch {record_folder}/planted; echo touch=$?; "
                f"mkdir {record_folder.parent}/forged; echo sibling=$?; "
                f"cat {record_folder}/{segment} >/dev/null; echo read=$?"
            )
            confined = ToolCall(
                shell_tool_call={"args": {"command": script, "requested_sandbox_policy": rw}}
            )
            answer = await client.run(confined, agent_id="main")
            printed = answer.result.shell_tool_call.result.success.stdout
            assert "append=1" in printed and "touch=1" in printed, printed
            assert "sibling=1" in printed and "read=0" in printed, printed
            edit = ToolCall(
                edit_tool_call={"args": {"path": str(record_folder / "planted"), "contents": "x"}}
            )
            assert case(await client.run(edit, agent_id="main")) != "success"
            assert not (record_folder / "planted").exists()
            # The line `echo` would append (the record's own entries, written meanwhile by its
            # writer thread, hold the word inside the recorded command).
            assert b"forged" not in (record_folder / segment).read_bytes().splitlines()
            # Positive control: unconfined, the same command does write there.
            none = {"type": "TYPE_INSECURE_NONE"}
            unconfined = ToolCall(
                shell_tool_call={
                    "args": {
                        "command": f"touch {record_folder}/planted; echo touch=$?",
                        "requested_sandbox_policy": none,
                    }
                }
            )
            answer = await client.run(unconfined, agent_id="main")
            assert "touch=0" in answer.result.shell_tool_call.result.success.stdout
