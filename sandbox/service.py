"""The daemon's sandbox: probes the kernel once, resolves policies, confines commands.

Use from a spawn path:

    sandbox = daemon.service(SandboxService)
    policy = sandbox.resolve(args.requested_sandbox_policy)    # raises SandboxRejected
    if policy.sandboxed:
        run = await sandbox.confine(policy, cwd, env=env)        # raises SandboxRejected
        process = spawn(run.argv(command), env=run.env(env), pass_fds=run.pass_fds)
        await run.started()      # raises SandboxRejected if the set-up failed
    # A run cleans up after itself when its sandbox ends; run.aclose() on error paths.

`SandboxService.decide` is the one sandbox decision of a shell call (the `Sandboxing` protocol of
exec_daemon/kernel/sandboxing.py); the `SandboxConfinement` it answers with wraps the above for
exec_daemon/kernel/processes.py's spawn path (its `Confinement` seam: `key`, `wrap(spec)`, then
`started(wrapped_spec)` once the process exists).

The helper's pid is the one to signal: SIGTERM/SIGHUP are forwarded into the sandbox, SIGKILL of
the helper (or of its process group) ends every process the command started.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import itertools
import logging
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from agent.v1.shell_pb2 import SandboxPolicy
from exec_daemon.kernel.metering import Meter, Metric
from exec_daemon.kernel.paths import DeclaredPaths
from exec_daemon.kernel.processes import UNCONFINED, Confinement, ProcInfo, Selector, SpawnSpec
from exec_daemon.kernel.sandboxing import AS_REQUESTED, SandboxDecision, SandboxDemand
from exec_daemon.kernel.state import Daemon
from exec_daemon.kernel.state_root import sockets_folder
from exec_daemon.kernel.writable import WritableAreas, WritableGrant
from sandbox.build import HelperBuildError, ensure_helper
from sandbox.caches import CacheGrant, SandboxCacheFolder, shared_grant
from sandbox.placeholders import PlaceholderKeeper
from sandbox.plan import PROGRAM_READS, X11_SOCKETS, Plan, build_plan
from sandbox.policy import (
    ConfigFiles,
    EffectivePolicy,
    SandboxConfig,
    SandboxRejected,
    SandboxSetupFailed,
    SandboxType,
    resolve_policy,
)
from sandbox.probe import KernelSupport, probe_kernel, probe_kernel_sync
from sandbox.protected import outside_targets
from sandbox.proxy import Egress, ProxyRules, ProxyServer, private_exceptions_from_env

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_SECONDS = 15.0
_READ_WRITE = SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READWRITE)
_MESSAGE_SIZE = 4096
# Processes and threads of an isolated helper (ffmpeg's decoding threads).
ISOLATED_MAX_PROCESSES = 64


@functools.lru_cache(maxsize=8)
def _real_homes(home: str) -> tuple[str, ...]:
    """The homes whose protected files the sandbox keeps read-only: HOME of the daemon's
    environment and the daemon's own, as real paths."""
    return tuple(dict.fromkeys(os.path.realpath(p) for p in filter(None, [home, str(Path.home())])))


def prepare_x11_sockets_folder() -> None:
    """Makes /tmp/.X11-unix (root's, 1777, as X servers and systemd-tmpfiles make it) when the
    daemon is root and it is missing: it then exists before any sandbox, which masks it, so an X
    server started later is out of reach by its socket file too."""
    if os.geteuid() != 0 or os.path.lexists(X11_SOCKETS):
        return
    with contextlib.suppress(OSError):
        os.mkdir(X11_SOCKETS, 0o1777)
        fd = os.open(X11_SOCKETS, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fchmod(fd, 0o1777)  # past the umask
        finally:
            os.close(fd)


class SandboxService:
    """One per daemon: `daemon.service(SandboxService)`."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.enabled = daemon.config.sandbox_enabled
        self.workspace = Path(daemon.workspace)
        self.helper: str | None = daemon.config.sandbox_helper_path
        self.support: KernelSupport | None = None
        self.configs = ConfigFiles(self.workspace)
        self._private_exceptions = private_exceptions_from_env()
        self._start_lock = asyncio.Lock()
        self._live: set[SandboxRun] = set()
        self.placeholders = PlaceholderKeeper()
        self.build_caches = SandboxCacheFolder(daemon.config.sandbox_build_cache_folder)
        # The daemon's own directories: read-only inside every sandbox (keep_private).
        self._writable_grant: tuple[tuple[object, ...], WritableGrant] | None = None
        config = daemon.config
        self._private: dict[str, None] = dict.fromkeys(
            str(path)
            for path in (config.state_root, config.terminals_folder, config.artifacts_folder)
        )
        if config.record_folder is not None:
            self._private[str(config.record_folder)] = None
        # Told every request the sandboxes' proxies answer (the session record, when kept).
        self.on_egress: Egress | None = None
        # Its sockets (tmux, code-server): masked in every sandbox, whenever they are bound.
        self._masked = [str(sockets_folder(config.state_root))]
        self._own_ports = config.own_ports()

    async def start(self) -> KernelSupport:
        """Builds/locates the helper and probes the kernel (once); logs one status line."""
        async with self._start_lock:
            if self.support is None:
                self.support = await self._probe()
                log.info("%s", self.support.status_line(self.enabled))
                if self.enabled:
                    await asyncio.to_thread(self.build_caches.prepare)
                    await asyncio.to_thread(prepare_x11_sockets_folder)
            return self.support

    async def _probe(self) -> KernelSupport:
        error = await asyncio.to_thread(self._locate_helper)
        if error is not None:
            return error
        assert self.helper is not None
        return await probe_kernel(self.helper)

    def _locate_helper(self) -> KernelSupport | None:
        """Builds the helper when no path was configured; a KernelSupport saying why on failure."""
        if self.helper is None:
            try:
                self.helper = str(ensure_helper())
            except HelperBuildError as exc:
                log.error("sandbox helper cannot be built: %s", exc)
                return KernelSupport(helper_error="it could not be built")
        elif not os.access(self.helper, os.X_OK):
            return KernelSupport(helper_error=f"{self.helper} is not executable")
        return None

    def keep_private(self, path: Path | str) -> None:
        """Makes `path` read-only inside every sandbox: for the daemon's own files that a
        confined command must not change (e.g. shell state that unconfined shells source)."""
        self._private[str(path)] = None

    def outside_paths(self) -> list[str]:
        """Real paths read-only inside every sandbox where they lie in a writable area: what
        DeclaredPaths lists (hook scripts, the daemon's install) and the protected home and
        system paths of the one table (sandbox/protected.py)."""
        declared = [item.path for item in self.daemon.service(DeclaredPaths).all()]
        return [*declared, *outside_targets(_real_homes(self.daemon.env.get("HOME") or ""))]

    def support_now(self) -> KernelSupport:
        """The probe result for synchronous callers (the daemon probes at start, so this is
        normally known; otherwise the probe runs here, once, blocking ~10 ms)."""
        if self.support is None:
            self.support = self._locate_helper() or probe_kernel_sync(self.helper or "")
            log.info("%s", self.support.status_line(self.enabled))
        return self.support

    def resolve(self, requested: SandboxPolicy | None) -> EffectivePolicy:
        """The effective policy of a call; raises SandboxRejected (reason for the user)."""
        if not self.enabled:
            # Without --sandbox-enabled, sandbox.json changes nothing (resolve_policy): no read
            # of it on every shell call.
            return resolve_policy(requested, sandbox_enabled=False, workspace=self.workspace)
        user, project = self.configs.load()
        return resolve_policy(
            requested,
            sandbox_enabled=self.enabled,
            workspace=self.workspace,
            user=user,
            project=project,
        )

    async def confine(
        self,
        policy: EffectivePolicy,
        cwd: Path | str,
        *,
        env: Mapping[str, str],
        keep_fds: Sequence[int] = (),
        own: Sequence[str] = (),
    ) -> SandboxRun:
        """What the spawn path needs to run a command under `policy`. Raises SandboxRejected.

        `own`: paths the command itself must be able to write (see plan.build_plan)."""
        await self.start()
        return self.prepare(policy, cwd, env=env, keep_fds=keep_fds, own=own)

    def prepare(
        self,
        policy: EffectivePolicy,
        cwd: Path | str,
        *,
        env: Mapping[str, str],
        keep_fds: Sequence[int] = (),
        own: Sequence[str] = (),
    ) -> SandboxRun:
        """`confine` for synchronous callers. Raises SandboxRejected."""
        support = self.support_now()
        missing = support.missing()
        if missing:
            raise SandboxRejected("the command cannot be sandboxed here: " + "; ".join(missing))
        assert self.helper is not None
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            plan = build_plan(
                policy,
                self.workspace,
                cwd,
                env=env,
                ctl_fd=child.fileno(),
                keep_fds=keep_fds,
                mount_proc=support.proc_mount,
                limit_processes=support.process_limit != "none",
                private=list(self._private),
                outside=self.outside_paths(),
                own=own,
                caches=self._cache_grant(policy),
                secrets=self.daemon.service(DeclaredPaths).secrets(),
                homes=self.daemon.service(WritableAreas).homes(),
                masked=self._masked,
            )
        except BaseException:
            parent.close()
            child.close()
            raise
        self._hold_placeholders(plan)
        run = SandboxRun(self, policy, plan, self.helper, parent, child)
        self._live.add(run)
        return run

    def _cache_grant(self, policy: EffectivePolicy) -> CacheGrant | None:
        """The build caches of a command (sandbox/caches.py): for `workspace_readwrite` only.
        Shared ones are those of the daemon's home, whatever HOME the command says."""
        if policy.type != SandboxType.WORKSPACE_READWRITE:
            return None
        if not policy.shared_build_cache:
            return self.build_caches.grant()
        home = _real_homes(self.daemon.env.get("HOME") or "")[0]
        return shared_grant(home, os.path.realpath(self.workspace), self.outside_paths())

    def writable_grant(self) -> WritableGrant:
        """What a `workspace_readwrite` command is granted besides the workspace (sandbox.json
        is read whether or not the sandbox is enabled; nothing is created): the file tools'
        writable set (exec_daemon/kernel/writable.py). An unreadable sandbox.json grants none."""
        try:
            user, project = self.configs.load()
        except SandboxRejected:
            return WritableGrant()
        key = (user, project, self.build_caches.made())
        cached = self._writable_grant
        if cached is not None and all(a is b for a, b in zip(cached[0], key, strict=True)):
            return cached[1]
        grant = self._writable_grant_of(user, project)
        if not self._shared_caches(user, project):
            # Shared caches depend on what home holds now: looked for again each time.
            self._writable_grant = (key, grant)
        return grant

    def _shared_caches(self, user: SandboxConfig | None, project: SandboxConfig | None) -> bool:
        return any(c is not None and c.shared_build_cache for c in (user, project))

    def _writable_grant_of(
        self, user: SandboxConfig | None, project: SandboxConfig | None
    ) -> WritableGrant:
        try:
            policy = resolve_policy(
                _READ_WRITE,
                sandbox_enabled=True,
                workspace=self.workspace,
                user=user,
                project=project,
            )
        except SandboxRejected:
            return WritableGrant()
        areas = list(policy.readwrite_paths)
        if policy.type == SandboxType.WORKSPACE_READWRITE:
            if not policy.shared_build_cache:
                areas += [self.build_caches.real] if self.build_caches.intact() else []
            else:
                home = _real_homes(self.daemon.env.get("HOME") or "")[0]
                workspace = os.path.realpath(self.workspace)
                shared = shared_grant(home, workspace, self.outside_paths(), create=False)
                areas += shared.writable
        return WritableGrant(tuple(areas), temp=not policy.disable_tmp_write)

    def _hold_placeholders(self, plan: Plan) -> None:
        for option, value in itertools.pairwise(plan.options):
            if option in ("--ro-dir", "--ro-file"):
                self.placeholders.hold(value, directory=option == "--ro-dir")

    async def decide(
        self, requested: SandboxPolicy | None, demand: SandboxDemand = AS_REQUESTED
    ) -> SandboxDecision:
        """The one sandbox decision of a shell call (exec_daemon/kernel/sandboxing.py)."""
        decision = await self._decide(requested, demand)
        outcome = (
            "refused"
            if decision.refusal
            else "unconfined"
            if decision.confinement == UNCONFINED
            else "confined"
        )
        self.daemon.service(Meter).add(Metric.SANDBOX_DECISIONS, outcome=outcome)
        return decision

    async def _decide(
        self, requested: SandboxPolicy | None, demand: SandboxDemand
    ) -> SandboxDecision:
        support = await self.start() if self.enabled else None
        available = support is not None and not support.missing()
        if demand.isolated:
            return self._isolated(demand) if available else SandboxDecision()
        asked = requested
        if demand.read_only and available:
            asked = _with_type(asked, SandboxPolicy.TYPE_WORKSPACE_READONLY)
        if demand.confined:
            if asked is not None and asked.type == SandboxPolicy.TYPE_INSECURE_NONE:
                return SandboxDecision(
                    refusal="the command asks for full access", needs_review=True
                )
            if not available:
                return SandboxDecision(refusal="the sandbox is not available", needs_review=True)
            if asked is None or asked.type == SandboxPolicy.TYPE_UNSPECIFIED:
                asked = _with_type(asked, SandboxPolicy.TYPE_WORKSPACE_READWRITE)
        imposed = asked if asked is not requested else None
        try:
            policy = self.resolve(asked)
            confinement = self._confinement(policy)
        except SandboxRejected as rejected:
            return SandboxDecision(imposed=imposed, refusal=rejected.reason)
        reported = policy.sandboxed or asked is not None
        effective = policy.to_proto() if reported else None
        if effective is not None and policy.sandboxed:
            # Why a build cache is not writable (e.g. a home cache folder that leads elsewhere).
            caches = self._cache_grant(policy)
            effective.notes.extend(caches.notes if caches is not None else ())
        return SandboxDecision(confinement=confinement, effective_policy=effective, imposed=imposed)

    def _isolated(self, demand: SandboxDemand) -> SandboxDecision:
        """The confinement of a helper parsing the agent's input: reads (the secrets hidden;
        only the programs and its input for `reads_input_only`), no network, no writes but the
        devices; sandbox.json changes nothing of it."""
        policy = EffectivePolicy(
            sandboxed=True,
            type=SandboxType.WORKSPACE_READONLY,
            disable_tmp_write=True,
            max_processes=ISOLATED_MAX_PROCESSES,
            readable=PROGRAM_READS if demand.reads_input_only else None,
        )
        try:
            confinement = self._confinement(policy)
        except SandboxRejected as rejected:
            return SandboxDecision(refusal=rejected.reason)
        return SandboxDecision(confinement=confinement, effective_policy=policy.to_proto())

    def _confinement(self, policy: EffectivePolicy) -> Confinement:
        """How a call under `policy` is confined. Raises SandboxRejected (e.g. the kernel lacks
        what the policy needs)."""
        if not policy.sandboxed:
            return UNCONFINED
        missing = self.support_now().missing()
        if missing:
            raise SandboxRejected("the command cannot be sandboxed here: " + "; ".join(missing))
        # What the plan refuses (e.g. `.git` is a symlink) is refused now, before any spawn.
        build_plan(
            policy,
            self.workspace,
            self.workspace,
            env={},
            private=list(self._private),
            outside=self.outside_paths(),
        )
        return SandboxConfinement(self, policy)

    def proxy_rules(self, policy: EffectivePolicy) -> ProxyRules:
        return ProxyRules(policy.network, self._private_exceptions, self._own_ports)

    def _forget(self, run: SandboxRun) -> None:
        self._live.discard(run)
        if not self._live:
            self.placeholders.schedule_release()

    async def aclose(self) -> None:
        for run in list(self._live):
            await run.aclose()
        await self.placeholders.release()


class SandboxConfinement:
    """`exec_daemon.kernel.processes.Confinement` for one effective policy.

    `wrap` prepares a run per process it wraps (so one instance may start several, e.g. a
    long-lived shell that is restarted); `started(wrapped)` must follow once the process exists
    (`abandon(wrapped)` if it could not be started).
    """

    def __init__(self, service: SandboxService, policy: EffectivePolicy) -> None:
        self.service = service
        self.policy = policy
        identity = policy.to_proto().SerializeToString(deterministic=True) + bytes(
            f"{service.workspace}\0{policy.readable}", "utf-8"
        )
        self.key = "sandbox-" + hashlib.sha256(identity).hexdigest()[:16]
        self._runs: dict[int, SandboxRun] = {}

    def wrap(self, spec: SpawnSpec) -> SpawnSpec:
        try:
            run = self.service.prepare(
                self.policy,
                spec.cwd,
                env=spec.env,
                keep_fds=spec.pass_fds,
                own=spec.writable,
            )
        except SandboxSetupFailed:
            raise
        except SandboxRejected as rejected:
            raise SandboxSetupFailed(rejected.reason) from None
        self._runs[run.pass_fds[0]] = run
        return replace(
            spec,
            argv=tuple(run.argv(spec.argv)),
            env=run.env(spec.env),
            pass_fds=(*spec.pass_fds, *run.pass_fds),
        )

    def _run_of(self, wrapped: SpawnSpec) -> SandboxRun | None:
        for fd in wrapped.pass_fds:
            run = self._runs.pop(fd, None)
            if run is not None:
                return run
        return None

    async def started(self, wrapped: SpawnSpec) -> None:
        """Waits until the command runs confined; raises SandboxRejected if set-up failed."""
        run = self._run_of(wrapped)
        if run is not None:
            await run.started()

    async def abandon(self, wrapped: SpawnSpec) -> None:
        run = self._run_of(wrapped)
        if run is not None:
            await run.aclose()

    def command_processes(self, helper_pid: int, since_ticks: int) -> Selector:
        """Selects (for exec_daemon.kernel.processes' signalling) the processes in the sandbox that
        `helper_pid` runs which started at `since_ticks` or later: also those that left the
        helper's session with setsid, which a session-based selection misses."""
        namespace = _child_pid_namespace(helper_pid)

        def select(info: ProcInfo) -> bool:
            return (
                namespace is not None
                and info.alive
                and info.start_ticks >= since_ticks
                and _pid_namespace(info.pid) == namespace
            )

        return select


def _pid_namespace(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def _child_pid_namespace(helper_pid: int) -> int | None:
    """The PID namespace the helper created: that of its child (the sandbox's PID 1)."""
    try:
        children = Path(f"/proc/{helper_pid}/task/{helper_pid}/children").read_text().split()
    except OSError:
        return None
    for child in children:
        namespace = _pid_namespace(int(child))
        if namespace is not None and namespace != _pid_namespace(helper_pid):
            return namespace
    return None


class SandboxRun:
    """One confined process: its helper command line, environment and control channel."""

    def __init__(
        self,
        service: SandboxService,
        policy: EffectivePolicy,
        plan: Plan,
        helper: str,
        control: socket.socket,
        child_control: socket.socket,
    ) -> None:
        self.service = service
        self.policy = policy
        self.plan = plan
        self.helper = helper
        self._control = control
        self._child_control: socket.socket | None = child_control
        self._proxy: ProxyServer | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._closed = False
        control.setblocking(False)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._child_control.fileno(),) if self._child_control is not None else ()

    def argv(self, command: Sequence[str]) -> list[str]:
        return [self.helper, *self.plan.options, "--", *command]

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        return self.plan.apply_env(base)

    def effective_policy(self) -> SandboxPolicy:
        message = self.policy.to_proto()
        message.notes.extend(self.plan.notes)
        return message

    async def started(self) -> None:
        """Waits until the command runs confined. Call it right after spawning the helper.

        Raises SandboxSetupFailed (a SandboxRejected and an OSError) with the helper's reason
        when the sandbox could not be set up (the command then never ran).
        """
        self._close_child_end()
        try:
            async with asyncio.timeout(STARTUP_TIMEOUT_SECONDS):
                while True:
                    data, fds = await self._receive()
                    if data == b"PROXY" and len(fds) == 1:
                        await self._serve_proxy(fds[0])
                        continue
                    for fd in fds:
                        os.close(fd)
                    if data == b"OK":
                        break
                    elif data.startswith(b"ERR "):
                        reason = data[4:].decode(errors="replace")
                        # The helper is done (placeholders removed) when it closes the channel.
                        while (await self._receive())[0]:
                            pass
                        raise SandboxSetupFailed(f"the sandbox could not be set up: {reason}")
                    elif not data:
                        raise SandboxSetupFailed(
                            "the sandbox helper ended before the command started"
                        )
        except BaseException:
            await self.aclose()
            raise
        self._watcher = asyncio.create_task(self._watch_until_exit())

    async def _receive(self) -> tuple[bytes, list[int]]:
        loop = asyncio.get_running_loop()
        while True:
            try:
                data, fds, _flags, _addr = socket.recv_fds(self._control, _MESSAGE_SIZE, 1)
                return data, fds
            except BlockingIOError:
                pass
            readable: asyncio.Future[None] = loop.create_future()

            def wake(future: asyncio.Future[None] = readable) -> None:
                if not future.done():
                    future.set_result(None)

            loop.add_reader(self._control.fileno(), wake)
            try:
                await readable
            finally:
                loop.remove_reader(self._control.fileno())

    async def _serve_proxy(self, fd: int) -> None:
        listener = socket.socket(fileno=fd)
        if self._proxy is not None:
            listener.close()
            return
        self._proxy = ProxyServer(
            listener, self.service.proxy_rules(self.policy), self.service.on_egress
        )
        await self._proxy.start()

    async def _watch_until_exit(self) -> None:
        """The helper keeps the control channel open until the sandbox ends: then clean up."""
        with contextlib.suppress(OSError):
            while (await self._receive())[0]:
                pass
        await self.aclose()

    def _close_child_end(self) -> None:
        if self._child_control is not None:
            self._child_control.close()
            self._child_control = None

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_child_end()
        if self._watcher is not None and self._watcher is not asyncio.current_task():
            self._watcher.cancel()
        if self._proxy is not None:
            await self._proxy.aclose()
        self._control.close()
        self.service._forget(self)


def _with_type(requested: SandboxPolicy | None, policy_type: int) -> SandboxPolicy:
    """`requested` (or an empty policy) with its type replaced."""
    policy = SandboxPolicy()
    if requested is not None:
        policy.CopyFrom(requested)
    policy.type = policy_type  # type: ignore[assignment]
    return policy
