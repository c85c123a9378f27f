"""The sandbox on this kernel: the real helper confining real bash, as root and as a plain user.

Each test runs a script inside the sandbox and checks what a user would notice: which writes
land, which fail, what the network and the process table look like, what is left afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agent.v1.shell_pb2 import SandboxPolicy
from exec_daemon.kernel.processes import UNCONFINED, SpawnSpec
from exec_daemon.kernel.sandboxing import SandboxDemand
from sandbox.plan import build_plan
from sandbox.policy import SandboxRejected
from sandbox.probe import SIMULATE_MISSING_ENV, KernelSupport
from tests.polling import eventually
from tests.sandbox_harness import (
    RW,
    Identity,
    SandboxHarness,
    identities,
    owned_directory,
    processes_with_argument,
    remove_tree,
    sandbox_service,
)

pytestmark = pytest.mark.timeout(60)

PY = "/usr/bin/python3"


@pytest.fixture(params=identities(), ids=lambda identity: identity.name)
def identity(request: pytest.FixtureRequest) -> Identity:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def sandbox_workspace(identity: Identity) -> Iterator[Path]:
    path = owned_directory(identity, "sbx-ws-")
    yield path
    remove_tree(path)


@pytest.fixture
def outside_dir(identity: Identity) -> Iterator[Path]:
    """A directory the user could write by permissions, but outside every sandbox grant."""
    path = Path(
        tempfile.mkdtemp(
            prefix="exec-daemon-sbx-outside-", dir="/opt" if os.geteuid() == 0 else None
        )
    )
    path.chmod(0o777)
    yield path
    remove_tree(path)


@pytest.fixture
async def harness(sandbox_workspace: Path, identity: Identity) -> AsyncIterator[SandboxHarness]:
    service = sandbox_service(sandbox_workspace)
    yield SandboxHarness(sandbox_workspace, identity, service)
    await service.aclose()


def as_identity(identity: Identity, *argv: str, cwd: Path) -> None:
    subprocess.run(identity.wrap(argv), cwd=cwd, check=True, capture_output=True)


def make_repository(identity: Identity, workspace: Path) -> None:
    as_identity(identity, "git", "init", "-q", ".", cwd=workspace)
    for directory in (".vscode", ".cursor/rules", ".cursor/deep", ".claude"):
        (workspace / directory).mkdir(parents=True)
    files = {
        ".vscode/settings.json": "{}",
        ".cursorignore": "secret\n",
        ".cursor/mcp.json": "{}",
        ".cursor/deep/hooks.json": "{}",
        ".claude/settings.json": "{}",
        ".git/hooks/post-commit": "#!/bin/sh\n",
    }
    for name, text in files.items():
        (workspace / name).write_text(text)
    if identity.uid != os.geteuid():
        subprocess.run(
            ["chown", "-R", f"{identity.uid}:{identity.gid}", str(workspace)], check=True
        )


def exists(path: Path) -> bool:
    return os.path.lexists(path)


def snapshot(workspace: Path, names: list[str]) -> dict[str, str | None]:
    result: dict[str, str | None] = {}
    for name in names:
        path = workspace / name
        result[name] = path.read_text() if path.is_file() else ("<dir>" if path.is_dir() else None)
    return result


# ---------------------------------------------------------------------------------------------
# Files


async def test_writes_land_in_workspace_and_tmp_and_nowhere_else(
    harness: SandboxHarness, outside_dir: Path
) -> None:
    tmp_file = Path(tempfile.gettempdir()) / f"sbx-{os.getpid()}-{time.monotonic_ns()}"
    result = await harness.run(
        f"""
        echo inside > inside.txt && echo ok-workspace
        echo tmp > {tmp_file} && echo ok-tmp
        echo out > {outside_dir}/x || echo denied-outside
        touch /etc/sbx-test || echo denied-etc
        echo hi > /dev/null && echo ok-devnull
        echo "sandbox=$CURSOR_SANDBOX uid=$(id -u)"
        """
    )
    try:
        assert "ok-workspace" in result.stdout and "ok-tmp" in result.stdout
        assert "denied-outside" in result.stdout and "denied-etc" in result.stdout
        assert "ok-devnull" in result.stdout
        assert f"sandbox=native uid={harness.identity.uid}" in result.stdout
        assert (harness.workspace / "inside.txt").read_text() == "inside\n"
        assert tmp_file.read_text() == "tmp\n"
        assert not exists(outside_dir / "x") and not exists(Path("/etc/sbx-test"))
    finally:
        tmp_file.unlink(missing_ok=True)


async def test_disable_tmp_write_and_readonly_workspace(harness: SandboxHarness) -> None:
    tmp_file = Path(tempfile.gettempdir()) / f"sbx-notmp-{os.getpid()}"
    no_tmp = SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READWRITE, disable_tmp_write=True)
    result = await harness.run(
        f"echo x > {tmp_file} || echo denied-tmp; echo y > w.txt && echo ok", no_tmp
    )
    assert "denied-tmp" in result.stdout and "ok" in result.stdout
    assert not tmp_file.exists()

    readonly = SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READONLY)
    result = await harness.run(
        "cat w.txt; echo z > w.txt || echo denied-ws; rm w.txt || echo denied-rm", readonly
    )
    assert result.stdout.startswith("y\n")
    assert "denied-ws" in result.stdout and "denied-rm" in result.stdout
    assert (harness.workspace / "w.txt").read_text() == "y\n"


PROTECTED_WRITES = {
    ".git/config": "echo '[core]' >> .git/config",
    ".git/hooks/pre-commit": "echo evil > .git/hooks/pre-commit",
    ".vscode/settings.json": "echo evil > .vscode/settings.json",
    ".vscode/tasks.json": "echo evil > .vscode/tasks.json",
    ".cursorignore": "echo > .cursorignore",
    ".cursor/mcp.json": "echo evil > .cursor/mcp.json",
    ".cursor/new.json": "echo evil > .cursor/new.json",
    ".cursor/deep/hooks.json": "echo evil > .cursor/deep/hooks.json",
    ".claude/settings.json": "echo evil > .claude/settings.json",
}


async def test_protected_paths_that_exist_stay_read_only(
    harness: SandboxHarness, identity: Identity
) -> None:
    make_repository(identity, harness.workspace)
    names = [*PROTECTED_WRITES, ".git/hooks/post-commit"]
    before = snapshot(harness.workspace, names)
    script = "\n".join(
        f"{command} 2>/dev/null && echo WROTE {name}" for name, command in PROTECTED_WRITES.items()
    )
    script += (
        "\necho rule > .cursor/rules/new.mdc && echo ok-rules\necho x > src.txt && echo ok-src"
    )
    result = await harness.run(script)
    assert "WROTE" not in result.stdout, result.stdout
    assert "ok-rules" in result.stdout and "ok-src" in result.stdout
    assert snapshot(harness.workspace, names) == before
    assert (harness.workspace / ".cursor/rules/new.mdc").read_text() == "rule\n"


async def test_protected_paths_that_do_not_exist_cannot_be_created(harness: SandboxHarness) -> None:
    creations = {
        ".git": "git init -q . && git config core.hooksPath /tmp",
        ".vscode": "mkdir .vscode && echo {} > .vscode/settings.json",
        ".cursorignore": "echo '*' > .cursorignore",
        ".cursor": "mkdir -p .cursor/x && echo {} > .cursor/mcp.json",
        ".claude": "mkdir -p .claude && echo {} > .claude/settings.json",
    }
    script = "\n".join(
        f"({command}) 2>/dev/null && echo CREATED {name}" for name, command in creations.items()
    )
    script += "\nrm -rf .vscode .cursorignore 2>/dev/null; ln -s /tmp/x .cursorignore 2>/dev/null && echo CREATED link"
    script += "\nls -A"
    result = await harness.run(script)
    assert "CREATED" not in result.stdout, result.stdout
    # Inside, the placeholders were there; the daemon keeps them (empty) for the next sandbox...
    assert ".vscode" in result.stdout
    for name in (".git", ".vscode", ".cursorignore", ".cursor", ".claude"):
        assert os.listdir(harness.workspace / name) == [], name
    # ...and removes them when it is done with sandboxes: nothing is left in the workspace.
    await harness.service.aclose()
    assert sorted(os.listdir(harness.workspace)) == []


async def test_mv_rm_symlink_and_hardlink_tricks(
    harness: SandboxHarness, identity: Identity
) -> None:
    make_repository(identity, harness.workspace)
    names = [".git/config", ".git/hooks/post-commit", ".vscode/settings.json", ".cursorignore"]
    before = snapshot(harness.workspace, names)
    tricks = [
        "mv .git/config /tmp/stolen-config",
        "rm -f .git/config",
        "rm -rf .git/hooks",
        "mv .git/hooks .git/hooks.old",
        "mv .git .git-moved",
        "mv .vscode vscode",
        "rm -rf .vscode",
        "mv .cursorignore x",
        "ln -s /tmp/evil-hook .git/hooks/pre-commit",
        "ln .git/config hardlink && echo evil >> hardlink",
        "ln .cursorignore hardlink2 && echo evil >> hardlink2",
        "cp /etc/hostname .git/config",
        "git config core.fsmonitor 'touch /tmp/pwned'",
        f"mv {harness.workspace} {harness.workspace}-moved",
        "cd .. && mv " + harness.workspace.name + " moved",
    ]
    script = "\n".join(f"({trick}) 2>/dev/null && echo 'SUCCEEDED {trick}'" for trick in tricks)
    result = await harness.run(script)
    assert "SUCCEEDED" not in result.stdout, result.stdout
    assert harness.workspace.is_dir()
    assert snapshot(harness.workspace, names) == before
    assert not (harness.workspace / ".git/hooks/pre-commit").exists()
    assert "fsmonitor" not in (harness.workspace / ".git/config").read_text()


async def test_git_works_inside_while_its_config_and_hooks_do_not_change(
    harness: SandboxHarness, identity: Identity
) -> None:
    make_repository(identity, harness.workspace)
    (harness.workspace / ".cursorignore").unlink()
    remove_tree(harness.workspace / ".vscode")
    result = await harness.run(
        "git -c user.name=a -c user.email=a@b add -A && "
        "git -c user.name=a -c user.email=a@b commit -qm first && git log --oneline | wc -l && "
        "git show --stat --format= HEAD"
    )
    assert result.returncode == 0, result.output
    assert result.stdout.splitlines()[0].strip() == "1"
    # The placeholders standing in for the missing .cursorignore and .vscode were not committed.
    assert ".cursorignore" not in result.stdout and ".vscode" not in result.stdout


async def test_block_git_writes(harness: SandboxHarness, identity: Identity) -> None:
    make_repository(identity, harness.workspace)
    policy = SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READWRITE, block_git_writes=True)
    result = await harness.run(
        "git add -A 2>&1 || echo blocked; echo x > file.txt && echo ok", policy
    )
    assert "blocked" in result.stdout and "ok" in result.stdout


# ---------------------------------------------------------------------------------------------
# System calls and processes

SYSCALLS_SCRIPT = f"""
{PY} - <<'EOF'
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
calls = {{
    "ptrace": (101, 16, 1, 0, 0),       # PTRACE_ATTACH to pid 1
    "unshare": (272, 0x10000000, 0, 0, 0),  # CLONE_NEWUSER
    "mount": (165, 0, 0, 0, 0),
    "umount2": (166, 0, 0, 0, 0),
    "io_uring_setup": (425, 8, 0, 0, 0),
    "bpf": (321, 0, 0, 0, 0),
    "setns": (308, 0, 0, 0, 0),
    "open_by_handle_at": (304, 0, 0, 0, 0),
}}
for name, (nr, *args) in calls.items():
    ctypes.set_errno(0)
    result = libc.syscall(nr, *args)
    print(name, "ALLOWED" if result >= 0 else errno.errorcode.get(ctypes.get_errno()))
EOF
umount /proc 2>/dev/null && echo UMOUNTED
unshare -r true 2>/dev/null && echo UNSHARED
"""


async def test_ptrace_mount_unshare_io_uring_bpf_are_refused(harness: SandboxHarness) -> None:
    result = await harness.run(SYSCALLS_SCRIPT)
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    for name in (
        "ptrace",
        "unshare",
        "mount",
        "umount2",
        "io_uring_setup",
        "bpf",
        "setns",
        "open_by_handle_at",
    ):
        assert lines.get(name) == "EPERM", result.output
    assert "UMOUNTED" not in result.stdout and "UNSHARED" not in result.stdout


async def test_pid_namespace_hides_and_protects_outside_processes(harness: SandboxHarness) -> None:
    daemon_pid = os.getpid()
    result = await harness.run(
        f"""
        kill -TERM {daemon_pid} 2>/dev/null && echo KILLED-DAEMON
        kill -9 -1 2>/dev/null; true
        echo pids: $(ls /proc | grep -E '^[0-9]+$' | wc -l)
        echo self: $$
        """
    )
    # `kill -9 -1` ended the sandbox's own shell; the test process (the "daemon") is untouched.
    assert "KILLED-DAEMON" not in result.stdout
    assert os.getpid() == daemon_pid
    result = await harness.run(
        "echo pids: $(ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '); echo self=$$"
    )
    pids = result.stdout.split("pids:")[1].split("self=")[0].split()
    # Only the sandbox's own few processes (init, bash, the pipeline): nothing from outside.
    assert len(pids) <= 8 and all(int(pid) < 20 for pid in pids), result.stdout


async def test_setsid_grandchild_dies_with_the_command(harness: SandboxHarness) -> None:
    marker = f"{3000 + os.getpid() % 1000}.{time.monotonic_ns() % 1000}"
    result = await harness.run(
        f"setsid sleep {marker} > /dev/null 2>&1 < /dev/null & disown; echo started"
    )
    assert "started" in result.stdout
    await eventually(lambda: processes_with_argument(marker) == [], what="the grandchild to die")


async def test_killing_the_helper_kills_everything_it_started(harness: SandboxHarness) -> None:
    marker = f"{4000 + os.getpid() % 1000}.{time.monotonic_ns() % 1000}"
    process, _ = await harness.spawn(
        f"setsid sleep {marker} >/dev/null 2>&1 </dev/null & (sleep {marker} &) ; sleep {marker}"
    )
    deadline = time.monotonic() + 5
    while len(processes_with_argument(marker)) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert len(processes_with_argument(marker)) == 3
    process.kill()  # SIGKILL to the helper alone, not to its process group
    await process.wait()
    deadline = time.monotonic() + 5
    while processes_with_argument(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert processes_with_argument(marker) == []


async def test_sigterm_reaches_the_command_and_the_exit_status_comes_back(
    harness: SandboxHarness,
) -> None:
    process, _ = await harness.spawn(
        "trap 'echo got-term; exit 42' TERM; echo ready; sleep 30 & wait"
    )
    assert process.stdout is not None
    assert (await process.stdout.readline()).strip() == b"ready"
    process.send_signal(signal.SIGTERM)
    out, _err = await asyncio.wait_for(process.communicate(), 10)
    assert b"got-term" in out and process.returncode == 42
    result = await harness.run("kill -KILL $$")
    assert result.returncode == -signal.SIGKILL


async def test_signals_sent_to_the_helper_reach_the_command_once(harness: SandboxHarness) -> None:
    process, _ = await harness.spawn(
        "trap 'echo usr1' USR1; trap 'echo int; exit 3' INT; echo ready;"
        " for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.1; done; echo late; sleep 30 & wait"
    )
    assert process.stdout is not None
    assert (await process.stdout.readline()).strip() == b"ready"
    process.send_signal(signal.SIGUSR1)
    assert (await asyncio.wait_for(process.stdout.readline(), 10)).strip() == b"usr1"
    # After the loop the command waits in `sleep 30 & wait`, where INT must reach it too.
    assert (await asyncio.wait_for(process.stdout.readline(), 10)).strip() == b"late"
    process.send_signal(signal.SIGINT)
    out, _err = await asyncio.wait_for(process.communicate(), 10)
    assert out.decode().split() == ["int"]
    assert process.returncode == 3


# ---------------------------------------------------------------------------------------------
# Network and sockets


class LoopbackServers:
    """A TCP and a UDP server on 127.0.0.1 that record whatever reaches them."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def ports(self) -> tuple[int, int]:
        return self.tcp.getsockname()[1], self.udp.getsockname()[1]

    def _serve(self) -> None:
        self.tcp.settimeout(0.05)
        self.udp.settimeout(0.05)
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                connection, _ = self.tcp.accept()
                self.received.append(b"tcp-connection")
                connection.close()
            with contextlib.suppress(TimeoutError):
                self.received.append(self.udp.recv(100))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.tcp.close()
        self.udp.close()


async def test_network_is_denied_by_default_and_open_when_granted(harness: SandboxHarness) -> None:
    servers = LoopbackServers()
    tcp_port, udp_port = servers.ports
    script = f"""
        (echo hi > /dev/tcp/127.0.0.1/{tcp_port}) 2>/dev/null && echo TCP-OK
        (echo hi > /dev/udp/127.0.0.1/{udp_port}) 2>/dev/null && echo UDP-SENT
        {PY} -c 'import socket; socket.socket(socket.AF_INET)' 2>&1 | tail -1
        true
    """
    try:
        result = await harness.run(script)
        assert "TCP-OK" not in result.stdout and "UDP-SENT" not in result.stdout
        assert "Address family not supported" in result.stdout
        granted = SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READWRITE, network_access=True)
        result = await harness.run(script, granted)
        assert "TCP-OK" in result.stdout and "UDP-SENT" in result.stdout
        # Exactly the granted run's connection and datagram: anything the denied run had sent
        # would have reached the servers before them.
        both = [b"hi\n", b"tcp-connection"]
        await eventually(lambda: len(servers.received) >= 2, what="the granted run's packets")
        assert sorted(servers.received) == both
    finally:
        servers.close()


async def test_unix_socket_outside_is_unreachable_inside_ones_work(
    harness: SandboxHarness, identity: Identity
) -> None:
    directory = owned_directory(identity, "sbx-sock-")
    path = directory / "outside.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    path.chmod(0o777)
    server.listen()
    server.settimeout(0.5)
    abstract_name = f"\0exec-daemon-sbx-test-{os.getpid()}"
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(abstract_name)
    abstract.listen()
    abstract.settimeout(0.1)
    try:
        result = await harness.run(
            f"""{PY} - <<'EOF'
import socket, os
for address in ({str(path)!r}, {abstract_name!r}):
    try:
        socket.socket(socket.AF_UNIX).connect(address); print("CONNECTED-OUTSIDE", repr(address))
    except OSError as exc:
        print("refused", exc.errno)
inner = socket.socket(socket.AF_UNIX); inner.bind("inner.sock"); inner.listen()
client = socket.socket(socket.AF_UNIX); client.connect("inner.sock"); print("inner-ok")
EOF"""
        )
        assert "CONNECTED-OUTSIDE" not in result.stdout and "inner-ok" in result.stdout, (
            result.output
        )
        for listener in (server, abstract):
            with pytest.raises(TimeoutError):
                listener.accept()
    finally:
        server.close()
        abstract.close()
        remove_tree(directory)


# ---------------------------------------------------------------------------------------------
# Honest degradation


@pytest.mark.parametrize("feature", ["landlock", "namespaces", "seccomp"])
async def test_a_missing_kernel_feature_rejects_the_call(
    feature: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(SIMULATE_MISSING_ENV, feature)
    service = sandbox_service(tmp_path)
    support = await service.start()
    assert isinstance(support, KernelSupport)
    assert "UNAVAILABLE" in support.status_line(True)
    with pytest.raises(SandboxRejected) as rejected:
        await service.confine(service.resolve(RW), tmp_path, env=os.environ)
    expected = {"landlock": "Landlock ABI", "namespaces": "namespaces", "seccomp": "seccomp"}[
        feature
    ]
    assert expected in rejected.value.reason
    # Unconfined calls are not affected.
    assert not service.resolve(SandboxPolicy(type=SandboxPolicy.TYPE_INSECURE_NONE)).sandboxed


async def test_probe_reports_this_kernel(tmp_path: Path) -> None:
    support = await sandbox_service(tmp_path).start()
    assert support.landlock_abi >= 3 and support.namespaces and support.seccomp
    assert support.missing() == []
    assert support.status_line(True).startswith("sandbox: enabled; kernel: Landlock ABI")
    # Root is not bound by RLIMIT_NPROC: this machine has a pids cgroup for it.
    assert support.process_limit == ("pids_cgroup" if os.geteuid() == 0 else "rlimit")
    assert f"process limit {support.process_limit.replace('_', ' ')}" in support.status_line(True)


def test_without_a_way_to_limit_processes_the_policy_says_so(tmp_path: Path) -> None:
    policy = sandbox_service(tmp_path).resolve(None)
    held = build_plan(policy, tmp_path, tmp_path, env={})
    assert held.options[held.options.index("--max-processes") + 1] == "1024"
    unheld = build_plan(policy, tmp_path, tmp_path, env={}, limit_processes=False)
    assert "--max-processes" not in unheld.options
    assert any("maxProcesses (1024) is not enforced" in note for note in unheld.notes)


async def test_a_setup_failure_in_the_helper_is_a_rejection(harness: SandboxHarness) -> None:
    (harness.workspace / ".vscode").symlink_to("/tmp")
    with pytest.raises(SandboxRejected, match=r"\.vscode is a symbolic link"):
        await harness.run("echo SHOULD-NOT-RUN > ran.txt")
    assert not (harness.workspace / "ran.txt").exists()
    await harness.service.aclose()
    (harness.workspace / ".vscode").unlink()
    (harness.workspace / ".git").symlink_to("/tmp")
    with pytest.raises(SandboxRejected, match="symbolic link"):
        await harness.run("true")


# ---------------------------------------------------------------------------------------------
# Policies in more shapes


async def test_additional_paths(harness: SandboxHarness, outside_dir: Path) -> None:
    (harness.workspace / "vendor").mkdir()
    if harness.identity.uid != os.geteuid():
        os.chown(harness.workspace / "vendor", harness.identity.uid, harness.identity.gid)
    policy = SandboxPolicy(
        type=SandboxPolicy.TYPE_WORKSPACE_READWRITE,
        additional_readwrite_paths=[str(outside_dir), "/nonexistent/cache"],
        additional_readonly_paths=["vendor"],
    )
    result = await harness.run(
        f"echo a > {outside_dir}/granted && echo ok-granted; echo b > vendor/x || echo denied-vendor",
        policy,
    )
    assert "ok-granted" in result.stdout and "denied-vendor" in result.stdout
    assert (outside_dir / "granted").read_text() == "a\n"


async def test_concurrent_sandboxes_share_placeholders_safely(harness: SandboxHarness) -> None:
    long_running, _ = await harness.spawn(
        "read line; mkdir .vscode 2>/dev/null && echo CREATED; ls -A", stdin_pipe=True
    )
    # A second, short sandbox on the same (empty) workspace starts and ends meanwhile...
    assert (
        "CREATED"
        not in (await harness.run("mkdir .vscode 2>/dev/null && echo CREATED; true")).stdout
    )
    # ...and must not have removed the placeholder the first one still relies on.
    out, _err = await asyncio.wait_for(long_running.communicate(b"go\n"), 10)
    assert b"CREATED" not in out and b".vscode" in out
    await harness.service.aclose()
    assert sorted(os.listdir(harness.workspace)) == []


async def test_git_worktree_protects_the_main_repository(identity: Identity) -> None:
    main = owned_directory(identity, "sbx-main-")
    worktree_parent = owned_directory(identity, "sbx-wt-")
    try:
        as_identity(identity, "git", "init", "-q", ".", cwd=main)
        as_identity(
            identity,
            "git",
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
            cwd=main,
        )
        as_identity(identity, "git", "worktree", "add", "-q", str(worktree_parent / "wt"), cwd=main)
        workspace = worktree_parent / "wt"
        service = sandbox_service(workspace)
        harness = SandboxHarness(workspace, identity, service)
        config_before = (main / ".git" / "config").read_text()
        gitfile_before = (workspace / ".git").read_text()
        result = await harness.run(
            f"""
            echo '[core]' >> {main}/.git/config 2>/dev/null && echo WROTE-CONFIG
            echo evil > {main}/.git/hooks/pre-commit 2>/dev/null && echo WROTE-HOOK
            echo 'gitdir: /tmp/evil' > .git 2>/dev/null && echo WROTE-GITFILE
            echo x > file.txt && git add file.txt && echo ok-index
            """
        )
        await service.aclose()
        assert "WROTE" not in result.stdout and "ok-index" in result.stdout, result.output
        assert (main / ".git" / "config").read_text() == config_before
        assert (workspace / ".git").read_text() == gitfile_before
        assert not (main / ".git" / "hooks" / "pre-commit").exists()
    finally:
        remove_tree(main)
        remove_tree(worktree_parent)


# ---------------------------------------------------------------------------------------------
# The one sandbox decision and the processes.Confinement seam


async def test_decision_confines_per_policy_and_reports_the_effective_one(
    harness: SandboxHarness,
) -> None:
    service = harness.service
    unconfined = await service.decide(SandboxPolicy(type=SandboxPolicy.TYPE_INSECURE_NONE))
    assert unconfined.confinement is UNCONFINED and not unconfined.refusal
    assert unconfined.effective_policy is not None
    assert unconfined.effective_policy.type == SandboxPolicy.TYPE_INSECURE_NONE
    decision = await service.decide(RW)
    same = await service.decide(SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READWRITE))
    other = await service.decide(SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READONLY))
    confinement = decision.confinement
    assert confinement.key == same.confinement.key != other.confinement.key and confinement.key
    assert decision.effective_policy is not None
    assert decision.effective_policy.type == SandboxPolicy.TYPE_WORKSPACE_READWRITE
    assert decision.imposed is None


async def test_decision_imposes_what_the_guards_demand(harness: SandboxHarness) -> None:
    service = harness.service
    read_only = await service.decide(RW, SandboxDemand(read_only=True))
    assert read_only.imposed is not None
    assert read_only.imposed.type == SandboxPolicy.TYPE_WORKSPACE_READONLY
    assert read_only.effective_policy is not None
    assert read_only.effective_policy.type == SandboxPolicy.TYPE_WORKSPACE_READONLY
    confined = await service.decide(None, SandboxDemand(confined=True))
    assert confined.imposed is not None and not confined.refusal
    assert confined.imposed.type == SandboxPolicy.TYPE_WORKSPACE_READWRITE
    assert confined.confinement.key.startswith("sandbox-")
    full_access = SandboxPolicy(type=SandboxPolicy.TYPE_INSECURE_NONE)
    refused = await service.decide(full_access, SandboxDemand(confined=True))
    assert refused.needs_review and refused.refusal and refused.confinement is UNCONFINED
    # A read-only agent's call that asks for full access still runs confined read-only.
    both = await service.decide(full_access, SandboxDemand(read_only=True, confined=True))
    assert not both.refusal and both.effective_policy is not None
    assert both.effective_policy.type == SandboxPolicy.TYPE_WORKSPACE_READONLY


async def test_confinement_seam_wraps_and_reports_set_up(harness: SandboxHarness) -> None:
    confinement = (await harness.service.decide(RW)).confinement

    read_fd, write_fd = os.pipe()
    spec = SpawnSpec(
        argv=("bash", "-c", f"echo $CURSOR_SANDBOX >&{write_fd}"),
        cwd=str(harness.workspace),
        env=dict(harness.env),
        pass_fds=(write_fd,),
    )
    wrapped = confinement.wrap(spec)
    assert wrapped.argv[-4:] == ("--", "bash", "-c", f"echo $CURSOR_SANDBOX >&{write_fd}")
    assert wrapped.pass_fds[0] == write_fd and len(wrapped.pass_fds) == 2
    process = await asyncio.create_subprocess_exec(
        *harness.identity.wrap(wrapped.argv),
        env=wrapped.env,
        pass_fds=wrapped.pass_fds,
        cwd=spec.cwd,
    )
    os.close(write_fd)
    await confinement.started(wrapped)
    assert await process.wait() == 0
    assert os.read(read_fd, 100) == b"native\n"  # the kept descriptor reached the command
    os.close(read_fd)

    failing = confinement.wrap(SpawnSpec(("true",), "/nonexistent-dir", dict(harness.env)))
    process = await asyncio.create_subprocess_exec(
        *harness.identity.wrap(failing.argv), env=failing.env, pass_fds=failing.pass_fds
    )
    with pytest.raises(SandboxRejected, match="chdir /nonexistent-dir"):
        await confinement.started(failing)
    await process.wait()
    abandoned = confinement.wrap(spec)
    await confinement.abandon(abandoned)


async def test_command_processes_finds_setsid_escapees_for_the_daemon(
    harness: SandboxHarness,
) -> None:
    from exec_daemon.kernel.processes import all_processes, boot_ticks_now, signal_selected

    marker = f"{5000 + os.getpid() % 1000}.{time.monotonic_ns() % 1000}"
    confinement = (await harness.service.decide(RW)).confinement
    process, _ = await harness.spawn(
        f"echo ready; read go; setsid sleep {marker} & sleep {marker}", stdin_pipe=True
    )
    assert process.stdout is not None and process.stdin is not None
    assert (await process.stdout.readline()).strip() == b"ready"
    since = boot_ticks_now()
    process.stdin.write(b"go\n")
    await process.stdin.drain()
    deadline = time.monotonic() + 5
    while len(processes_with_argument(marker)) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    select = confinement.command_processes(process.pid, since)
    assert select is not None
    selected = {info.pid for info in all_processes() if select(info)}
    assert set(processes_with_argument(marker)) <= selected
    assert process.pid not in selected  # the helper, PID 1 and the shell started before
    signal_selected(select, signal.SIGKILL)
    await asyncio.wait_for(process.communicate(), 10)
    assert processes_with_argument(marker) == []


async def test_private_daemon_paths_are_read_only_and_own_paths_writable(
    harness: SandboxHarness, identity: Identity
) -> None:
    private = owned_directory(identity, "sbx-private-")
    own = private / "session-1"
    own.mkdir()
    if identity.uid != os.geteuid():
        os.chown(own, identity.uid, identity.gid)
    harness.service.keep_private(private)
    try:
        effective = harness.service.resolve(RW)
        run = await harness.service.confine(
            effective, harness.workspace, env=harness.env, own=[str(own)]
        )
        process = await asyncio.create_subprocess_exec(
            *harness.identity.wrap(
                run.argv(
                    [
                        "bash",
                        "-c",
                        f"echo x > {private}/loop || echo denied; echo y > {own}/state && echo ok",
                    ]
                )
            ),
            env=run.env(harness.env),
            pass_fds=run.pass_fds,
            cwd=harness.workspace,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await run.started()
        out, _ = await process.communicate()
        assert out.split() == [b"denied", b"ok"]
        assert (own / "state").read_text() == "y\n"
    finally:
        remove_tree(private)


async def test_a_repository_created_outside_over_a_placeholder_is_protected_as_one(
    harness: SandboxHarness, identity: Identity
) -> None:
    assert (
        "CREATED"
        not in (await harness.run("git init -q . 2>/dev/null && echo CREATED; true")).stdout
    )
    # The daemon keeps the .git placeholder; a person (unconfined) now makes a repository there.
    as_identity(identity, "git", "init", "-q", ".", cwd=harness.workspace)
    result = await harness.run(
        "echo x > f.txt && git add f.txt && echo ok-index; echo '[x]' >> .git/config 2>/dev/null && echo WROTE"
    )
    assert "ok-index" in result.stdout and "WROTE" not in result.stdout, result.output
    await harness.service.aclose()
    assert (harness.workspace / ".git" / "HEAD").exists()


# ---------------------------------------------------------------------------------------------
# Process limit


def write_project_sandbox_config(workspace: Path, config: dict[str, object]) -> None:
    folder = workspace / ".cursor"
    folder.mkdir(exist_ok=True)
    (folder / "sandbox.json").write_text(json.dumps(config))


def processes_in_pid_namespace(namespace: str) -> int:
    """How many of the host's processes live in the PID namespace `namespace` (pid:[inode])."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                count += os.readlink(f"/proc/{entry}/ns/pid") == namespace
    return count


async def wait_until_no_process_in(namespace: str) -> None:
    deadline = time.monotonic() + 10
    while await asyncio.to_thread(processes_in_pid_namespace, namespace):
        assert time.monotonic() < deadline, f"processes of {namespace} outlived the sandbox"
        await asyncio.sleep(0.05)


async def test_a_sandbox_cannot_start_more_processes_than_its_limit(
    harness: SandboxHarness,
) -> None:
    write_project_sandbox_config(harness.workspace, {"maxProcesses": 40})
    result = await harness.run(
        f"""readlink /proc/self/ns/pid; {PY} - <<'EOF'
import os, time
children = []
for _ in range(100):
    try:
        pid = os.fork()
    except OSError as exc:
        print("refused", exc.errno)
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children.append(pid)
print("started", len(children))
EOF"""
    )
    namespace, refused, started = result.stdout.split("\n")[:3]
    assert refused == "refused 11", result.output  # EAGAIN: the limit, not memory
    # The limit counts the sandbox's PID 1, its shell and python too.
    assert 30 <= int(started.split()[1]) < 40, result.output
    # The sleeping children ended with the command.
    await wait_until_no_process_in(namespace)


async def test_a_fork_bomb_is_contained_and_leaves_nothing(harness: SandboxHarness) -> None:
    limit = 50
    write_project_sandbox_config(harness.workspace, {"maxProcesses": limit})
    process, _confinement = await harness.spawn(
        # The bomb runs until `sleep`, started before it, ends the command; then PID 1 ends it.
        "readlink /proc/self/ns/pid; sleep 4 & timeout 10 bash -c ':(){ :|:& };:' 2>/dev/null;"
        " wait $!; echo over"
    )
    assert process.stdout is not None
    namespace = (await process.stdout.readline()).decode().strip()
    assert namespace.startswith("pid:[")
    most = 0
    while process.returncode is None:
        most = max(most, await asyncio.to_thread(processes_in_pid_namespace, namespace))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 0.1)
    rest = await process.stdout.read()
    assert b"over" in rest
    # The bomb filled the sandbox up to its limit and no further (host view of its processes).
    assert limit - 10 <= most <= limit
    await wait_until_no_process_in(namespace)
    # A root helper's pids cgroup (root ignores RLIMIT_NPROC) is gone with it.
    assert not exists(Path(f"/sys/fs/cgroup/pids/exec-daemon-sandbox-{process.pid}"))


# A unix socket server outside the sandbox: bound by the path it is given, from the directory
# it is given (a relative path is how many servers bind); says "ready", then whether anyone
# connected before it was told to stop.
SOCKET_SERVER = """
import os, socket, sys
os.chdir(sys.argv[1])
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[2])
os.chmod(sys.argv[2], 0o777)
server.listen()
print("ready", flush=True)
server.settimeout(0.2)
while True:
    try:
        server.accept()
        print("ACCEPTED", flush=True)
    except TimeoutError:
        if sys.stdin.readline() == "":  # told to stop: stdin closed
            break
"""


@pytest.mark.parametrize(
    ("where", "bound_as"),
    [
        ("outside", "relative"),
        ("workspace", "absolute"),
        ("workspace", "relative"),
        ("workspace-subdir", "relative"),
    ],
)
async def test_unix_sockets_bound_outside_before_the_sandbox_are_unreachable(
    harness: SandboxHarness, identity: Identity, where: str, bound_as: str
) -> None:
    outside = owned_directory(identity, "sbx-sock-")
    directory = {
        "outside": outside,
        "workspace": harness.workspace,
        "workspace-subdir": harness.workspace / "run",
    }[where]
    if not directory.exists():
        as_identity(identity, "mkdir", str(directory), cwd=harness.workspace)
    name = f"server {os.getpid()}.sock"  # a space: /proc/net/unix lists it as is
    path = directory / name
    # The server runs as the daemon's user (the helper finds a relative socket through the
    # processes holding it: it can see those of its own user).
    server = await asyncio.create_subprocess_exec(
        *identity.wrap(
            [PY, "-c", SOCKET_SERVER, str(directory), name if bound_as == "relative" else str(path)]
        ),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert server.stdout is not None
        assert (await server.stdout.readline()).strip() == b"ready"
        result = await harness.run(
            f"""{PY} - <<'EOF'
import socket
try:
    socket.socket(socket.AF_UNIX).connect({str(path)!r}); print("CONNECTED-OUTSIDE")
except OSError as exc:
    print("refused", exc.errno)
EOF"""
        )
        assert "refused" in result.stdout, result.output
    finally:
        out, _ = await asyncio.wait_for(server.communicate(b""), 10)
        remove_tree(outside)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    assert b"ACCEPTED" not in out
