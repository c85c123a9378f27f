"""The one way the daemon starts child processes, and the one way it ends them.

Every agent process (shells, terminals) goes through `spawn()`; the daemon's own helpers (rg, gh,
linters, Xvfb, ...) go through `exec_daemon/kernel/runner.py`, built on the same pieces. `spawn()`:
- it gets a new session, hence its own process group (pgid = sid = its pid) and no controlling
  terminal, so a program that prompts on /dev/tty fails at once instead of waiting forever;
- its environment is the one the caller passes (usually `daemon.env.snapshot()`), minus the
  daemon's secrets (`exec_daemon/kernel/secrets.py`);
- `Confinement` is the seam where the sandbox plugs in: a call's `Confinement` comes from the one
  sandbox decision (exec_daemon/kernel/sandboxing.py; sandbox/service.py implements it). Its
  `wrap(spec)` rewrites the argv (the confinement helper in front), the environment and the
  fds of the `SpawnSpec` before it is started, and its `started(wrapped)` returns once the
  process runs confined (raising, the process ended, if it could not be). Long-lived shells
  are keyed by `Confinement.key`, so calls under different policies never share a shell.

Ending processes (`terminate`) signals the whole process group AND every process still in the
session (a grandchild that made its own group with `set -m` is found through /proc), SIGTERM
first, then SIGKILL after a grace period. Signals go through pidfds, checked against the
process's session and start time, so a recycled pid is never hit.

When the daemon runs as PID 1 (in a container), orphaned grandchildren are reparented to it and
must be reaped; reaping them with `wait(-1)` would steal the exit codes asyncio waits for.
`run_as_init_if_pid1()` therefore forks before the event loop starts: PID 1 stays a tiny init
that forwards signals to the daemon and reaps everything, and the daemon proper runs as its
child, where only its own children are ever waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import logging
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from exec_daemon.kernel.secrets import without_secrets

log = logging.getLogger(__name__)

# SIGTERM first, SIGKILL this long after when something is still alive.
DEFAULT_GRACE_SECONDS = 1.0
_POLL_SECONDS = 0.02
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Pipes this large carry big outputs in fewer reads (the kernel caps it at pipe-max-size).
PIPE_BYTES = 1 << 20


@dataclass(frozen=True)
class SpawnSpec:
    """What to start. fds are the parent's; None means /dev/null."""

    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]
    stdin: int | None = None
    stdout: int | None = None
    stderr: int | None = None
    pass_fds: tuple[int, ...] = ()
    # Paths the process itself writes (e.g. a shell's state directory): a sandbox keeps them
    # writable whatever its policy says.
    writable: tuple[str, ...] = ()


class Confinement(Protocol):
    """How a child is confined (sandbox/service.py's SandboxConfinement is the real one)."""

    @property
    def key(self) -> str:
        """Equal for confinements that may share one long-lived shell; "" when unconfined."""
        ...

    def wrap(self, spec: SpawnSpec) -> SpawnSpec:
        """The spec to actually start (e.g. argv prefixed with the confinement helper)."""
        ...

    async def started(self, wrapped: SpawnSpec) -> None:
        """Returns once the process started from `wrapped` runs confined; raises when it
        could not be confined (the process then ends by itself)."""
        ...

    async def abandon(self, wrapped: SpawnSpec) -> None:
        """`wrapped` could not be started: release what `wrap` prepared."""
        ...

    def command_processes(self, leader_pid: int, since_ticks: int) -> Selector | None:
        """Selects the processes the confined command `leader_pid` started at `since_ticks` or
        later that a selection by session misses (e.g. they left it with setsid); None when
        its session holds them all."""
        ...


@dataclass(frozen=True)
class Unconfined:
    key: str = ""

    def wrap(self, spec: SpawnSpec) -> SpawnSpec:
        return spec

    async def started(self, wrapped: SpawnSpec) -> None:
        return None

    async def abandon(self, wrapped: SpawnSpec) -> None:
        return None

    def command_processes(self, leader_pid: int, since_ticks: int) -> Selector | None:
        return None


UNCONFINED: Confinement = Unconfined()


def boot_ticks_now() -> int:
    """Now, in the unit of /proc/<pid>/stat's start time (clock ticks since boot)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _CLOCK_TICKS)


@dataclass
class Child:
    """A started process: the leader of its own session and process group."""

    process: asyncio.subprocess.Process
    started_ticks: int
    started_monotonic: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def wait(self) -> int:
        return await self.process.wait()

    async def terminate(self, grace: float = DEFAULT_GRACE_SECONDS) -> None:
        """Ends the child and everything in its session, grandchildren included."""
        await terminate_sessions({self.pid}, grace=grace)


async def spawn(spec: SpawnSpec, confinement: Confinement = UNCONFINED) -> Child:
    """Starts `spec` (after `confinement` wrapped it) as the leader of a new session.

    Raises OSError (e.g. FileNotFoundError) when it cannot be started, and
    sandbox.SandboxRejected when it could not be confined (the process is then gone).
    """
    spec = confinement.wrap(spec)
    ticks = boot_ticks_now()
    try:
        process = await _start_process(spec)
    except BaseException:
        await confinement.abandon(spec)
        raise
    child = Child(process=process, started_ticks=ticks)
    try:
        await confinement.started(spec)
    except BaseException:
        await terminate_sessions({child.pid}, grace=0.2)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(child.wait(), 2.0)
        raise
    return child


# Cleanups of processes whose starter was cancelled (the loop keeps only weak references).
_cleanups: set[asyncio.Task[None]] = set()


async def _start_process(spec: SpawnSpec) -> asyncio.subprocess.Process:
    """create_subprocess_exec of a session leader. asyncio forks the child first, then awaits
    its setup: a cancellation then (an abort right after a call started) makes asyncio kill the
    child's pid alone, while what it already started (`sleep 5 & sleep 5`) lives on. Here the
    start is finished and the child's whole session ended before the cancellation goes on."""
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *spec.argv,
            stdin=asyncio.subprocess.DEVNULL if spec.stdin is None else spec.stdin,
            stdout=asyncio.subprocess.DEVNULL if spec.stdout is None else spec.stdout,
            stderr=asyncio.subprocess.DEVNULL if spec.stderr is None else spec.stderr,
            cwd=spec.cwd,
            env=without_secrets(spec.env),
            pass_fds=spec.pass_fds,
            start_new_session=True,
        )
    )
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        cleanup = asyncio.ensure_future(_end_started(starting))
        _cleanups.add(cleanup)
        cleanup.add_done_callback(_cleanups.discard)
        await asyncio.shield(cleanup)
        raise


async def _end_started(starting: asyncio.Future[asyncio.subprocess.Process]) -> None:
    """Ends the session of the process `starting` gives, if it started."""
    try:
        process = await starting
    except Exception:
        return
    await terminate_sessions({process.pid}, grace=0.2)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(process.wait(), 2.0)


def with_env(spec: SpawnSpec, **values: str) -> SpawnSpec:
    return replace(spec, env={**spec.env, **values})


def open_pipe(size: int = PIPE_BYTES) -> tuple[int, int]:
    """A close-on-exec pipe (read end, write end), enlarged when the kernel allows."""
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    with contextlib.suppress(OSError):
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, size)
    return read_fd, write_fd


def close_fds(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


# ---------------------------------------------------------------------------------------------
# /proc


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    start_ticks: int

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


def proc_info(pid: int) -> ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            raw = stat_file.read().decode(errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return ProcInfo(
            pid=pid,
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            sid=int(fields[3]),
            state=fields[0],
            start_ticks=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def all_processes() -> Iterator[ProcInfo]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if name.isdigit() and (info := proc_info(int(name))) is not None:
            yield info


Selector = Callable[[ProcInfo], bool]


def in_sessions(
    sids: Iterable[int], *, spare: Iterable[int] = (), since_ticks: int = 0
) -> Selector:
    """Selects live processes of the sessions `sids` (or groups with those ids), except `spare`
    pids and processes started before `since_ticks`."""
    wanted, spared = set(sids), set(spare)

    def select(info: ProcInfo) -> bool:
        return (
            info.alive
            and (info.sid in wanted or info.pgid in wanted)
            and info.pid not in spared
            and info.start_ticks >= since_ticks
        )

    return select


def _signal_checked(info: ProcInfo, sig: int) -> None:
    """Sends `sig` to the process `info` describes, unless its pid now names another process."""
    try:
        pidfd = os.pidfd_open(info.pid)
    except OSError:
        return
    try:
        now = proc_info(info.pid)
        if now is None or now.start_ticks != info.start_ticks or now.sid != info.sid:
            return
        signal.pidfd_send_signal(pidfd, sig)
        if sig == signal.SIGTERM:
            # A stopped process would only see the SIGTERM once continued.
            signal.pidfd_send_signal(pidfd, signal.SIGCONT)
    except OSError:
        pass
    finally:
        os.close(pidfd)


def signal_selected(select: Selector, sig: int, already: set[tuple[int, int]] | None = None) -> int:
    """Sends `sig` to every selected process; returns how many were selected.

    With `already`, processes in it (pid, start time) are skipped and those signalled are added,
    so repeating the call only reaches processes started since.
    """
    targets = [info for info in all_processes() if select(info)]
    for info in targets:
        identity = (info.pid, info.start_ticks)
        if already is not None:
            if identity in already:
                continue
            already.add(identity)
        _signal_checked(info, sig)
    return len(targets)


async def terminate_selected(select: Selector, grace: float = DEFAULT_GRACE_SECONDS) -> None:
    """SIGTERM to every selected process, then SIGKILL to whatever outlives `grace` seconds."""
    if signal_selected(select, signal.SIGTERM) == 0:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        await asyncio.sleep(_POLL_SECONDS)
        if not any(select(info) for info in all_processes()):
            return
    # Processes may fork while we kill: repeat a few times until the selection is empty.
    for _ in range(20):
        if signal_selected(select, signal.SIGKILL) == 0:
            return
        await asyncio.sleep(_POLL_SECONDS)
    log.warning("some processes survived SIGKILL (uninterruptible sleep?)")


async def terminate_sessions(sids: Iterable[int], grace: float = DEFAULT_GRACE_SECONDS) -> None:
    """Ends every process of the given sessions / process groups (leaders included)."""
    wanted = set(sids)
    for sid in wanted:
        # The group signal is atomic: it reaches members forked since the /proc scan too.
        with contextlib.suppress(OSError):
            os.killpg(sid, signal.SIGTERM)
            os.killpg(sid, signal.SIGCONT)
    await terminate_selected(in_sessions(wanted), grace)


# ---------------------------------------------------------------------------------------------
# PID 1

_FORWARDED_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
)


def make_undumpable() -> None:
    """PR_SET_DUMPABLE 0: processes of other users (the agent's, unless root) cannot read this
    process' /proc entries (environ, mem, fds) nor ptrace it. Inherited by forks, reset by exec."""
    pr_set_dumpable = 4
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(pr_set_dumpable, 0, 0, 0, 0) != 0:
            log.warning("prctl(PR_SET_DUMPABLE, 0) failed: %s", os.strerror(ctypes.get_errno()))
    except (OSError, AttributeError):
        log.warning("prctl is not available: the daemon's /proc entries stay readable")


def end_with_parent(parent: int) -> None:
    """In a child process of the daemon's own (not an exec'd helper): SIGKILL when the thread
    that started it ends, e.g. a daemon killed with SIGKILL, which leaves no one to end it; or
    at once if the daemon (`parent`) is already gone."""
    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) != 0:
        log.warning("prctl(PR_SET_PDEATHSIG) failed: %s", os.strerror(ctypes.get_errno()))
    if os.getppid() != parent:
        os._exit(1)


def run_as_init_if_pid1(force: bool = False) -> None:
    """When this process is PID 1, fork: the parent becomes a minimal init, the child returns.

    The init forwards termination signals to the daemon, reaps every orphan reparented to it,
    and exits with the daemon's exit status. Must be called before any thread or event loop
    exists. `force` does the same when not PID 1 (the init is then a subreaper).
    """
    if os.getpid() != 1 and not force:
        return
    if force:
        _set_child_subreaper()
    daemon_pid = os.fork()
    if daemon_pid == 0:
        return
    _init_loop(daemon_pid)


def _set_child_subreaper() -> None:
    import ctypes

    pr_set_child_subreaper = 36
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def _init_loop(daemon_pid: int) -> None:
    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            os.kill(daemon_pid, signum)

    for signum in _FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        if pid == daemon_pid:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)
