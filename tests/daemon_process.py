"""Starts the real daemon as a subprocess on free loopback ports, for tests and benchmarks."""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from exec_daemon.client import ExecDaemonClient
from tests.polling import generous
from tools.sem_search import INDEX_PROCESS_CODE

# A cap on a start that hangs: ~0.8 s on an idle machine, over 20 s at load 18 on 2 cores (the
# suite's pytest-xdist workers beside other work).
STARTUP_SECONDS = generous(60.0)
SHUTDOWN_SECONDS = 5.0


# Lock files by which test processes (a suite, a benchmark, another worktree's suite) share out
# the ports they hand to daemons.
PORT_LOCKS = Path(tempfile.gettempdir()) / "exec-daemon-test-ports"
PORTS_PER_PROCESS = 12_000
_held_port_locks: list[int] = []
# Not the `random` module's generator: pytest-randomly seeds it alike in every pytest-xdist
# worker and again before each test, so every worker would try the same ports in the same order.
_port_choice = random.SystemRandom()


def free_port() -> int:
    """A loopback port for a daemon to listen on, this process's until it exits.

    Between this answer and the daemon's bind (seconds under load), a port the kernel chose
    (`bind(port 0)`, an outgoing connection) could go to anyone: a daemon started on it failed
    with "address in use", and the test talked to whichever daemon had taken it. So the port
    lies below the kernel's ephemeral range, which the kernel never hands out on its own, and a
    lock file keeps every other test process from handing out the same one.
    """
    first_ephemeral = _first_ephemeral_port()
    low = max(1024, first_ephemeral - PORTS_PER_PROCESS)
    PORT_LOCKS.mkdir(mode=0o1777, exist_ok=True)
    for _attempt in range(1000):
        port = _port_choice.randrange(low, first_ephemeral)
        try:
            lock = os.open(PORT_LOCKS / f"{port}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            continue
        if _bindable(port):
            _held_port_locks.append(lock)
            return port
        os.close(lock)
    raise RuntimeError(f"no free port in {low}-{first_ephemeral - 1} after 1000 tries")


def _first_ephemeral_port() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class RunningDaemon:
    process: subprocess.Popen[bytes]
    token: str
    port: int
    pty_port: int
    workspace: Path
    log_path: Path
    state_dir: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, **kwargs: object) -> ExecDaemonClient:
        return ExecDaemonClient(self.url, self.token, **kwargs)  # type: ignore[arg-type]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def state_root(self) -> Path:
        """The daemon's private state root, as it logged it at start."""
        for line in self.log().splitlines():
            if "state root: " in line:
                return Path(line.split("state root: ", 1)[1].strip())
        raise AssertionError("the daemon logged no state root")

    def own_processes(self) -> list[int]:
        """The daemon's pid and its semantic index process's, whose CPU and memory are the
        daemon's (tools/sem_search.py: INDEX_PROCESS_CODE)."""
        return [self.process.pid, *self.children_running(INDEX_PROCESS_CODE)]

    def children_running(self, text: str) -> list[int]:
        """The daemon's child processes whose command line holds `text`."""
        pids = []
        for children in Path(f"/proc/{self.process.pid}/task").glob("*/children"):
            for child in children.read_text().split():
                with contextlib.suppress(OSError):
                    if text.encode() in Path(f"/proc/{child}/cmdline").read_bytes():
                        pids.append(int(child))
        return pids

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signals the daemon and returns its exit code (killing it if it overstays)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(SHUTDOWN_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError(
                    f"daemon did not exit within {SHUTDOWN_SECONDS}s of signal {sig}"
                ) from None
        return self.process.returncode


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _answers_ping(port: int, token: str) -> bool:
    """True once *this* daemon answers: a port that merely accepts may belong to another
    process that took it before the daemon bound (the daemon then exits, port taken)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/agent.v1.ControlService/Ping",
        data=b"{}",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        with _DIRECT.open(request, timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, http.client.HTTPException):
        return False


def answers_healthz(port: int, _token: str = "") -> bool:
    """True once the daemon answers /healthz (a --wait-for-init daemon answers no Ping)."""
    try:
        with _DIRECT.open(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, http.client.HTTPException):
        return False


def _wait_listening(
    process: subprocess.Popen[bytes],
    port: int,
    token: str,
    log_path: Path,
    answers: Callable[[int, str], bool] = _answers_ping,
) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daemon exited with {process.returncode}:\n{log_path.read_text()}")
        if answers(port, token):
            return
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"daemon did not listen within {STARTUP_SECONDS}s:\n{log_path.read_text()}")


def _token_args(token: str, token_by: str, state_dir: Path) -> list[str]:
    if token_by == "argv":
        return ["--auth-token", token]
    if token_by == "file":
        path = state_dir / "auth-token"
        path.write_text(token + "\n")
        path.chmod(0o600)
        return ["--auth-token-file", str(path)]
    return []


@contextlib.contextmanager
def running_daemon(
    workspace: Path,
    state_dir: Path,
    *extra_args: str,
    env: dict[str, str] | None = None,
    token: str | None = None,
    argv: Sequence[str] | None = None,
    token_by: str = "env",
    ports: tuple[int, int] | None = None,
    terminals_folder: bool = True,
) -> Iterator[RunningDaemon]:
    """With `--wait-for-init` among `extra_args`, ready means answering /healthz (`token` is
    then the pool's credential). `terminals_folder`: False leaves the daemon its default one (in
    its state root). `token_by`: how the daemon gets its token, "env" (EXEC_DAEMON_AUTH_TOKEN), "file"
    (--auth-token-file, mode 0600, in `state_dir`) or "argv" (--auth-token). `ports`: the RPC
    and PTY ports (a restart on the ports of a daemon that stopped), else free ones."""
    token = token or secrets.token_hex(32)
    for attempt in range(3):
        started = _started_daemon(
            workspace, state_dir, extra_args, env, token, argv, token_by,
            ports or (free_port(), free_port()), terminals_folder,
        )  # fmt: skip
        try:
            daemon = started.__enter__()
        except PortTaken:
            # A free port can be taken between the pick and the daemon's bind (another
            # process's outgoing connection): pick again, unless the test chose the ports.
            if ports is not None or attempt == 2:
                raise
            continue
        with contextlib.ExitStack() as stack:
            stack.push(started)
            yield daemon
        return


class PortTaken(RuntimeError):
    pass


@contextlib.contextmanager
def _started_daemon(
    workspace: Path,
    state_dir: Path,
    extra_args: Sequence[str],
    env: dict[str, str] | None,
    token: str,
    argv: Sequence[str] | None,
    token_by: str,
    ports: tuple[int, int],
    terminals_folder: bool,
) -> Iterator[RunningDaemon]:
    daemon = launch_daemon(
        workspace, state_dir, extra_args, env, token, argv, token_by, ports, terminals_folder
    )
    process, port, log_path = daemon.process, daemon.port, daemon.log_path
    try:
        try:
            answers = answers_healthz if "--wait-for-init" in extra_args else _answers_ping
            _wait_listening(process, port, token, log_path, answers)
        except RuntimeError as exc:
            if "Address already in use" in str(exc):
                raise PortTaken(str(exc)) from None
            raise
        try:
            yield daemon
        except Exception as exc:
            # What the daemon said, to find a failure seen once under load without running again.
            log_tail = log_path.read_text(errors="replace")[-4000:]
            code = process.poll()
            state = "still running" if code is None else f"had exited with {code}"
            exc.add_note(f"the daemon ({state}) logged:\n{log_tail}")
            raise
    finally:
        end_process(process)


def end_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it overstays SHUTDOWN_SECONDS; reaped either way."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(SHUTDOWN_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def launch_daemon(
    workspace: Path,
    state_dir: Path,
    extra_args: Sequence[str],
    env: dict[str, str] | None,
    token: str,
    argv: Sequence[str] | None = None,
    token_by: str = "env",
    ports: tuple[int, int] | None = None,
    terminals_folder: bool = True,
) -> RunningDaemon:
    """Starts the daemon's process without waiting for it to listen."""
    port, pty_port = ports or (free_port(), free_port())
    state_dir.mkdir(parents=True, exist_ok=True)
    log_path = state_dir / "daemon.log"
    # -P: the daemon runs in the workspace, which must not go on sys.path (a `tools/` planted
    # there would be imported instead of ours), as the image's `python -I` wrapper ensures.
    command = [
        *(argv or [sys.executable, "-P", "-m", "exec_daemon"]),
        "serve",
        "--host", "127.0.0.1",
        "--port", str(port),
        "--pty-websocket-port", str(pty_port),
        "--workspace", str(workspace),
        *(["--terminals-folder", str(state_dir / "terminals")] if terminals_folder else []),
        "--artifacts-folder", str(state_dir / "artifacts"),
        "--log-level", "debug",
        *extra_args,
        *_token_args(token, token_by, state_dir),
    ]  # fmt: skip
    # A home of its own unless the test names one: the machine's rc files (a slow ~/.bashrc,
    # pyenv's rehash lock left by a killed shell) must not decide whether a shell starts in time.
    own_home = state_dir / "home"
    own_home.mkdir(exist_ok=True)
    process_env = {**os.environ, "HOME": str(own_home), **(env or {})}
    process_env.pop("EXEC_DAEMON_AUTH_TOKEN", None)
    if token_by == "env":
        process_env["EXEC_DAEMON_AUTH_TOKEN"] = token
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, env=process_env, cwd=workspace
        )
    return RunningDaemon(process, token, port, pty_port, workspace, log_path, state_dir)


@contextlib.contextmanager
def running_pool(
    count: int, root: Path, *extra_args: str, seconds: float = 120.0
) -> Iterator[list[RunningDaemon]]:
    """`count` daemons started with --wait-for-init (each its own workspace under `root` and the
    pool's one credential), all launched at once and waited for together, up to `seconds`."""
    pool_token = secrets.token_hex(32)
    daemons: list[RunningDaemon] = []
    try:
        for index in range(count):
            workspace = root / f"workspace-{index}"
            workspace.mkdir(parents=True)
            daemons.append(
                launch_daemon(
                    workspace,
                    root / f"state-{index}",
                    ["--wait-for-init", *extra_args],
                    None,
                    pool_token,
                    token_by="file",
                )
            )
        deadline = time.monotonic() + seconds
        waiting = list(daemons)
        while waiting:
            for daemon in list(waiting):
                if daemon.process.poll() is not None:
                    raise RuntimeError(
                        f"daemon exited with {daemon.process.returncode}:\n{daemon.log()}"
                    )
                if answers_healthz(daemon.port):
                    waiting.remove(daemon)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(waiting)} of {count} daemons not up within {seconds}s")
            time.sleep(0.1)
        yield daemons
    finally:
        for daemon in daemons:
            if daemon.process.poll() is None:
                daemon.process.send_signal(signal.SIGTERM)
        for daemon in daemons:
            end_process(daemon.process)
