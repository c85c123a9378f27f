"""Assembles the daemon and serves it: one asyncio process, one port for Connect, gRPC and gRPC-Web."""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import signal
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path

from hypercorn.asyncio import serve as hypercorn_serve
from hypercorn.config import Config as HypercornConfig

from agent.v1 import control_pb2, exec_pb2, health_pb2
from agent.v1.control_connect import ControlServiceASGIApplication
from agent.v1.exec_connect import ExecServiceASGIApplication
from exec_daemon.guards import guard_middlewares
from exec_daemon.guards.redaction import SecretStore, json_text_redaction
from exec_daemon.kernel.call_marks import marked_by_this_daemon
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.context import Middleware
from exec_daemon.kernel.leftovers import end_left_running, record_mark
from exec_daemon.kernel.lifecycle import Lifecycle
from exec_daemon.kernel.paths import ensure_daemon_folder, journal_temp_folders
from exec_daemon.kernel.processes import terminate_selected
from exec_daemon.kernel.reseed import reseed_process_randomness
from exec_daemon.kernel.sandboxing import Sandboxing
from exec_daemon.kernel.spec import ToolSpec
from exec_daemon.kernel.state import Daemon
from exec_daemon.kernel.state_root import (
    StateRootError,
    claim_ended_instances,
    prepare_private_folder,
    prepare_state_root,
)
from exec_daemon.kernel.tool_calls import ToolCalls
from exec_daemon.kernel.writable import WritableAreas
from exec_daemon.registry import SPECS
from exec_daemon.rpc import connection_timeouts, desktop_server, hypercorn_fixes, pty_server
from exec_daemon.rpc.asgi import ASGIApp, FrontDoor
from exec_daemon.rpc.codecs import exec_stream_codecs
from exec_daemon.rpc.control_service import ControlService
from exec_daemon.rpc.cors import Cors
from exec_daemon.rpc.dispatch import Dispatcher
from exec_daemon.rpc.errors import ErrorMappingInterceptor
from exec_daemon.rpc.exec_service import ExecService
from exec_daemon.rpc.health import health_apps
from exec_daemon.rpc.ide import IdeServer
from exec_daemon.rpc.pool import Claim, Claims, PoolControlService
from exec_daemon.rpc.ports import PortReservations, hypercorn_binds, reserve_ports
from exec_daemon.rpc.reflection import reflection_apps
from exec_daemon.telemetry.call_log import call_logging
from exec_daemon.telemetry.session_record import SessionRecord, record_middleware, subagent_parent
from exec_daemon.telemetry.tracing import Telemetry, start_telemetry, tracing_middlewares
from exec_daemon.terminals import environment, tmux
from exec_daemon.terminals.pty import PtyManager
from sandbox.service import SandboxService
from tools import diffs, display, reports
from tools.sem_search import SemanticIndex
from tools.workspace import AgentPaths

log = logging.getLogger(__name__)

# hypercorn would GOAWAY a busy HTTP/2 connection after 1000 requests, mid-call (design.md).
KEEP_ALIVE_MAX_REQUESTS = 2**62
# hypercorn closes a connection idle for 5 s by default: a client reusing it at that moment gets a
# broken pipe. Orchestrators keep pooled connections far longer than that.
KEEP_ALIVE_SECONDS = 600.0
# After SIGTERM, streams are ended at once; the calls ended get this long to send their last answer
# (a cancelled call's processes get SIGKILL 1 s after SIGTERM; only a client that stops reading
# uses it all); then idle connections close at once, the others get GRACEFUL_SECONDS.
LAST_ANSWERS_SECONDS = 10.0
GRACEFUL_SECONDS = 1.0
# The HTTP server must have stopped within this long after SIGTERM, or it is cancelled.
STOP_SECONDS = 3.0
# In the terminals folder: the folders each daemon wrote temp files in (kernel/paths.py).
WRITES_JOURNAL = "writes"
# What reflection describes (grpcurl, buf curl): the daemon's services and the health service.
DESCRIBED = (exec_pb2.DESCRIPTOR, control_pb2.DESCRIPTOR, health_pb2.DESCRIPTOR)


def new_daemon(config: DaemonConfig, lifecycle: Lifecycle | None = None) -> Daemon:
    """The daemon's state, with every kernel protocol wired to its implementation."""
    daemon = Daemon(config)
    if lifecycle is not None:
        daemon.provide(Lifecycle, lambda _daemon: lifecycle)
    daemon.provide(Sandboxing, lambda daemon: daemon.service(SandboxService))
    # The file tools' writable set is the one a `workspace_readwrite` sandbox grants.
    daemon.service(WritableAreas).set_grant(lambda: daemon.service(SandboxService).writable_grant())
    # Before any layer asks for its Meter: when telemetry is on, the OTLP one.
    secrets = daemon.service(SecretStore)
    start_telemetry(daemon, redact=lambda text: secrets.matcher.redact(text))
    daemon.provide(
        SessionRecord,
        lambda daemon: SessionRecord(
            daemon.config.record_folder,
            redact=lambda text: secrets.matcher.redact(text),
            redact_json=json_text_redaction(secrets),
            max_bytes=daemon.config.record_max_bytes,
            parents=subagent_parent(daemon),
        ),
    )
    return daemon


def middlewares(daemon: Daemon) -> Sequence[Middleware]:
    """The cross-cutting wrappers of every tool call, outermost first.

    Tracing (only when on: exec_daemon/telemetry/tracing.py) goes first, so a span covers the
    guards too; then the session record (only with --record: exec_daemon/telemetry/session_record.py),
    outside the guards so it sees their refusals and what redaction left of results and deltas; then the call's log records (exec_daemon/telemetry/call_log.py), inside the span
    so they carry its ids, outside the guards so a refusal is logged;
    then the guards: redaction, permissions, hooks (why this order: exec_daemon/guards/__init__.py);
    innermost, the record of the agent's edits (for ai_attribution: tools/reports.py), which
    must see the args a call really ran with and its raw result.
    """
    return (
        *tracing_middlewares(daemon),
        *(
            [record_middleware(daemon, mcp_server_url(daemon))]
            if daemon.config.record_folder is not None
            else []
        ),
        call_logging(),
        *guard_middlewares(daemon),
        reports.record_agent_edits(daemon),
    )


def mcp_server_url(daemon: Daemon) -> Callable[[str], str]:
    """The URL of a configured MCP server over HTTP, "" for a stdio one or an unknown name."""

    def url(server: str) -> str:
        # Imported on the first MCP call: the MCP SDK takes ~0.5 s to import at start.
        from tools.mcp_client import McpServers

        spec = daemon.service(McpServers).settings.servers.get(server)
        return str(getattr(spec, "url", "") or "")

    return url


def build_routes(daemon: Daemon, specs: Iterable[ToolSpec] = SPECS) -> dict[str, ASGIApp]:
    """The RPC services of a daemon serving its agent, by path prefix."""
    config = daemon.config
    dispatcher = Dispatcher(daemon, specs, middlewares(daemon))
    # Subagents (Task) run their tools through this same dispatcher.
    daemon.provide(ToolCalls, lambda _daemon: dispatcher)
    interceptors = [ErrorMappingInterceptor()]
    read_max = config.max_message_bytes
    return {  # type: ignore[return-value]
        "/agent.v1.ExecService/": ExecServiceASGIApplication(
            ExecService(dispatcher, config.heartbeat_seconds),
            interceptors=interceptors,
            read_max_bytes=read_max,
            codecs=exec_stream_codecs(),
        ),
        "/agent.v1.ControlService/": ControlServiceASGIApplication(
            ControlService(dispatcher), interceptors=interceptors, read_max_bytes=read_max
        ),
        **reflection_apps(DESCRIBED, interceptors),
    }


def pool_routes(config: DaemonConfig, lifecycle: Lifecycle, claims: Claims) -> dict[str, ASGIApp]:
    """Before the claim (--wait-for-init): InitSandbox, and reflection to describe it."""
    interceptors = [ErrorMappingInterceptor()]
    return {  # type: ignore[return-value]
        "/agent.v1.ControlService/": ControlServiceASGIApplication(
            PoolControlService(config, lifecycle, claims),
            interceptors=interceptors,
            read_max_bytes=1024 * 1024,
        ),
        **reflection_apps(DESCRIBED, interceptors),
    }


def front_door(config: DaemonConfig, routes: dict[str, ASGIApp], lifecycle: Lifecycle) -> FrontDoor:
    return FrontDoor(
        routes,
        config.auth_token,
        compress_responses=config.compress_responses,
        drain_limit=config.max_message_bytes,
        cors=Cors(config.cors_allowed_origins),
        lifecycle=lifecycle,
        health=health_apps(lifecycle, [ErrorMappingInterceptor()]),  # type: ignore[arg-type]
        auth_header=config.auth_header,
    )


def build_app(daemon: Daemon, specs: Iterable[ToolSpec] = SPECS) -> FrontDoor:
    """The RPC port's app for a daemon serving its agent from the start."""
    lifecycle = daemon.service(Lifecycle)
    return front_door(daemon.config, build_routes(daemon, specs), lifecycle)


def hypercorn_config(
    config: DaemonConfig, sockets: list[socket.socket] | None = None
) -> HypercornConfig:
    """hypercorn's settings; it listens on `sockets` (bound by exec_daemon/rpc/ports.py) when
    given, else binds the port itself."""
    hconfig = HypercornConfig()
    host = f"[{config.host}]" if ":" in config.host else config.host
    hconfig.bind = hypercorn_binds(sockets) if sockets else [f"{host}:{config.port}"]
    hconfig.keep_alive_max_requests = KEEP_ALIVE_MAX_REQUESTS
    hconfig.keep_alive_timeout = KEEP_ALIVE_SECONDS
    # Until a connection's first request: exec_daemon/rpc/connection_timeouts.py.
    hconfig.header_timeout = config.header_timeout_seconds  # type: ignore[attr-defined]
    hconfig.graceful_timeout = GRACEFUL_SECONDS
    hconfig.accesslog = None
    hconfig.errorlog = logging.getLogger("hypercorn.error")
    # Large streamed outputs: bigger HTTP/2 frames mean fewer round trips through h2.
    hconfig.h2_max_inbound_frame_size = 2**20
    return hconfig


async def serve(config: DaemonConfig) -> None:
    """Runs until SIGTERM or SIGINT: readiness turns 503 at once, calls in flight get
    --drain-grace-seconds to finish, then the rest are cancelled and their processes ended.

    With --wait-for-init the port is served at once, to health and InitSandbox only; the
    daemon is set up for its agent (as it is at start otherwise) when InitSandbox binds it.
    """
    ports = reserve_ports(
        config.host,
        {"--port": config.port}
        | ({"--pty-websocket-port": config.pty_websocket_port} if config.pty_websocket_port else {})
        | ({"--novnc-port": config.novnc_port} if config.novnc_port else {}),
    )
    try:
        await _serve_reserved(config, ports)
    finally:
        ports.close()


async def _serve_reserved(config: DaemonConfig, ports: PortReservations) -> None:
    hypercorn_fixes.install()
    lifecycle = Lifecycle(wait_for_init=config.wait_for_init)
    drain = asyncio.Event()
    connection_timeouts.install()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(ignore_cancelled_connections)
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _drain_at_once, lifecycle, drain)
    restored = Restored()
    loop.add_signal_handler(signal.SIGUSR2, restored.signalled)
    http: asyncio.Task[None] | None = None
    door = front_door(config, {}, lifecycle)
    claims = Claims()
    if config.wait_for_init:
        door.bind(pool_routes(config, lifecycle, claims), config.auth_token)
        freeze_start_up_objects()  # the wait may be long: calls' garbage is collected in it
        http = _serve_http(door, config, stop, ports)
        log.info(
            "exec-daemon waiting for InitSandbox on %s:%d (--wait-for-init)",
            config.host,
            config.port,
        )
        claim = await _first(claims.accepted(), drain.wait(), http)
        if not isinstance(claim, Claim):
            claims.failed("the daemon is shutting down")
            await _shut_down(lifecycle, stop, http, config.drain_grace_seconds)
            return
        config = claim.config
        _forget_pool_credential(config.auth_token_file)
    else:
        claim = None
    daemon = new_daemon(config, lifecycle)
    if claim is not None:
        daemon.env.update(claim.env)
    log.info(
        "exec-daemon serving %s on %s:%d (Connect, gRPC, gRPC-Web)",
        config.workspace,
        config.host,
        config.port,
    )
    try:
        try:
            routes = await _set_up(daemon)
        except BaseException as exc:
            claims.failed(str(exc) or type(exc).__name__)
            raise
        async with (
            # tmux first: its socket is bound before any sandbox starts, so every sandbox hides it.
            tmux.running(daemon),
            pty_server.serving(daemon, ports.take("--pty-websocket-port")) as pty,
            desktop_server.serving(daemon, ports.take("--novnc-port")) as desktop,
            environment.started(daemon),
        ):
            restored.serving(daemon, pty, desktop)
            door.bind(routes, config.auth_token)
            lifecycle.serving()
            if lifecycle.ready:
                claims.serving()
            else:
                claims.failed("the daemon was told to stop while it started")
            freeze_start_up_objects()
            if http is None:
                http = _serve_http(door, config, stop, ports)
            # sem_search's index is built in the background (its own process, a low-priority
            # worker thread) and then follows the workspace, so a search finds it ready. Started
            # once the port is served: its listing, process, numpy and watcher held up the first
            # answer by a fifth of start-up's CPU.
            await daemon.service(SemanticIndex).start()
            await _first(drain.wait(), http)
            log.info("shutting down")
            await _shut_down(lifecycle, stop, http, config.drain_grace_seconds, daemon.stopping)
    finally:
        if http is not None and not http.done():
            stop.set()
            await _stop_within(http, STOP_SECONDS)
        await daemon.aclose()
        # Whatever any call or helper started and that outlived its owner's own ending.
        await terminate_selected(marked_by_this_daemon())


async def _start_record(daemon: Daemon) -> None:
    """With --record: its private folder made and its writer started; terminals' output goes to it."""
    folder = daemon.config.record_folder
    if folder is None:
        return
    try:
        await asyncio.to_thread(prepare_private_folder, folder)
    except StateRootError as exc:
        raise SystemExit(f"exec-daemon: no private folder for the session record: {exc}") from None
    record = daemon.service(SessionRecord)
    await asyncio.to_thread(record.start)
    daemon.service(PtyManager).on_output = record.terminal_output
    daemon.service(SandboxService).on_egress = record.proxy_egress
    daemon.service(SemanticIndex).on_changes = record.workspace_changes
    log.info("session record: %s", folder)


async def _set_up(daemon: Daemon) -> dict[str, ASGIApp]:
    """What the daemon prepares before it serves its agent; its RPC routes."""
    config = daemon.config
    routes = build_routes(daemon)
    # The daemon's private root and its own folders exist before any sandbox starts, so every
    # sandbox masks the sockets folder and mounts the rest read-only (a missing one could be
    # created, and symlinks planted in it, from inside).
    try:
        prepare_state_root(config.state_root)
        record_mark(config.state_root)
    except (StateRootError, OSError) as exc:
        raise SystemExit(f"exec-daemon: no private state root: {exc}") from None
    await _end_ended_daemons(config.state_root)
    log.info("state root: %s", config.state_root)
    await _start_record(daemon)
    try:
        ensure_daemon_folder(config.terminals_folder)
    except OSError as exc:
        raise SystemExit(
            f"exec-daemon: cannot prepare the terminals folder {config.terminals_folder}: "
            f"{exc.strerror or exc} (choose another with --terminals-folder)"
        ) from None
    await asyncio.to_thread(_undo_interrupted_applies, daemon)
    await asyncio.to_thread(_sweep_temp_files, config.terminals_folder / WRITES_JOURNAL)
    # Builds/locates the confinement helper, probes the kernel, logs one status line.
    await daemon.service(SandboxService).start()
    daemon.service(IdeServer)  # its folder exists, read-only in sandboxes, before any starts
    if config.computer_use_enabled or config.record_screen_enabled:
        await display.start_at_boot(daemon)
    return routes


async def _end_ended_daemons(state_root: Path) -> None:
    """Ends what the daemons that ended on this base without stopping (kill -9) left running,
    says so, and removes their state."""
    ended = claim_ended_instances(state_root)
    try:
        for left in await end_left_running(instance.path for instance in ended):
            log.warning(
                "ended %d processes a killed daemon left running (%s): %s",
                left.count,
                left.instance.name,
                left.summary(),
            )
    finally:
        for instance in ended:
            instance.remove()
            log.info("removed the state of an ended daemon: %s", instance.path)


def _forget_pool_credential(path: Path | None) -> None:
    """Removes the pool's credential file once claimed, when the daemon may: an agent reading it
    could claim the pool's other daemons still waiting. A read-only mount (a Kubernetes secret)
    keeps it: docs/scale-out.md says how to keep the RPC ports out of the agents' reach."""
    if path is None:
        return
    try:
        path.unlink()
    except OSError as exc:
        log.warning(
            "the pool's credential file %s stays (%s): keep other pool daemons' ports out of "
            "this agent's reach",
            path,
            exc.strerror,
        )


class Restored:
    """SIGUSR2: the VM was restored from a snapshot (scripts/image/pod-daemon's Resumed sends it
    once the kernel's generator is reseeded). The daemon's own randomness is seeded again, so two
    VMs restored from one snapshot draw different ids and temp names; telemetry exported from
    then on carries a fresh `service.instance.id`; and every client connection (RPC, PTY, the
    desktop page's and the IDE's) is closed, so that clients reconnect at once instead of waiting
    on a connection that died with the snapshot. Calls and terminals go on; background shells
    keep running."""

    def __init__(self) -> None:
        self._daemon: Daemon | None = None
        self._pty: pty_server.Server | None = None
        self._desktop: pty_server.Server | None = None
        self._closing: set[asyncio.Task[None]] = set()

    def serving(
        self, daemon: Daemon, pty: pty_server.Server | None, desktop: pty_server.Server | None
    ) -> None:
        self._daemon, self._pty, self._desktop = daemon, pty, desktop

    def signalled(self) -> None:
        reseed_process_randomness()
        log.info(
            "restored from a snapshot (SIGUSR2): random reseeded (a draw: %016x); closing the "
            "clients' connections",
            random.getrandbits(64),
        )
        if self._daemon is not None:
            self._daemon.service(Telemetry).restored()
        task = asyncio.get_running_loop().create_task(self._close_connections())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close_connections(self) -> None:
        rpc = await connection_timeouts.close_all()
        pty, desktop, ide = await asyncio.gather(
            pty_server.close_all(self._pty) if self._pty is not None else _none(),
            pty_server.close_all(self._desktop) if self._desktop is not None else _none(),
            self._daemon.service(IdeServer).close_all() if self._daemon is not None else _none(),
        )
        log.info("closed %d RPC, %d PTY, %d desktop and %d IDE connections", rpc, pty, desktop, ide)


async def _none() -> int:
    return 0


def _drain_at_once(lifecycle: Lifecycle, drain: asyncio.Event) -> None:
    """SIGTERM/SIGINT: not ready from this instant (the probes say 503), then the drain."""
    lifecycle.draining()
    drain.set()


def _serve_http(
    door: FrontDoor, config: DaemonConfig, stop: asyncio.Event, ports: PortReservations
) -> asyncio.Task[None]:
    hconfig = hypercorn_config(config, ports.take("--port"))
    return asyncio.create_task(
        hypercorn_serve(door, hconfig, shutdown_trigger=stop.wait)  # type: ignore[arg-type]
    )


async def _first(*awaitables: Awaitable[object]) -> object:
    """The result of whichever of `awaitables` ends first (the others are cancelled; a task
    given is left running)."""
    tasks = [
        item if isinstance(item, asyncio.Task) else asyncio.ensure_future(item)
        for item in awaitables
    ]
    try:
        done, _pending = await asyncio.wait(tasks, return_when="FIRST_COMPLETED")
    finally:
        for task, item in zip(tasks, awaitables, strict=True):
            if task is not item:
                task.cancel()
    first = next(iter(done))
    return None if first.cancelled() or first.exception() else first.result()


async def _shut_down(
    lifecycle: Lifecycle,
    stop: asyncio.Event,
    http: asyncio.Task[None],
    grace: float,
    stopping: asyncio.Event | None = None,
) -> None:
    """Readiness is already 503; calls in flight get `grace` seconds; then streams end
    (`stopping`: their calls are cancelled), their last answers are sent, and the port closes."""
    lifecycle.draining()
    calls = lifecycle.calls
    if grace > 0 and calls.value:
        log.info("draining: %d call(s) in flight, up to %gs", calls.value, grace)
        if not await calls.zero(grace):
            log.warning("drain: %d call(s) still running after %gs", calls.value, grace)
    lifecycle.stopped()
    if stopping is not None:
        stopping.set()
    if not await lifecycle.answers.zero(LAST_ANSWERS_SECONDS):
        log.warning(
            "%d answer(s) not sent after %gs (clients not reading): closing their connections",
            lifecycle.answers.value,
            LAST_ANSWERS_SECONDS,
        )
    stop.set()
    await _stop_within(http, STOP_SECONDS)


def _undo_interrupted_applies(daemon: Daemon) -> None:
    """Puts back the files of an apply_agent_diff a killed predecessor left half done."""
    root = daemon.config.terminals_folder / diffs.JOURNAL_FOLDER
    try:
        restored = diffs.recover_interrupted_applies(root, daemon.service(AgentPaths))
    except (OSError, ValueError) as exc:
        log.warning("cannot undo the interrupted apply_agent_diff recorded in %s: %s", root, exc)
        return
    if restored:
        log.warning(
            "put back %d files of an apply_agent_diff a killed daemon left half done: %s",
            len(restored),
            restored,
        )


def _sweep_temp_files(journal: Path) -> None:
    """Removes the temp files a killed predecessor left in the folders it wrote in, and records
    this daemon's (kernel/paths.py: journal_temp_folders)."""
    try:
        ensure_daemon_folder(journal)
        removed = journal_temp_folders(journal)
    except OSError as exc:
        log.warning("cannot keep the record of folders written in %s: %s", journal, exc)
        return
    if removed:
        log.info("removed %d temp files left by a killed daemon: %s", len(removed), removed)


def freeze_start_up_objects() -> None:
    """Moves what start-up made (modules, classes, the registry, the telemetry SDK: ~100k
    objects) out of the garbage collector's reach, and turns the collector on (the command line
    turns it off for start-up: exec_daemon/cli.py). They live as long as the daemon, and every
    full collection walked all of them (~90 ms each; with telemetry on, spans waiting in the
    export queue grow the old generation enough for one every few thousand calls). No
    collection first: it would hold up the first requests as long, for the few hundred cyclic
    objects start-up leaves as garbage."""
    gc.freeze()
    gc.enable()


def ignore_cancelled_connections(
    loop: asyncio.AbstractEventLoop, context: dict[str, object]
) -> None:
    """At shutdown hypercorn cancels the connections still open after its graceful timeout, and
    CPython 3.11's asyncio.start_server then logs each one as an "exception" (its done-callback
    calls `task.exception()` on the cancelled task, CPython gh-113538, fixed in 3.12): a
    CancelledError traceback per idle client on a clean SIGTERM. A cancellation is not an error."""
    if isinstance(context.get("exception"), asyncio.CancelledError):
        log.debug("connection cancelled at shutdown: %s", context.get("message"))
        return
    loop.default_exception_handler(context)


async def _stop_within(task: asyncio.Task[None], seconds: float) -> None:
    """hypercorn waits for open connections to close; an idle client may never close its own."""
    done, _pending = await asyncio.wait([task], timeout=seconds)
    if not done:
        task.cancel()
        await asyncio.wait([task])
    elif task.exception() is not None:
        raise task.exception()  # type: ignore[misc]
