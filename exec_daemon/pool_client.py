"""What a warm pool's controller does for one daemon (`serve --wait-for-init`): wait until it is
up, claim it with InitSandbox, hand out a client with the agent's token, drain it.

sandbox = PooledSandbox("http://10.0.0.7:8080", pool_token)
await sandbox.wait_alive(seconds=60)                 # GET /healthz answers 200
client = await sandbox.claim(agent_token, env={...}, metadata={"claim": "c-42"})
outcome = await client.run(shell_call("make test"))  # the agent's calls, its token
await sandbox.drain(lambda: pod.delete(), seconds=60)  # /readyz turns 503, then the port closes

docs/scale-out.md tells where this sits in a Kubernetes pool (agent-sandbox).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence

import httpx

from agent.v1.pool_pb2 import (
    GetSandboxInfoRequest,
    GetSandboxInfoResponse,
    InitSandboxRequest,
    InitSandboxResponse,
)
from exec_daemon.client import ExecDaemonClient

POLL_SECONDS = 0.1


class NotReady(TimeoutError):
    """The daemon did not reach the asked-for state in time."""


class PooledSandbox:
    def __init__(self, address: str, pool_token: str, *, timeout_ms: int | None = 60_000) -> None:
        self.address = address.rstrip("/")
        self._pool_token = pool_token
        self._timeout_ms = timeout_ms
        self.claimed: InitSandboxResponse | None = None
        self.client: ExecDaemonClient | None = None

    async def probe(self, path: str) -> int | None:
        """The HTTP status of GET `path` (/healthz, /readyz), or None when nothing answers."""
        async with httpx.AsyncClient(trust_env=False, timeout=5.0) as http:
            try:
                return (await http.get(f"{self.address}{path}")).status_code
            except httpx.HTTPError:
                return None

    async def wait_alive(self, seconds: float) -> None:
        """Until /healthz answers 200 (the daemon is up; unclaimed it is not ready yet)."""
        await self._wait_for("/healthz", lambda status: status == 200, seconds)

    async def wait_ready(self, seconds: float) -> None:
        """Until /readyz answers 200 (serving its agent)."""
        await self._wait_for("/readyz", lambda status: status == 200, seconds)

    async def claim(
        self,
        agent_token: str,
        *,
        env: Mapping[str, str] | None = None,
        secret_names: Sequence[str] = (),
        workspace: str = "",
        user: str = "",
        metadata: Mapping[str, str] | None = None,
    ) -> ExecDaemonClient:
        """Binds the daemon to its agent with InitSandbox (answered once it serves the agent);
        the client returned carries the agent's token. Raises the daemon's ConnectError."""
        request = InitSandboxRequest(
            auth_token=agent_token,
            env=dict(env or {}),
            secret_names=list(secret_names),
            workspace=workspace,
            user=user,
            metadata=dict(metadata or {}),
        )
        async with ExecDaemonClient(
            self.address, self._pool_token, timeout_ms=self._timeout_ms
        ) as pool:
            self.claimed = await pool.control.init_sandbox(request, headers=pool.headers)
        self.client = ExecDaemonClient(self.address, agent_token, timeout_ms=self._timeout_ms)
        return self.client

    async def info(self) -> GetSandboxInfoResponse:
        if self.client is None:
            raise RuntimeError("claim the sandbox first: GetSandboxInfo needs the agent's token")
        return await self.client.control.get_sandbox_info(
            GetSandboxInfoRequest(), headers=self.client.headers
        )

    async def drain(self, terminate: Callable[[], object], seconds: float) -> None:
        """Asks for the end (`terminate`: SIGTERM the daemon, delete its pod), then waits until
        it is not ready any more and its port is closed."""
        terminate()
        await self._wait_for("/readyz", lambda status: status != 200, seconds)
        await self._wait_for("/healthz", lambda status: status is None, seconds)
        if self.client is not None:
            await self.client.close()
            self.client = None

    async def _wait_for(
        self, path: str, wanted: Callable[[int | None], bool], seconds: float
    ) -> None:
        deadline = time.monotonic() + seconds
        status = await self.probe(path)
        while not wanted(status):
            if time.monotonic() > deadline:
                raise NotReady(f"{self.address}{path}: still {status} after {seconds}s")
            await asyncio.sleep(POLL_SECONDS)
            status = await self.probe(path)
