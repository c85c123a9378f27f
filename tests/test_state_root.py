"""The daemon's private state root (exec_daemon/kernel/state_root.py) and the sockets no sandbox
reaches (sandbox/plan.py's masks, X servers on abstract sockets only), on the real daemon with
the real sandbox helper, tmux and Xvfb.

Issue 25's reproductions 1 (a sandboxed `mv` of the terminals folder's parents, then the tmux
socket or the spill files through a link) and 6 (an X server started after a sandboxed session
began), and issue 28's item 10 (shell ids and logs after a restart, two daemons on one machine).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agent.v1.shell_pb2 import SandboxPolicy, ShellResult
from exec_daemon.client import ExecDaemonClient
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.state import Daemon
from exec_daemon.kernel.state_root import (
    StateRootError,
    prepare_state_root,
    prune_ended_instances,
)
from exec_daemon.server import new_daemon
from sandbox.plan import X11_SOCKETS as PLAN_X11_SOCKETS
from sandbox.plan import build_plan
from sandbox.policy import resolve_policy
from tests.daemon_process import RunningDaemon, running_daemon
from tests.polling import eventually, wait_until
from tests.shell_calls import printed, shell
from tests.test_shared_terminals import shared_terminal, write_environment
from tests.x11_support import x_server
from tools.display import DisplayService
from tools.shell.service import KEEP_SPILL_FILES, ShellService

pytestmark = pytest.mark.timeout(120)

RW = SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READWRITE)
NONE = SandboxPolicy(type=SandboxPolicy.TYPE_INSECURE_NONE)
X11_SOCKETS = Path(PLAN_X11_SOCKETS)


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    """A sandboxed daemon in its default layout (the terminals folder in its state root)."""
    root = tmp_path_factory.mktemp("state-root")
    (root / "workspace").mkdir()
    # As in the VM: the X sockets folder exists before the daemon (desktop-init makes it).
    with contextlib.suppress(OSError):
        X11_SOCKETS.mkdir(mode=0o1777, exist_ok=True)
        X11_SOCKETS.chmod(0o1777)
    with running_daemon(
        root / "workspace", root / "state", "--sandbox-enabled", terminals_folder=False
    ) as running:
        yield running


@pytest.fixture(scope="module")
def operator_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    """A sandboxed daemon whose --terminals-folder an operator put under /tmp."""
    root = tmp_path_factory.mktemp("operator-folder")
    (root / "workspace").mkdir()
    with running_daemon(root / "workspace", root / "state", "--sandbox-enabled") as running:
        yield running


@pytest.fixture
async def client(sandboxed: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with sandboxed.client() as connected:
        yield connected


# --- the root itself ------------------------------------------------------------------------


def test_the_state_root_is_private_and_outside_every_writable_area(
    sandboxed: RunningDaemon,
) -> None:
    root = sandboxed.state_root()
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "sockets").stat().st_mode) == 0o700
    assert root.resolve() == root and not str(root).startswith(("/tmp/", "/var/tmp/", "/dev/shm/"))
    assert (root / "terminals").is_dir()


def test_a_state_root_under_a_world_writable_folder_is_refused() -> None:
    # /tmp (mode 1777): anyone could have made, or could rename, what is there.
    with pytest.raises(StateRootError, match="writable by other users"):
        prepare_state_root(Path("/tmp") / f"exec-daemon-{os.getpid()}-probe" / "instance")
    assert not (Path("/tmp") / f"exec-daemon-{os.getpid()}-probe").exists()


def test_a_state_root_through_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    private = Path("/run") / f"exec-daemon-test-{os.getpid()}"
    if not os.access("/run", os.W_OK):
        pytest.skip("needs a writable /run (root)")
    private.mkdir(mode=0o700)
    try:
        (private / "real").mkdir(mode=0o700)
        (private / "link").symlink_to(private / "real")
        with pytest.raises(StateRootError, match="symbolic link"):
            prepare_state_root(private / "link" / "base" / "instance")
        assert not (private / "real" / "base").exists()
        # Positive control: the same place without the link is accepted, 0700.
        made = prepare_state_root(private / "real" / "base" / "instance")
        assert stat.S_IMODE(made.stat().st_mode) == 0o700
    finally:
        shutil.rmtree(private)


def test_an_ended_instance_is_removed_and_a_live_one_kept(sandboxed: RunningDaemon) -> None:
    base = sandboxed.state_root().parent
    ended = base / "1-deadbeef"
    ended.mkdir(mode=0o700)
    (ended / ".lock").touch()
    pruned = prune_ended_instances(base / "some-new-instance")
    assert ended in pruned and not ended.exists()
    assert sandboxed.state_root().is_dir()  # its lock is held by the running daemon


# --- issue 25, reproduction 1: renamed parents ------------------------------------------------


async def test_a_sandbox_cannot_move_the_state_root_or_reach_the_tmux_server(
    sandboxed: RunningDaemon, client: ExecDaemonClient, tmp_path: Path
) -> None:
    root = sandboxed.state_root()
    tmux_socket = root / "sockets" / "tmux" / "server.sock"
    assert tmux_socket.is_socket()
    marker = tmp_path / "ran-unconfined"
    # Renamed within their own file system (elsewhere mv would copy, which reading allows).
    script = (
        f"mv {root / 'terminals'} {root}/moved 2>&1; echo mv1=$?; "
        f"mv {root} {root}-moved 2>&1; echo mv2=$?; "
        f"mv {root.parent} {root.parent}-moved 2>&1; echo mv3=$?; "
        f"tmux -S {tmux_socket} new-session -d 'touch {marker}' 2>&1; "
        f"tmux -S {tmux_socket} list-sessions 2>&1; echo tmux=$?; "
        f"echo listed=$(ls -A {root / 'sockets'} | wc -l)"
    )
    confined = printed(await shell(client, script, "mover", requested_sandbox_policy=RW))
    for step in ("mv1", "mv2", "mv3", "tmux"):
        assert f"{step}=0" not in confined, confined
    assert "listed=0" in confined, confined
    assert not marker.exists()
    assert (root / "terminals").is_dir() and tmux_socket.is_socket()
    # Positive control: unconfined, the same socket answers.
    unconfined = await shell(
        client, f"tmux -S {tmux_socket} show-options -g status; echo rc=$?", "mover-u",
        requested_sandbox_policy=NONE,
    )  # fmt: skip
    assert "rc=0" in printed(unconfined)


async def test_a_sandbox_cannot_write_in_the_state_root(
    sandboxed: RunningDaemon, client: ExecDaemonClient
) -> None:
    root = sandboxed.state_root()
    script = (
        f"touch {root}/planted 2>/dev/null; echo touch=$?; "
        f"ln -s /etc/passwd {root}/terminals/shell-output/planted 2>/dev/null; echo ln=$?; "
        f"mkdir {root}/terminals/tmux 2>/dev/null; echo mkdir=$?; "
        f"ls {root}/terminals >/dev/null; echo read=$?"
    )
    confined = printed(await shell(client, script, "writer", requested_sandbox_policy=RW))
    assert "touch=1" in confined and "ln=1" in confined and "mkdir=1" in confined, confined
    # The agent still reads its logs there.
    assert "read=0" in confined, confined
    assert not (root / "planted").exists()
    # Positive control: unconfined, the same command writes there.
    unconfined = printed(
        await shell(client, f"touch {root}/planted; echo touch=$?", "writer-u",
                    requested_sandbox_policy=NONE)
    )  # fmt: skip
    assert "touch=0" in unconfined
    (root / "planted").unlink()


@pytest.mark.parametrize("levels_up", [1, 2, 3])
async def test_an_operator_given_folder_has_its_parents_pinned_in_the_sandbox(
    operator_folder: RunningDaemon, tmp_path: Path, levels_up: int
) -> None:
    """--terminals-folder under /tmp: moving any folder above it (its parent, the parent's
    parent, ...) and planting a link in its place would send the daemon's spill files, and its
    pruning, elsewhere."""
    terminals = operator_folder.state_dir / "terminals"
    ancestor = terminals.parents[levels_up - 1]
    bait = tmp_path / "bait"
    relative = terminals.relative_to(ancestor)
    script = (
        f"mv {ancestor} {ancestor}-moved 2>&1 && mkdir -p {bait / relative / 'shell-output'} "
        f"&& ln -s {bait} {ancestor}; echo mv=$?"
    )
    async with operator_folder.client() as client:
        confined = printed(await shell(client, script, "mover", requested_sandbox_policy=RW))
        assert "mv=0" not in confined, confined
        assert not _moved_or_replaced(ancestor)
        # A spilled output lands in the real folder, never through a link.
        spilled = await shell(
            client, "seq 1 20000", "spiller", requested_sandbox_policy=NONE,
            file_output_threshold_bytes=1000,
        )  # fmt: skip
    assert spilled.WhichOneof("result") == "success", spilled
    assert _spill_files_are_real(terminals / "shell-output")
    assert not _written_under(bait)


# --- issue 25, reproduction 6: sockets bound after the sandbox started --------------------------


def _x_probe(number: int) -> str:
    raw_connect = (
        'python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); '
        "s.connect(sys.argv[1]); print('CONNECTED', sys.argv[1].encode())\""
    )
    return (
        f"DISPLAY=:{number} xdpyinfo >/dev/null 2>&1 && echo X-REACHED; "
        f"{raw_connect} {X11_SOCKETS}/X{number} 2>/dev/null; echo probed"
    )


def _abstract_probe(number: int) -> str:
    code = (
        "import socket; s=socket.socket(socket.AF_UNIX); "
        f"s.connect(b'\\0/tmp/.X11-unix/X{number}'); print('ABSTRACT-REACHED')"
    )
    return f'python3 -c "{code}" 2>/dev/null; echo probed'


def _moved_or_replaced(folder: Path) -> bool:
    return Path(f"{folder}-moved").exists() or folder.is_symlink()


def _spill_files_are_real(folder: Path) -> bool:
    files = list(folder.iterdir())
    return bool(files) and all(os.path.realpath(path) == str(path) for path in files)


def _written_under(folder: Path) -> bool:
    return folder.exists() and any(folder.rglob("*.txt"))


def _read(path: str) -> str:
    return Path(path).read_text(errors="replace")


@contextlib.contextmanager
def _someones_x_server() -> Iterator[int]:
    """An Xvfb as anyone would start it: a socket file in /tmp/.X11-unix and an abstract one."""
    if not X11_SOCKETS.is_dir():
        pytest.skip("no /tmp/.X11-unix")
    command = ["Xvfb", "-nolisten", "tcp", "-screen", "0", "320x240x24"]
    with x_server(
        lambda number: [*command[:1], f":{number}", *command[1:]], range(400, 500)
    ) as number:
        yield number


async def _begin_session(client: ExecDaemonClient, agent: str) -> int:
    started = await shell(client, "echo begun", agent, requested_sandbox_policy=RW)
    assert "begun" in printed(started)
    return started.shell_id


@pytest.mark.skipif(not shutil.which("Xvfb") or not shutil.which("xdpyinfo"), reason="needs Xvfb")
async def test_the_daemons_x_server_started_later_is_unreachable_from_a_running_sandbox(
    client: ExecDaemonClient, tmp_path: Path
) -> None:
    """The daemon starts its Xvfb on first use (computer use, recording): a sandboxed session
    that began before must not reach it (by its socket file or its abstract socket)."""
    session = await _begin_session(client, "x-early")
    daemon = Daemon(DaemonConfig(auth_token="t", workspace=tmp_path))
    daemon.env.update({}, unset=["DISPLAY"])
    try:
        info = await daemon.service(DisplayService).ensure()
        number = int(info.name.lstrip(":"))
        assert not (X11_SOCKETS / f"X{number}").exists()  # abstract socket only
        probe = _x_probe(number) + "; " + _abstract_probe(number)
        confined = await shell(client, probe, "x-early", requested_sandbox_policy=RW)
        assert confined.shell_id == session  # the sandbox that began before the X server
        assert "REACHED" not in printed(confined), printed(confined)
        assert "CONNECTED" not in printed(confined), printed(confined)
        # Positive control: unconfined, the same display answers.
        unconfined = await shell(client, probe, "x-early-u", requested_sandbox_policy=NONE)
        assert "X-REACHED" in printed(unconfined), printed(unconfined)
    finally:
        await daemon.aclose()


@pytest.mark.skipif(not shutil.which("Xvfb") or not shutil.which("xdpyinfo"), reason="needs Xvfb")
async def test_anyones_x_server_started_later_is_unreachable_from_a_running_sandbox(
    client: ExecDaemonClient,
) -> None:
    """An X server someone else starts with a socket file in /tmp/.X11-unix (and its abstract
    socket): the folder is masked in every sandbox, the abstract socket scoped by Landlock."""
    session = await _begin_session(client, "x-other")
    with _someones_x_server() as number:
        probe = _x_probe(number) + "; " + _abstract_probe(number)
        confined = await shell(client, probe, "x-other", requested_sandbox_policy=RW)
        assert confined.shell_id == session
        assert "REACHED" not in printed(confined), printed(confined)
        assert "CONNECTED" not in printed(confined), printed(confined)
        unconfined = await shell(client, probe, "x-other-u", requested_sandbox_policy=NONE)
        assert "X-REACHED" in printed(unconfined), printed(unconfined)
        assert "ABSTRACT-REACHED" in printed(unconfined), printed(unconfined)


async def test_a_socket_bound_later_in_the_sockets_folder_is_unreachable(
    sandboxed: RunningDaemon, client: ExecDaemonClient
) -> None:
    """As code-server's socket, bound when the IDE is first warmed: a sandbox that began before
    does not see it."""
    session = await _begin_session(client, "late-socket")
    path = sandboxed.state_root() / "sockets" / "late.sock"
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(path))
        listener.listen()
        probe = (
            'python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); '
            f"s.connect('{path}'); print('CONNECTED')\" 2>&1; echo probed"
        )
        confined = await shell(client, probe, "late-socket", requested_sandbox_policy=RW)
        assert confined.shell_id == session
        assert "CONNECTED" not in printed(confined) and "probed" in printed(confined)
        unconfined = await shell(client, probe, "late-socket-u", requested_sandbox_policy=NONE)
        assert "CONNECTED" in printed(unconfined), printed(unconfined)
    finally:
        listener.close()
        path.unlink(missing_ok=True)


# --- issue 28, item 10: restarts and two daemons ----------------------------------------------


async def _background(daemon: RunningDaemon, command: str) -> ShellResult:
    async with daemon.client() as client:
        started = await shell(client, command, is_background=True)
    assert started.is_background and started.output_file, started
    return started


def _log_says(path: str, text: str) -> bool:
    with contextlib.suppress(OSError):
        return text in Path(path).read_text(errors="replace")
    return False


@pytest.mark.parametrize("given_folder", [True, False], ids=["terminals-folder", "default"])
async def test_a_restart_never_reuses_a_shell_log(tmp_path: Path, given_folder: bool) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    state = tmp_path / "state"
    with running_daemon(workspace, state, terminals_folder=given_folder) as first:
        before = await _background(first, "echo PASSED-before")
        await eventually(lambda: _log_says(before.output_file, "PASSED-before"), 30, "the log")
    with running_daemon(workspace, state, terminals_folder=given_folder) as second:
        after = await _background(second, "sleep 0.2; echo after-restart")
        await eventually(lambda: _log_says(after.output_file, "after-restart"), 30, "the log")
    assert after.output_file != before.output_file
    assert "PASSED-before" not in _read(after.output_file)
    if given_folder:
        # The folder outlived the first daemon: its ids are not given again.
        assert after.shell_id > before.shell_id
        assert _read(before.output_file).strip() == "PASSED-before"


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
async def test_two_daemons_share_no_tmux_server_logs_or_ids(tmp_path: Path) -> None:
    daemons = []
    with contextlib.ExitStack() as stack:
        for name in ("one", "two"):
            workspace = tmp_path / name
            workspace.mkdir()
            write_environment(workspace, [{"name": "server", "command": "sleep 600"}])
            daemons.append(
                stack.enter_context(
                    running_daemon(workspace, tmp_path / f"{name}-state", terminals_folder=False)
                )
            )
        one, two = daemons
        sockets = [(await shared_terminal(d, "server"))["shared"]["tmux_socket"] for d in daemons]
        assert sockets[0] != sockets[1]
        assert one.state_root() != two.state_root()
        logs = [(await _background(d, f"echo from-{i}")).output_file for i, d in enumerate(daemons)]
        assert logs[0] != logs[1]
        one.stop()
        # Stopping one leaves the other's terminals alive.
        listed = subprocess.run(
            ["tmux", "-S", sockets[1], "list-sessions", "-F", "#{session_name}"],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
        assert listed.returncode == 0 and "server" in listed.stdout, listed
        wait_until(lambda: not Path(sockets[0]).exists(), 10, "the first daemon's socket gone")
        # Each daemon's own tmux server went with it, not the other's.
        async with two.client() as client:
            assert "alive" in printed(await shell(client, "echo alive"))


# --- the plan and the daemon's own file handling, without a daemon ------------------------------


def test_every_folder_above_a_daemon_folder_in_a_writable_area_is_pinned(tmp_path: Path) -> None:
    """A daemon folder under /tmp: it, and every folder from /tmp down to it, pinned (what the
    helper then refuses to rename: test_an_operator_given_folder_has_its_parents_pinned...)."""
    terminals = tmp_path / "a" / "b" / "terminals"
    terminals.mkdir(parents=True)
    sockets = tmp_path / "a" / "sockets"
    sockets.mkdir()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    policy = resolve_policy(None, sandbox_enabled=True, workspace=workspace)
    plan = build_plan(
        policy, workspace, workspace, env={}, private=[str(terminals)], masked=[str(sockets)]
    )
    pinned = {plan.options[i + 1] for i, o in enumerate(plan.options) if o == "--pin"}
    below_tmp = [p for p in [terminals, *terminals.parents] if str(p).startswith("/tmp/")]
    assert {str(p) for p in below_tmp} <= pinned
    assert str(sockets) in pinned
    assert plan.options[plan.options.index("--mask") + 1] == str(sockets)
    if X11_SOCKETS.is_dir():
        assert plan.options[plan.options.index("--mask-tmp") + 1] == str(X11_SOCKETS)


def test_spill_files_are_never_pruned_through_a_link(tmp_path: Path) -> None:
    """Pruning the spill folder removes its own oldest files, never what a link leads to."""
    terminals = tmp_path / "terminals"
    daemon = new_daemon(
        DaemonConfig(auth_token="t", workspace=tmp_path, terminals_folder=terminals)
    )
    service = daemon.service(ShellService)
    bait = tmp_path / "bait"
    bait.mkdir()
    for number in range(KEEP_SPILL_FILES + 5):
        (bait / f"precious-{number:03d}.txt").write_text("keep me")
    spill = terminals / "shell-output"
    shutil.rmtree(spill)
    spill.symlink_to(bait)
    service.prune_spill_files()
    assert len(list(bait.iterdir())) == KEEP_SPILL_FILES + 5
    # Positive control: in the real folder, the oldest ones beyond the limit go.
    spill.unlink()
    spill.mkdir()
    for number in range(KEEP_SPILL_FILES + 5):
        path = spill / f"shell-1-{number}-x.txt"
        path.write_text("old")
        os.utime(path, (number, number))
    service.prune_spill_files()
    kept = sorted(path.name for path in spill.iterdir())
    assert len(kept) == KEEP_SPILL_FILES and "shell-1-0-x.txt" not in kept
    shutil.rmtree(service.runtime_dir, ignore_errors=True)


def test_shell_ids_start_above_those_a_kept_folder_holds(tmp_path: Path) -> None:
    terminals = tmp_path / "terminals"
    (terminals / "shell-output").mkdir(parents=True)
    (terminals / "shell-7.log").write_text("an earlier daemon's")
    (terminals / "shell-output" / "shell-12-3-abcd.txt").write_text("an earlier spill")
    daemon = new_daemon(
        DaemonConfig(auth_token="t", workspace=tmp_path, terminals_folder=terminals)
    )
    service = daemon.service(ShellService)
    assert service.next_id() == 13
    shutil.rmtree(service.runtime_dir, ignore_errors=True)
