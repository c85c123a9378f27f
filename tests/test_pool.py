"""Warm pools: late binding (`serve --wait-for-init` + InitSandbox), health and drain, the
second auth header, GetSandboxInfo, and a pool of daemons claimed concurrently
(exec_daemon/rpc/pool.py, exec_daemon/rpc/health.py, exec_daemon/pool_client.py)."""

from __future__ import annotations

import asyncio
import errno
import os
import pwd
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.protocol import ProtocolType
from pyqwest import Client, HTTPTransport, HTTPVersion

from agent.v1.control_pb2 import PingRequest
from agent.v1.health_connect import HealthClient
from agent.v1.health_pb2 import HealthCheckRequest, HealthCheckResponse
from agent.v1.pool_pb2 import GetSandboxInfoRequest, InitSandboxRequest
from exec_daemon.client import ExecDaemonClient
from exec_daemon.pool_client import PooledSandbox
from tests.daemon_process import RunningDaemon, running_daemon, running_pool
from tests.polling import eventually, wait_until
from tests.sandbox_harness import processes_with_argument
from tests.shell_calls import shell, shell_call
from tests.test_shell import stdout_of

OWN_USER = pwd.getpwuid(os.geteuid())
PROTO = Path(__file__).resolve().parents[1] / "proto"
GRPCURL = Path(sys.executable).parent / "grpcurl"
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_status(
    daemon: RunningDaemon, path: str, *, port: int | None = None, **headers: str
) -> int | None:
    url = f"http://127.0.0.1:{port or daemon.port}{path}"
    try:
        with _DIRECT.open(urllib.request.Request(url, headers=headers), timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return None


async def health_status(daemon: RunningDaemon) -> int:
    """grpc.health.v1.Health/Check over gRPC (h2c), with no token at all."""
    async with HTTPTransport(http_version=HTTPVersion.HTTP2, enable_otel=False) as transport:
        health = HealthClient(daemon.url, protocol=ProtocolType.GRPC, http_client=Client(transport))
        answer = await health.check(HealthCheckRequest())
    return int(answer.status)


async def refused_with(call: object) -> Code:
    with pytest.raises(ConnectError) as caught:
        await call  # type: ignore[misc]
    return caught.value.code


@pytest.fixture
def pool_daemon(tmp_path: Path) -> Iterator[RunningDaemon]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with running_daemon(
        workspace, tmp_path / "state", "--wait-for-init", token_by="file"
    ) as daemon:
        yield daemon


async def test_unclaimed_daemon_answers_only_health_and_init_sandbox(
    pool_daemon: RunningDaemon, tmp_path: Path
) -> None:
    assert (pool_daemon.state_dir / "auth-token").exists()
    assert http_status(pool_daemon, "/healthz") == 200
    assert http_status(pool_daemon, "/readyz") == 503
    # A warm pool's pod readiness: waiting to be claimed is ready for the pool.
    assert http_status(pool_daemon, "/readyz?unclaimed=ok") == 200
    assert await health_status(pool_daemon) == HealthCheckResponse.NOT_SERVING
    async with pool_daemon.client() as pool:
        # The pool's credential opens nothing but InitSandbox.
        assert await refused_with(pool.ping()) == Code.FAILED_PRECONDITION
        assert await refused_with(pool.run(shell_call("true"))) == Code.FAILED_PRECONDITION
        info = pool.control.get_sandbox_info(GetSandboxInfoRequest(), headers=pool.headers)
        assert await refused_with(info) == Code.FAILED_PRECONDITION
        async with pool.exec_stream() as stream:
            with pytest.raises((ConnectError, ConnectionError)):
                call = await stream.start(shell_call("true"))
                async for _message in call:
                    pass
        # A bad claim changes nothing: still unclaimed.
        short = InitSandboxRequest(auth_token="short")
        bad = pool.control.init_sandbox(short, headers=pool.headers)
        assert await refused_with(bad) == Code.INVALID_ARGUMENT
        same = InitSandboxRequest(auth_token=pool_daemon.token)
        bad = pool.control.init_sandbox(same, headers=pool.headers)
        assert await refused_with(bad) == Code.INVALID_ARGUMENT
        stranger = InitSandboxRequest(auth_token="x" * 32, user="no-such-user-here")
        bad = pool.control.init_sandbox(stranger, headers=pool.headers)
        assert await refused_with(bad) == Code.INVALID_ARGUMENT
        missing = InitSandboxRequest(auth_token="x" * 32, workspace=str(tmp_path / "nowhere"))
        bad = pool.control.init_sandbox(missing, headers=pool.headers)
        assert await refused_with(bad) == Code.INVALID_ARGUMENT
        assert http_status(pool_daemon, "/readyz") == 503
    async with ExecDaemonClient(pool_daemon.url, "wrong-token-" + "0" * 20) as stranger:
        claim = InitSandboxRequest(auth_token="y" * 32)
        bad = stranger.control.init_sandbox(claim, headers=stranger.headers)
        assert await refused_with(bad) == Code.UNAUTHENTICATED


async def test_init_sandbox_binds_once_and_the_pool_credential_stops_working(
    pool_daemon: RunningDaemon, tmp_path: Path
) -> None:
    agent_token = secrets.token_hex(24)
    workspace = tmp_path / "claimed-workspace"
    workspace.mkdir()
    sandbox = PooledSandbox(pool_daemon.url, pool_daemon.token)
    await sandbox.wait_alive(seconds=30)
    client = await sandbox.claim(
        agent_token,
        env={"GREETING": "hello-from-the-claim", "API_KEY": "sk-claimed-secret-1234"},
        secret_names=["API_KEY"],
        workspace=str(workspace),
        user=OWN_USER.pw_name,
        metadata={"pool": "p1", "claim": "c-1"},
    )
    async with client:
        assert sandbox.claimed is not None and sandbox.claimed.workspace == str(workspace)
        # The pool's credential file is gone: the agent cannot read it to claim the others.
        assert (pool_daemon.state_dir / "auth-token").exists() is False
        assert http_status(pool_daemon, "/readyz") == 200
        assert await health_status(pool_daemon) == HealthCheckResponse.SERVING
        assert (await client.ping()).workspace == str(workspace)
        # The terminals' port too serves the agent's token, and only it.
        pty = pool_daemon.pty_port
        agent = {"Authorization": f"Bearer {agent_token}"}
        assert http_status(pool_daemon, "/terminals", port=pty, **agent) == 200
        pool = {"Authorization": f"Bearer {pool_daemon.token}"}
        assert http_status(pool_daemon, "/terminals", port=pty, **pool) == 401
        result = await shell(client, 'echo "$GREETING $API_KEY"; pwd; echo "user=$USER:$HOME"')
        out = stdout_of(result)
        assert f"user={OWN_USER.pw_name}:{OWN_USER.pw_dir}" in out
        assert "hello-from-the-claim [REDACTED]" in out
        assert "sk-claimed-secret-1234" not in out
        assert str(workspace) in out
        # The pool credential no longer opens anything, InitSandbox included.
        async with pool_daemon.client() as pool:
            assert await refused_with(pool.ping()) == Code.UNAUTHENTICATED
            again = InitSandboxRequest(auth_token=secrets.token_hex(24))
            bad = pool.control.init_sandbox(again, headers=pool.headers)
            assert await refused_with(bad) == Code.UNAUTHENTICATED
        # Nor does a second claim with the agent's own token.
        again = InitSandboxRequest(auth_token=secrets.token_hex(24))
        bad = client.control.init_sandbox(again, headers=client.headers)
        assert await refused_with(bad) == Code.FAILED_PRECONDITION
        assert (await client.ping()).workspace == str(workspace)
        info = await sandbox.info()
        assert info.claimed and info.state == "serving"
        assert dict(info.metadata) == {"pool": "p1", "claim": "c-1"}
        assert info.cpu_count >= 1 and info.process_count >= 2
        assert 0 < info.memory_used_bytes <= info.memory_total_bytes
        assert 0 < info.disk_used_bytes <= info.disk_total_bytes
        assert info.workspace == str(workspace)
        assert "sk-claimed-secret-1234" not in str(info)


async def test_concurrent_claims_bind_one_agent(pool_daemon: RunningDaemon) -> None:
    tokens = [secrets.token_hex(24) for _ in range(6)]
    async with pool_daemon.client() as pool:

        async def claim(token: str) -> str:
            request = InitSandboxRequest(auth_token=token, env={"WHO": f"agent-{token[:8]}"})
            try:
                await pool.control.init_sandbox(request, headers=pool.headers)
            except ConnectError as exc:
                return exc.code.value
            return "ok"

        outcomes = await asyncio.gather(*(claim(token) for token in tokens))
    assert sorted(outcomes).count("ok") == 1, outcomes
    assert set(outcomes) == {"ok", "failed_precondition"}
    winner = tokens[outcomes.index("ok")]
    for token in tokens:
        async with ExecDaemonClient(pool_daemon.url, token) as client:
            if token == winner:
                assert stdout_of(await shell(client, 'echo "$WHO"')).strip() == f"agent-{token[:8]}"
            else:
                assert await refused_with(client.ping()) == Code.UNAUTHENTICATED


async def test_sigterm_before_any_claim_ends_the_daemon(pool_daemon: RunningDaemon) -> None:
    assert http_status(pool_daemon, "/readyz?unclaimed=ok") == 200
    pool_daemon.process.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(pool_daemon.process.wait, 30) == 0
    assert http_status(pool_daemon, "/healthz") is None


async def test_a_daemon_started_with_its_token_refuses_init_sandbox(tmp_path: Path) -> None:
    with running_daemon(tmp_path, tmp_path / "state") as daemon:
        assert http_status(daemon, "/readyz") == 200
        async with daemon.client() as client:
            request = InitSandboxRequest(auth_token=secrets.token_hex(24))
            bad = client.control.init_sandbox(request, headers=client.headers)
            assert await refused_with(bad) == Code.FAILED_PRECONDITION
            info = await client.control.get_sandbox_info(
                GetSandboxInfoRequest(), headers=client.headers
            )
            assert info.claimed and info.state == "serving" and not info.metadata


async def test_the_token_in_a_second_header_named_by_a_flag(tmp_path: Path) -> None:
    with running_daemon(tmp_path, tmp_path / "state", "--auth-header", "X-Sandbox-Token") as daemon:
        request = PingRequest()
        async with ExecDaemonClient(daemon.url, "unused") as client:
            for value in (daemon.token, f"Bearer {daemon.token}"):
                answer = await client.control.ping(request, headers={"x-sandbox-token": value})
                assert answer.pid == daemon.process.pid
            for wrong in ("", daemon.token[:-1], daemon.token + "0", f"Basic {daemon.token}"):
                bad = client.control.ping(request, headers={"x-sandbox-token": wrong})
                assert await refused_with(bad) == Code.UNAUTHENTICATED
            # Authorization still works beside it.
            assert (await daemon.client().ping()).pid == daemon.process.pid
        # The terminals' port takes it too.
        pty = daemon.pty_port
        given = {"X-Sandbox-Token": daemon.token}
        assert http_status(daemon, "/terminals", port=pty, **given) == 200
        given = {"X-Sandbox-Token": daemon.token[:-1]}
        assert http_status(daemon, "/terminals", port=pty, **given) == 401
    with running_daemon(tmp_path, tmp_path / "state2") as daemon:
        async with ExecDaemonClient(daemon.url, "unused") as client:
            # Without the flag the header is nobody's: refused.
            bad = client.control.ping(request, headers={"x-sandbox-token": daemon.token})
            assert await refused_with(bad) == Code.UNAUTHENTICATED
        given = {"X-Sandbox-Token": daemon.token}
        assert http_status(daemon, "/terminals", port=daemon.pty_port, **given) == 401


def test_the_flag_refuses_a_header_that_is_not_one(tmp_path: Path) -> None:
    for name in ("bad header", "Authorization"):
        finished = subprocess.run(
            [sys.executable, "-m", "exec_daemon", "serve", "--auth-header", name],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env={**os.environ, "EXEC_DAEMON_AUTH_TOKEN": "t" * 32},
        )
        assert finished.returncode == 2 and "--auth-header" in finished.stderr


async def test_sigterm_turns_readiness_503_at_once_and_lets_running_calls_finish(
    tmp_path: Path,
) -> None:
    release = tmp_path / "release"

    def waiting(name: str) -> str:
        started = tmp_path / f"started-{name}"
        return f"touch {started}; while [ ! -e {release} ]; do sleep 0.05; done; echo {name}-done"

    async def on_a_stream(client: ExecDaemonClient) -> str:
        async with client.exec_stream() as stream:
            call = await stream.start(shell_call(waiting("stream"), timeout=120_000))
            async for _message in call:
                pass
        assert call.outcome.result is not None, call.outcome.error
        return stdout_of(call.outcome.result.shell_tool_call.result)

    with running_daemon(tmp_path, tmp_path / "state", "--drain-grace-seconds", "60") as daemon:
        client = daemon.client()
        unary = asyncio.create_task(shell(client, waiting("exec"), timeout=120_000))
        streamed = asyncio.create_task(on_a_stream(client))
        for name in ("exec", "stream"):
            started = tmp_path / f"started-{name}"
            await eventually(started.exists, seconds=30, what=f"the {name} call to run")
        daemon.process.send_signal(signal.SIGTERM)
        await eventually(lambda: http_status(daemon, "/readyz") == 503, what="readiness 503")
        assert http_status(daemon, "/readyz?unclaimed=ok") == 503
        assert http_status(daemon, "/healthz") == 200
        assert await health_status(daemon) == HealthCheckResponse.NOT_SERVING
        # The calls still run (they wait for `release`); new calls are refused meanwhile.
        assert not unary.done() and not streamed.done()
        async with daemon.client() as late:
            assert await refused_with(late.ping()) == Code.UNAVAILABLE
        release.touch()
        result = await asyncio.wait_for(unary, 60)
        assert result.WhichOneof("result") == "success"
        assert "exec-done" in stdout_of(result)
        assert "stream-done" in await asyncio.wait_for(streamed, 60)
        await client.close()
        assert await asyncio.to_thread(daemon.process.wait, 30) == 0


async def test_a_call_outliving_the_grace_period_is_ended(tmp_path: Path) -> None:
    with running_daemon(tmp_path, tmp_path / "state", "--drain-grace-seconds", "1") as daemon:
        client = daemon.client()
        marker = f"600.{time.monotonic_ns() % 10**6:06d}"  # seconds, and unique
        command = f"sleep {marker}"
        running = asyncio.create_task(client.run(shell_call(command)))
        await eventually(lambda: processes_with_argument(marker), 30, "the call's sleep to run")
        daemon.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(daemon.process.wait, 30) == 0
        # Ended with the daemon: nothing of the call is left behind.
        await eventually(
            lambda: not processes_with_argument(marker), what="the call's sleep to end"
        )
        with pytest.raises((ConnectError, ConnectionError)):
            await asyncio.wait_for(running, 30)
        await client.close()


def grpcurl(daemon: RunningDaemon, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(GRPCURL), "-plaintext", *args]
    command[-1:-1] = [f"127.0.0.1:{daemon.port}"]
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


def test_grpcurl_calls_the_health_service_without_a_token(pool_daemon: RunningDaemon) -> None:
    proto = ["-import-path", str(PROTO), "-proto", "agent/v1/health.proto"]
    checked = grpcurl(pool_daemon, *proto, "grpc.health.v1.Health/Check")
    assert checked.returncode == 0, checked.stderr
    assert '"NOT_SERVING"' in checked.stdout
    # With the token, reflection describes it too.
    auth = ["-H", f"authorization: Bearer {pool_daemon.token}"]
    listed = grpcurl(pool_daemon, *auth, "list")
    assert listed.returncode == 0, listed.stderr
    assert "grpc.health.v1.Health" in listed.stdout.split()
    checked = grpcurl(pool_daemon, *auth, "grpc.health.v1.Health/Check")
    assert '"NOT_SERVING"' in checked.stdout, checked.stderr
    unknown = grpcurl(
        pool_daemon, *proto, "-d", '{"service":"nope"}', "grpc.health.v1.Health/Check"
    )
    assert unknown.returncode != 0 and "NotFound" in unknown.stderr


# The 20. Measured on the 2-core shared machine (other test runs beside it), two runs:
# 20 daemons launched at once were all up in 74 s / 47 s, claimed and ran a call each in 21 s /
# 27 s; 132 s / 91 s in all.
POOL_SIZE = int(os.environ.get("EXEC_DAEMON_POOL_TEST_SIZE", "20"))


@pytest.mark.timeout(600)
async def test_a_pool_claimed_concurrently_gives_each_agent_only_its_own(tmp_path: Path) -> None:
    began = time.monotonic()
    with running_pool(POOL_SIZE, tmp_path, seconds=240) as daemons:
        up = time.monotonic() - began
        sandboxes = [PooledSandbox(daemon.url, daemon.token) for daemon in daemons]
        tokens = [secrets.token_hex(24) for _ in daemons]

        async def claim_and_run(index: int) -> tuple[str, str]:
            sandbox = sandboxes[index]
            await sandbox.wait_alive(seconds=60)
            client = await sandbox.claim(
                tokens[index],
                env={"AGENT_INDEX": str(index), "AGENT_SECRET": f"secret-of-agent-{index:04d}"},
                metadata={"index": str(index)},
            )
            await sandbox.wait_ready(seconds=60)
            result = await shell(client, 'echo "$AGENT_INDEX $AGENT_SECRET"; env')
            info = await sandbox.info()
            assert dict(info.metadata) == {"index": str(index)}
            return stdout_of(result).splitlines()[0], stdout_of(result)

        claimed_at = time.monotonic()
        try:
            answers = await asyncio.gather(*(claim_and_run(i) for i in range(len(daemons))))
        except BaseException:
            for index, daemon in enumerate(daemons):
                print(f"--- daemon {index} ---\n{daemon.log()[-3000:]}")
            raise
        claimed = time.monotonic() - claimed_at
        for index, (first_line, environment) in enumerate(answers):
            assert first_line == f"{index} secret-of-agent-{index:04d}"
            # No other agent's secret or token, nor any token at all, reaches its processes.
            others = [f"secret-of-agent-{other:04d}" for other in range(len(daemons))]
            others.remove(f"secret-of-agent-{index:04d}")
            assert not [other for other in others if other in environment]
            assert not [token for token in tokens if token in environment]
            assert daemons[index].token not in environment
        # Each daemon opens to its own agent's token only.
        for index, daemon in enumerate(daemons):
            neighbour = tokens[(index + 1) % len(daemons)]
            async with ExecDaemonClient(daemon.url, neighbour) as stranger:
                assert await refused_with(stranger.ping()) == Code.UNAUTHENTICATED
        # Drain: SIGTERM each, readiness drops, the port closes.
        await asyncio.gather(
            *(
                sandbox.drain(daemon.process.terminate, seconds=60)
                for sandbox, daemon in zip(sandboxes, daemons, strict=True)
            )
        )
        for daemon in daemons:
            assert wait_until(lambda d=daemon: d.process.poll() is not None, 30) is not None
            assert daemon.process.returncode == 0, daemon.log()[-2000:]
    print(f"\n{len(daemons)} daemons up in {up:.1f}s, claimed and run in {claimed:.1f}s")


async def test_a_waiting_daemon_holds_its_terminal_port_until_it_serves_it(
    pool_daemon: RunningDaemon,
) -> None:
    # Served only once claimed, but the daemon's from the start: nobody else can take it.
    with socket.socket() as intruder:
        with pytest.raises(OSError) as taken:
            intruder.bind(("127.0.0.1", pool_daemon.pty_port))
        assert taken.value.errno == errno.EADDRINUSE
    # Bound, not listening: nothing answers there before the claim.
    assert http_status(pool_daemon, "/terminals", port=pool_daemon.pty_port) is None
    sandbox = PooledSandbox(pool_daemon.url, pool_daemon.token)
    agent_token = secrets.token_hex(24)
    async with await sandbox.claim(agent_token):
        agent = {"Authorization": f"Bearer {agent_token}"}
        status = http_status(pool_daemon, "/terminals", port=pool_daemon.pty_port, **agent)
        assert status == 200
