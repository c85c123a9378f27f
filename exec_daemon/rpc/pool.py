"""Late binding (`serve --wait-for-init`): a warm pool's daemon waits for its agent.

It starts with a credential the whole pool shares and answers only health and
ControlService.InitSandbox (exec_daemon/rpc/asgi.py keeps the rest out). The first valid
InitSandbox binds it, once: its token (the pool credential stops working), environment (secrets
named in `secret_names` are redacted), workspace, user and metadata. The composition root
(exec_daemon/server.py) then sets the daemon up for that agent, as a daemon started with its
token is at start, and InitSandbox answers once the daemon serves it.
"""

from __future__ import annotations

import asyncio
import hmac
import os
import pwd
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext

from agent.v1.control_connect import ControlService as ControlServiceBase
from agent.v1.pool_pb2 import InitSandboxRequest, InitSandboxResponse
from exec_daemon.guards.redaction import SECRET_NAMES_VARIABLE
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.lifecycle import Lifecycle
from exec_daemon.kernel.secrets import keep_secret

# Printable ASCII without spaces (it travels in a header), long enough not to be guessed.
_TOKEN = re.compile(r"[\x21-\x7e]{16,4096}")
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
MAX_METADATA_ENTRIES = 64
MAX_METADATA_CHARS = 1024
ALREADY_CLAIMED = "this daemon is already bound to its agent: InitSandbox is answered once"
NOT_WAITING = "this daemon was started with its token (no --wait-for-init): nothing to bind"


def refused(message: str) -> ConnectError:
    return ConnectError(Code.INVALID_ARGUMENT, f"InitSandbox: {message}")


@dataclass(frozen=True)
class Claim:
    """What InitSandbox binds: the agent's config (token, workspace), the variables added to
    the environment, and what GetSandboxInfo reports back."""

    config: DaemonConfig
    env: dict[str, str]
    user: str
    metadata: dict[str, str]


def daemon_user() -> pwd.struct_passwd:
    return pwd.getpwuid(os.geteuid())


def claim_from(request: InitSandboxRequest, config: DaemonConfig) -> Claim:
    """The claim `request` asks for, checked whole before anything changes (else a typed
    invalid_argument naming the field)."""
    if not _TOKEN.fullmatch(request.auth_token):
        raise refused("auth_token must be 16 to 4096 printable ASCII characters, no spaces")
    if hmac.compare_digest(request.auth_token.encode(), config.auth_token.encode()):
        raise refused("auth_token must not be the pool's credential")
    workspace = config.workspace
    if request.workspace:
        given = Path(request.workspace)
        if not given.is_absolute():
            raise refused(f"workspace must be an absolute path: {request.workspace!r}")
        workspace = given.resolve()
        if not workspace.is_dir():
            raise refused(f"workspace is not an existing folder: {request.workspace!r}")
    env = dict(request.env)
    for name, value in env.items():
        if not _VARIABLE_NAME.fullmatch(name) or "\0" in value:
            raise refused(f"env: {name!r} is not a variable name, or its value holds a NUL")
    account = daemon_user()
    if request.user and request.user != account.pw_name:
        raise refused(
            f"user {request.user!r}: the daemon runs as {account.pw_name!r} and starts the "
            "agent's processes as itself (give that user, or none)"
        )
    if request.user:
        env.update(HOME=account.pw_dir, USER=account.pw_name, LOGNAME=account.pw_name)
    if len(request.metadata) > MAX_METADATA_ENTRIES or any(
        len(key) > MAX_METADATA_CHARS or len(value) > MAX_METADATA_CHARS
        for key, value in request.metadata.items()
    ):
        raise refused(
            f"metadata: at most {MAX_METADATA_ENTRIES} entries of {MAX_METADATA_CHARS} "
            "characters each"
        )
    secret_names = [name for name in request.secret_names if name]
    for name in secret_names:
        if not _VARIABLE_NAME.fullmatch(name):
            raise refused(f"secret_names: {name!r} is not a variable name")
    if secret_names:
        declared = [
            *os.environ.get(SECRET_NAMES_VARIABLE, "").split(","),
            *env.get(SECRET_NAMES_VARIABLE, "").split(","),
            *secret_names,
        ]
        env[SECRET_NAMES_VARIABLE] = ",".join(
            dict.fromkeys(name.strip() for name in declared if name.strip())
        )
    claimed = replace(
        config,
        auth_token=request.auth_token,
        workspace=workspace,
        secret_redaction_enabled=config.secret_redaction_enabled or bool(secret_names),
    )
    return Claim(claimed, env, request.user, dict(request.metadata))


class ClaimFailed(Exception):
    """The daemon could not be set up for the claim (its log says why)."""


class Claims:
    """Hands the one accepted claim from InitSandbox to the composition root, and its outcome
    back."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self._claim: asyncio.Future[Claim] = loop.create_future()
        self._started: asyncio.Future[None] = loop.create_future()

    async def accepted(self) -> Claim:
        return await asyncio.shield(self._claim)

    def submit(self, claim: Claim) -> None:
        self._claim.set_result(claim)

    async def started(self) -> None:
        await asyncio.shield(self._started)

    def serving(self) -> None:
        if self._claim.done() and not self._started.done():
            self._started.set_result(None)

    def failed(self, why: str) -> None:
        """The InitSandbox waiting for its claim (if one is) gets `why`."""
        if self._claim.done() and not self._started.done():
            self._started.set_exception(ClaimFailed(why))


class PoolControlService(ControlServiceBase):
    """ControlService before the claim: InitSandbox only (the front door refuses the rest)."""

    def __init__(self, config: DaemonConfig, lifecycle: Lifecycle, claims: Claims) -> None:
        self._config = config
        self._lifecycle = lifecycle
        self._claims = claims

    async def init_sandbox(
        self,
        request: InitSandboxRequest,
        ctx: RequestContext[InitSandboxRequest, InitSandboxResponse],
    ) -> InitSandboxResponse:
        began = time.monotonic()
        claim = await asyncio.to_thread(claim_from, request, self._config)
        if not self._lifecycle.begin_claim():
            raise ConnectError(Code.FAILED_PRECONDITION, ALREADY_CLAIMED)
        # Before anything is started: no process of the agent's ever sees it.
        keep_secret(claim.config.auth_token)
        self._lifecycle.bound(claim.metadata, claim.user)
        self._claims.submit(claim)
        try:
            await self._claims.started()
        except ClaimFailed as exc:
            raise ConnectError(Code.UNAVAILABLE, f"the daemon could not start: {exc}") from None
        return InitSandboxResponse(
            workspace=str(claim.config.workspace),
            user=claim.user or daemon_user().pw_name,
            start_ms=int((time.monotonic() - began) * 1000),
        )
