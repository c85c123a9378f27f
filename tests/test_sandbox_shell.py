"""The sandbox through the real daemon's shell tool (`--sandbox-enabled`): sessions, one-shot and
background shells run confined, the result reports the effective policy, and what cannot be
confined is answered `rejected`."""

from __future__ import annotations

import asyncio
import http.server
import os
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agent.v1.shell_pb2 import SandboxPolicy, ShellResult
from exec_daemon.client import ExecDaemonClient
from sandbox.probe import SIMULATE_MISSING_ENV
from sandbox.proxy import ALLOW_PRIVATE_ENV
from tests.daemon_process import RunningDaemon, free_port, running_daemon
from tests.loopback_http import serving_http
from tests.polling import file_holds
from tests.sandbox_harness import processes_with_argument
from tests.shell_calls import printed, shell
from tests.x11_support import x_server

pytestmark = pytest.mark.timeout(90)

RW = SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READWRITE)
NONE = SandboxPolicy(type=SandboxPolicy.TYPE_INSECURE_NONE)


@pytest.fixture(scope="module")
def sandbox_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("sandbox-shell")
    workspace = root / "workspace"
    workspace.mkdir()
    env = {ALLOW_PRIVATE_ENV: "127.0.0.0/8"}
    with running_daemon(workspace, root / "state", "--sandbox-enabled", env=env) as daemon:
        yield daemon


@pytest.fixture
async def client(sandbox_daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with sandbox_daemon.client() as connected:
        yield connected


@pytest.fixture
def agent(request: pytest.FixtureRequest) -> str:
    return str(request.node.name)


def output(result: ShellResult) -> str:
    return printed(result, ("success", "failure", "timeout"))


def test_the_daemon_logs_one_sandbox_status_line(sandbox_daemon: RunningDaemon) -> None:
    lines = [line for line in sandbox_daemon.log().splitlines() if "sandbox: " in line]
    assert len(lines) == 1 and "sandbox: enabled; kernel: Landlock ABI" in lines[0]


async def test_sandboxed_session_writes_workspace_not_protected_paths(
    client: ExecDaemonClient, agent: str, sandbox_daemon: RunningDaemon
) -> None:
    workspace = sandbox_daemon.workspace
    result = await shell(
        client,
        "echo ok > in-workspace.txt; echo x > .vscode/settings.json 2>&1 || echo denied-vscode;"
        " echo x > /etc/sbx 2>/dev/null || echo denied-etc; echo sandbox=$CURSOR_SANDBOX",
        agent,
        requested_sandbox_policy=RW,
    )
    text = output(result)
    assert "denied-vscode" in text and "denied-etc" in text and "sandbox=native" in text
    assert (workspace / "in-workspace.txt").read_text() == "ok\n"
    # While the session's sandbox lives, an empty placeholder stands for the missing .vscode.
    assert os.listdir(workspace / ".vscode") == []
    assert result.sandbox_policy.type == SandboxPolicy.TYPE_WORKSPACE_READWRITE
    assert result.sandbox_policy.network_mode == SandboxPolicy.NETWORK_MODE_NONE
    # The session keeps its state between sandboxed calls, like any session.
    await shell(client, "cd /tmp; export KEPT=yes", agent, requested_sandbox_policy=RW)
    again = await shell(client, "echo $PWD $KEPT", agent, requested_sandbox_policy=RW)
    assert output(again).strip() == "/tmp yes"


async def test_unconfined_calls_on_the_same_daemon(client: ExecDaemonClient, agent: str) -> None:
    result = await shell(
        client,
        "echo $CURSOR_SANDBOX; touch /etc/.sbx-probe && rm /etc/.sbx-probe && echo wrote",
        agent,
        requested_sandbox_policy=NONE,
    )
    assert output(result).split() == ["wrote"]
    assert result.sandbox_policy.type == SandboxPolicy.TYPE_INSECURE_NONE


async def test_calls_without_a_policy_are_sandboxed_by_default(
    client: ExecDaemonClient, agent: str
) -> None:
    result = await shell(client, "echo $CURSOR_SANDBOX", agent)
    assert output(result).strip() == "native"
    assert result.sandbox_policy.type == SandboxPolicy.TYPE_WORKSPACE_READWRITE


async def test_one_shot_and_background_shells_are_confined(
    client: ExecDaemonClient, agent: str, sandbox_daemon: RunningDaemon
) -> None:
    interactive = await shell(
        client,
        "echo x > .cursorignore 2>&1 || echo denied",
        agent,
        requested_sandbox_policy=RW,
        is_interactive=True,
    )
    assert "denied" in output(interactive)
    background = await shell(
        client,
        "echo $CURSOR_SANDBOX > bg.txt",
        agent,
        requested_sandbox_policy=RW,
        is_background=True,
    )
    assert (
        background.is_background
        and background.sandbox_policy.type == SandboxPolicy.TYPE_WORKSPACE_READWRITE
    )
    await file_holds(sandbox_daemon.workspace / "bg.txt", "native\n")


async def test_a_sandboxed_command_cannot_kill_the_daemon(
    client: ExecDaemonClient, agent: str, sandbox_daemon: RunningDaemon
) -> None:
    pid = sandbox_daemon.process.pid
    result = await shell(
        client, f"kill -9 {pid} 2>&1 || echo refused", agent, requested_sandbox_policy=RW
    )
    assert "refused" in output(result)
    assert sandbox_daemon.process.poll() is None


async def test_timeout_kills_everything_the_call_started(
    client: ExecDaemonClient, agent: str
) -> None:
    marker = f"{6000 + os.getpid() % 1000}.{time.monotonic_ns() % 1000}"
    for kwargs in ({}, {"is_interactive": True}):
        result = await shell(
            client,
            f"setsid sleep {marker} >/dev/null 2>&1 & sleep {marker}",
            agent,
            requested_sandbox_policy=RW,
            timeout=1000,
            **kwargs,
        )
        assert result.WhichOneof("result") == "timeout", result
        deadline = time.monotonic() + 5
        while processes_with_argument(marker) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert processes_with_argument(marker) == [], kwargs


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello through the proxy\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web_server() -> Iterator[int]:
    with serving_http(_Hello) as server:
        yield server.server_address[1]


async def test_allowlisted_host_through_the_daemons_proxy(
    client: ExecDaemonClient, agent: str, web_server: int
) -> None:
    policy = SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READWRITE, network_allow=["localhost"])
    result = await shell(
        client,
        f"curl -sS -m 10 http://localhost:{web_server}/; curl -sS -m 10 -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.1:{web_server}/",
        agent,
        requested_sandbox_policy=policy,
    )
    assert output(result).splitlines()[:2] == ["hello through the proxy", "403"]
    assert result.sandbox_policy.network_mode == SandboxPolicy.NETWORK_MODE_PROXY
    assert list(result.sandbox_policy.network_allow) == ["localhost"]


async def test_without_sandbox_enabled_the_policy_is_reported_as_not_applied(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with running_daemon(workspace, tmp_path / "state") as daemon:
        async with daemon.client() as client:
            result = await shell(
                client, "echo ${CURSOR_SANDBOX-unconfined}", requested_sandbox_policy=RW
            )
        assert output(result).strip() == "unconfined"
        assert result.sandbox_policy.type == SandboxPolicy.TYPE_INSECURE_NONE
        assert "--sandbox-enabled" in result.sandbox_policy.notes[0]
        assert "sandbox: disabled" in daemon.log()


@pytest.mark.parametrize("feature", ["landlock", "namespaces", "seccomp"])
async def test_missing_kernel_feature_answers_rejected(feature: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {SIMULATE_MISSING_ENV: feature}
    with running_daemon(workspace, tmp_path / "state", "--sandbox-enabled", env=env) as daemon:
        async with daemon.client() as client:
            result = await shell(client, "touch ran.txt", requested_sandbox_policy=RW)
            unconfined = await shell(client, "echo fine", requested_sandbox_policy=NONE)
        assert result.WhichOneof("result") == "rejected", result
        expected = {"landlock": "Landlock ABI", "namespaces": "namespaces", "seccomp": "seccomp"}[
            feature
        ]
        assert expected in result.rejected.reason
        assert (
            result.rejected.details.source == "sandbox"
            and result.rejected.details.sandbox_unavailable
        )
        assert not (workspace / "ran.txt").exists()
        assert output(unconfined).strip() == "fine"
        assert "UNAVAILABLE, sandboxed calls will be rejected" in daemon.log()


@pytest.fixture
def x_display() -> Iterator[tuple[str, int]]:
    """An X server with VNC on loopback, as the VM's desktop (scripts/image/desktop-init)."""
    if not shutil.which("Xtigervnc") or not shutil.which("xdpyinfo"):
        pytest.skip("needs Xtigervnc and xdpyinfo (run scripts/setup)")
    port = free_port()

    def command(number: int) -> list[str]:
        return ["Xtigervnc", f":{number}", "-geometry", "640x480", "-localhost", "-rfbport",
                str(port), "-SecurityTypes", "None", "-nolisten", "tcp"]  # fmt: skip

    with x_server(command, range(200, 300)) as number:
        yield f":{number}", port


async def test_a_sandboxed_shell_cannot_drive_the_desktop(
    client: ExecDaemonClient, agent: str, x_display: tuple[str, int]
) -> None:
    """A person's take-over pauses computer_use; a sandboxed shell could otherwise still type on
    the desktop through the X socket (pathname or abstract) or the VNC port."""
    display, vnc_port = x_display
    probe = (
        f"DISPLAY={display} xdpyinfo >/dev/null 2>&1 && echo X-REACHED; "
        f"(exec 3<>/dev/tcp/127.0.0.1/{vnc_port} && head -c 12 <&3) 2>/dev/null; echo"
    )
    confined = output(await shell(client, probe, agent, requested_sandbox_policy=RW))
    unconfined = output(await shell(client, probe, agent + "-u", requested_sandbox_policy=NONE))
    assert "X-REACHED" in unconfined and "RFB 003.008" in unconfined, unconfined
    assert "X-REACHED" not in confined and "RFB" not in confined, confined
