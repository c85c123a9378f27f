"""CORS on the RPC port (--cors-allowed-origins): preflights answered without the token for the
allowed origins only, the Connect and gRPC-Web headers allowed and exposed, and a real page in
Chromium on another origin calling Ping and a server-streaming Exec with connect-web."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from exec_daemon.cli import main
from tests.daemon_process import RunningDaemon, free_port, running_daemon

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "web" / "cors_page.mjs"
DESCRIPTORS = ROOT / "proto" / "agent" / "v1" / "descriptors.binpb"
CHROMIUM = Path("/usr/bin/chromium")
PAGE_PORT = free_port()
ALLOWED = f"http://localhost:{PAGE_PORT}"
ALSO_ALLOWED = "https://app.example.com"
PING = "/agent.v1.ControlService/Ping"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    workspace = tmp_path_factory.mktemp("workspace")
    origins = ["--cors-allowed-origins", f"{ALLOWED},HTTPS://App.Example.com:443"]
    with running_daemon(workspace, tmp_path_factory.mktemp("state"), *origins) as running:
        yield running


def request(
    daemon: RunningDaemon, method: str, path: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def preflight(daemon: RunningDaemon, origin: str) -> tuple[int, dict[str, str], bytes]:
    return request(
        daemon,
        "OPTIONS",
        PING,
        {
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,connect-protocol-version,content-type",
        },
    )


def page_origin(template: str) -> str:
    """`template` with the page's port in it: the port is chosen at import, and a parameter's
    id must not hold it (pytest-xdist's workers must collect the same test ids)."""
    return template.format(port=PAGE_PORT)


@pytest.mark.parametrize("template", ["http://localhost:{port}", ALSO_ALLOWED])
def test_a_preflight_from_an_allowed_origin_is_answered_without_a_token(
    daemon: RunningDaemon, template: str
) -> None:
    origin = page_origin(template)
    status, headers, _ = preflight(daemon, origin)
    assert status == 204
    assert headers["access-control-allow-origin"] == origin
    assert set(headers["access-control-allow-methods"].split(", ")) == {"POST", "GET"}
    allowed = {name.lower() for name in headers["access-control-allow-headers"].split(", ")}
    assert {
        "authorization",
        "content-type",
        "connect-protocol-version",
        "connect-timeout-ms",
        "x-grpc-web",
        "x-user-agent",
        "grpc-timeout",
    } <= allowed


@pytest.mark.parametrize(
    "template",
    [
        "http://127.0.0.1:{port}",  # the same page by another name is another origin
        "https://localhost:{port}",  # another scheme
        "http://localhost:{port}.evil.example",  # a prefix of an allowed one
        "null",  # a sandboxed iframe or a file:// page
    ],
)
def test_a_preflight_from_any_other_origin_is_refused(daemon: RunningDaemon, template: str) -> None:
    origin = page_origin(template)
    status, headers, body = preflight(daemon, origin)
    assert status == 403
    assert not any(name.startswith("access-control-") for name in headers)
    assert b"--cors-allowed-origins" in body
    assert f"refused a CORS preflight from {origin}" in daemon.log()


def test_responses_to_an_allowed_origin_expose_the_grpc_web_headers(daemon: RunningDaemon) -> None:
    ok = {"Origin": ALLOWED, "Content-Type": "application/json"}
    status, headers, _ = request(
        daemon, "POST", PING, {**ok, "Authorization": f"Bearer {daemon.token}"}, b"{}"
    )
    assert status == 200
    assert headers["access-control-allow-origin"] == ALLOWED
    exposed = {name.lower() for name in headers["access-control-expose-headers"].split(", ")}
    assert {"grpc-status", "grpc-message", "grpc-status-details-bin"} <= exposed
    # Refusals too, so a browser client reads `unauthenticated` rather than a network error.
    status, headers, body = request(daemon, "POST", PING, ok, b"{}")
    assert status == 401 and json.loads(body)["code"] == "unauthenticated"
    assert headers["access-control-allow-origin"] == ALLOWED
    # Another origin's request still needs the token and gets no CORS headers.
    other = {**ok, "Origin": "http://127.0.0.1:1"}
    status, headers, _ = request(daemon, "POST", PING, other, b"{}")
    assert status == 401 and "access-control-allow-origin" not in headers


def test_without_the_flag_no_origin_is_allowed(workspace: Path, tmp_path: Path) -> None:
    with running_daemon(workspace, tmp_path / "state") as plain:
        status, headers, _ = preflight(plain, ALLOWED)
        token_ok = {"Origin": ALLOWED, "Authorization": f"Bearer {plain.token}"}
        ping_status, ping_headers, _ = request(
            plain, "POST", PING, {**token_ok, "Content-Type": "application/json"}, b"{}"
        )
    assert status == 403 and "access-control-allow-origin" not in headers
    assert ping_status == 200 and "access-control-allow-origin" not in ping_headers


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("*", "give exact origins"),
        ("https://*.example.com", "give exact origins"),
        ("https://app.example.com/path", "an origin has no path"),
        ("app.example.com", "is not an origin"),
        ("ftp://app.example.com", "is not an origin"),
    ],
)
def test_a_bad_origin_is_a_usage_error(value: str, complaint: str) -> None:
    result = CliRunner().invoke(main, ["serve", "--cors-allowed-origins", value])
    assert result.exit_code == 2
    assert complaint in result.output
    assert "Traceback" not in result.output


@pytest.mark.timeout(120)
@pytest.mark.skipif(
    not (CHROMIUM.exists() and shutil.which("node"))
    or not (ROOT / "node_modules" / "@connectrpc" / "connect-web").is_dir()
    or not (ROOT / "node_modules" / "playwright-core").is_dir(),
    reason="needs /usr/bin/chromium, node and the npm packages: run scripts/setup",
)
def test_a_page_on_an_allowed_origin_calls_the_daemon_with_connect_web(
    daemon: RunningDaemon,
) -> None:
    completed = subprocess.run(
        ["node", str(SCRIPT), daemon.url, daemon.token, str(PAGE_PORT), str(DESCRIPTORS)],
        capture_output=True,
        text=True,
        timeout=100,
        cwd=ROOT,
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    assert completed.returncode == 0 and lines, (completed.stdout, completed.stderr[-3000:])
    seen = json.loads(lines[-1])
    allowed, other = seen["allowed"], seen["other"]
    assert seen["pageErrors"] == []
    assert allowed["ping"]["pid"] == daemon.process.pid
    assert allowed["grpcWebPing"]["pid"] == daemon.process.pid
    for protocol in ("connectExec", "grpcWebExec"):
        streamed = allowed[protocol]
        assert "error" not in streamed, streamed
        assert streamed["stdout"] == "line1\nline2\nline3\n"
        assert streamed["exitCode"] == 0
        # Streamed: output deltas came before the one result, which came last.
        assert "toolCallDelta" in streamed["kinds"]
        assert streamed["kinds"][-2:] == ["toolCallResult", "success"]
    assert allowed["wrongToken"]["error"]["code"] == 16  # Code.Unauthenticated
    # The other origin's preflight was refused: connect-web sees a failed fetch, nothing ran.
    assert "pid" not in other["ping"]
    assert other["ping"]["error"]["code"] == 2  # Code.Unknown: "Failed to fetch"
    assert f"refused a CORS preflight from http://127.0.0.1:{PAGE_PORT}" in daemon.log()
