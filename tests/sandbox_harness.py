"""Runs real commands under the real sandbox helper, as root and as an unprivileged user.

The daemon side (SandboxService: policy, plan, proxy) runs in the test process; the helper and
the command run as `Identity` (an unprivileged one is created with useradd when the tests run
as root, and entered with setpriv).
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.v1.shell_pb2 import SandboxPolicy
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.state import Daemon
from sandbox.build import ensure_helper
from sandbox.service import SandboxService

TEST_USER = "exec-daemon-sbx"
RUN_TIMEOUT_SECONDS = 30.0
RW = SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READWRITE)


@dataclass(frozen=True)
class Identity:
    name: str
    uid: int
    gid: int

    def wrap(self, argv: Sequence[str]) -> list[str]:
        if self.uid == os.geteuid():
            return list(argv)
        return [
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--",
            *argv,
        ]


def current_identity() -> Identity:
    return Identity("root" if os.geteuid() == 0 else "user", os.geteuid(), os.getegid())


def unprivileged_identity() -> Identity:
    """The current user if unprivileged, else TEST_USER (created if missing)."""
    if os.geteuid() != 0:
        return current_identity()
    try:
        entry = pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", TEST_USER],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam(TEST_USER)
    return Identity("user", entry.pw_uid, entry.pw_gid)


def identities() -> list[Identity]:
    """Root and an unprivileged user when running as root; else just the current user."""
    if os.geteuid() == 0:
        return [current_identity(), unprivileged_identity()]
    return [current_identity()]


def owned_directory(identity: Identity, prefix: str, parent: str = "/tmp") -> Path:
    """A fresh directory the identity owns (mkdtemp under /tmp: reachable by any user)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    path.chmod(0o755)
    if identity.uid != os.geteuid():
        os.chown(path, identity.uid, identity.gid)
    return path


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


_helper_path: str | None = None


def helper_path() -> str:
    global _helper_path
    if _helper_path is None:
        _helper_path = str(ensure_helper())
    return _helper_path


def sandbox_service(
    workspace: Path, *, enabled: bool = True, state_root: Path | None = None
) -> SandboxService:
    """`state_root`: the daemon's state root (default: a new one, not made)."""
    config = DaemonConfig(
        auth_token="t",
        workspace=workspace,
        sandbox_enabled=enabled,
        sandbox_helper_path=helper_path(),
        **({} if state_root is None else {"state_root": state_root}),
    )
    return Daemon(config).service(SandboxService)


class SandboxHarness:
    def __init__(self, workspace: Path, identity: Identity, service: SandboxService) -> None:
        self.workspace = workspace
        self.identity = identity
        self.service = service
        self.env = {**os.environ, "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}

    async def spawn(
        self, script: str, policy: SandboxPolicy | None = None, *, stdin_pipe: bool = False
    ) -> tuple[asyncio.subprocess.Process, object]:
        effective = self.service.resolve(policy or RW)
        confinement = await self.service.confine(effective, self.workspace, env=self.env)
        process = await asyncio.create_subprocess_exec(
            *self.identity.wrap(confinement.argv(["bash", "-c", script])),
            env=confinement.env(self.env),
            pass_fds=confinement.pass_fds,
            cwd=self.workspace,
            stdin=asyncio.subprocess.PIPE if stdin_pipe else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            await confinement.started()
        except BaseException:
            process.kill()
            await process.wait()
            raise
        return process, confinement

    async def run(self, script: str, policy: SandboxPolicy | None = None) -> Result:
        process, _confinement = await self.spawn(script, policy)
        out, err = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT_SECONDS)
        assert process.returncode is not None
        return Result(
            process.returncode, out.decode(errors="replace"), err.decode(errors="replace")
        )


def processes_with_argument(marker: str) -> list[int]:
    """Pids (in our namespace) of processes with `marker` as one of their arguments."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            arguments = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in arguments:
            found.append(int(entry))
    return found


def iter_identity_ids() -> Iterator[str]:
    for identity in identities():
        yield identity.name
