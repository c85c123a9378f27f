"""The conversation with one language server (tools/language_servers.py keeps them): pygls's
`LanguageClient` (lsprotocol types) over the pipes of a server the daemon spawned, the documents
it was sent, the diagnostics it published. Imported when the first server starts: pygls and
lsprotocol take ~0.6 s to import, which a daemon that never lints should not pay at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.io_ import run_async
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path, to_fs_path

from agent.v1.files_pb2 import LintDiagnostic
from exec_daemon import __version__
from exec_daemon.kernel.processes import (
    Child,
    Confinement,
    SpawnSpec,
    close_fds,
    in_sessions,
    open_pipe,
    spawn,
)
from exec_daemon.kernel.sandboxing import AS_REQUESTED, SandboxDemand, Sandboxing
from exec_daemon.kernel.state import Daemon
from tools.helix_languages import CONFIG_PATH as HELIX_CONFIG
from tools.language_server_kinds import (
    MAX_OPEN_DOCUMENTS,
    MEMORY_CHECK_SECONDS,
    REPORT_TIMEOUT_SECONDS,
    RESTART_DELAY_MAX_SECONDS,
    RESTART_DELAY_SECONDS,
    START_TIMEOUT_SECONDS,
    STDERR_TAIL_BYTES,
    TSSERVER_CHECKS,
    TSSERVER_REQUEST,
    ServerKind,
    ServerUnavailable,
    server_argv,
    tree_memory,
    tsserver_lint,
)

log = logging.getLogger(__name__)
# pygls logs every message it sends at INFO, file contents included.
logging.getLogger("pygls").setLevel(logging.WARNING)

SEVERITIES = {
    types.DiagnosticSeverity.Error: "error",
    types.DiagnosticSeverity.Warning: "warning",
    types.DiagnosticSeverity.Information: "info",
    types.DiagnosticSeverity.Hint: "hint",
}


def to_lint(diagnostic: types.Diagnostic, source: str) -> LintDiagnostic:
    """LSP's 0-based positions become the 1-based lines and columns of the CLI linters."""
    start, end = diagnostic.range.start, diagnostic.range.end
    return LintDiagnostic(
        severity=SEVERITIES.get(diagnostic.severity or types.DiagnosticSeverity.Error, "error"),
        message=diagnostic.message,
        source=source,
        code="" if diagnostic.code is None else str(diagnostic.code),
        start_line=start.line + 1,
        start_column=start.character + 1,
        end_line=end.line + 1,
        end_column=end.character + 1,
    )


def settings_section(settings: dict[str, Any], section: str) -> Any:
    """workspace/configuration's answer for `section`: the key itself ("python.analysis"), else
    the dotted path through nested tables (as Helix answers from a server's `config`), else {}."""
    if not section:
        return settings
    if section in settings:
        return settings[section]
    found: Any = settings
    for part in section.split("."):
        if not isinstance(found, dict) or part not in found:
            return {}
        found = found[part]
    return found


def is_editor_hint(diagnostic: types.Diagnostic) -> bool:
    """Hints an editor shows by fading text (an unused name), not problems to report."""
    return diagnostic.severity == types.DiagnosticSeverity.Hint and bool(diagnostic.tags)


@dataclass
class Document:
    version: int
    text: str
    asked: float


@dataclass
class Published:
    # The document version it is for (the server's word, else the latest sent before it came).
    version: int
    diagnostics: Sequence[types.Diagnostic]


class DiagnosticsClient(LanguageClient):
    """pygls's client on pipes the daemon spawned (its own start_io spawns unconfined)."""

    def __init__(self, server: LanguageServer) -> None:
        super().__init__("exec-daemon", __version__)
        self.server = server
        # pygls marks the handlers it registers, so each is a function of its own.
        self.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(
            lambda params: server.published_diagnostics(params)
        )
        self.feature(types.WORKSPACE_CONFIGURATION)(lambda params: server.configuration(params))
        for method in (
            types.CLIENT_REGISTER_CAPABILITY,
            types.WINDOW_WORK_DONE_PROGRESS_CREATE,
            types.WINDOW_LOG_MESSAGE,
            types.WINDOW_SHOW_MESSAGE,
            types.PROGRESS,
            types.TELEMETRY_EVENT,
            "$/typescriptVersion",
        ):
            self.feature(method)(lambda params: None)

    def start_pipes(self, reader: asyncio.StreamReader, writer: asyncio.WriteTransport) -> None:
        self.protocol.set_writer(writer)  # type: ignore[arg-type]
        self._async_tasks.append(
            asyncio.create_task(
                run_async(
                    stop_event=self._stop_event,
                    reader=reader,
                    protocol=self.protocol,
                    logger=log,
                )
            )
        )


class LanguageServer:
    """One server process for the daemon's workspace, started on first need."""

    def __init__(
        self, kind: ServerKind, daemon: Daemon, demand: SandboxDemand = AS_REQUESTED
    ) -> None:
        self.kind = kind
        self.daemon = daemon
        # What its confinement must be beyond the sandbox's default (tools/language_servers.py).
        self.demand = demand
        self.client: DiagnosticsClient | None = None
        self.child: Child | None = None
        self.confinement: Confinement | None = None
        self.documents: dict[str, Document] = {}
        self.published: dict[str, Published] = {}
        self.changed = asyncio.Condition()
        self.down_reason = ""  # why it is not running (a crash), "" when it is or never ran
        self.crashes = 0
        self.starts = 0
        self.start_seconds = 0.0
        self.last_used = time.monotonic()
        self.stderr_tail = b""
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._restart: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def running(self) -> bool:
        return self.child is not None and self.child.returncode is None and self.client is not None

    @property
    def pid(self) -> int | None:
        return self.child.pid if self.running and self.child is not None else None

    # -- life cycle ----------------------------------------------------------------------------

    async def ensure_running(self) -> DiagnosticsClient:
        if self._restart is not None and not self._restart.done():
            raise ServerUnavailable(f"{self.down_reason}; restarting")
        async with self._lock:
            if self.running and self.client is not None:
                return self.client
            try:
                return await self._start()
            except ServerUnavailable:
                raise
            except Exception as exc:
                await self._discard()
                raise ServerUnavailable(
                    f"{self.kind.name} could not start: {exc or type(exc).__name__}"
                    + self._stderr_note()
                ) from None

    async def _start(self) -> DiagnosticsClient:
        daemon = self.daemon
        env = daemon.env.snapshot()
        argv = await asyncio.to_thread(
            server_argv, self.kind, env, daemon.config.language_server_memory_mb, daemon.workspace
        )
        if argv is None:
            raise ServerUnavailable(self._missing())
        env.update(self.kind.environment)
        decision = await daemon.service(Sandboxing).decide(None, self.demand)
        if decision.refusal:
            raise ServerUnavailable(f"{self.kind.name} cannot run: {decision.refusal}")
        began = time.monotonic()
        self.stderr_tail = b""
        self.documents.clear()
        self.published.clear()
        loop = asyncio.get_running_loop()
        stdin_read, stdin_write = os.pipe2(os.O_CLOEXEC)
        stdout_read, stdout_write = open_pipe()
        stderr_read, stderr_write = os.pipe2(os.O_CLOEXEC)
        try:
            self.child = await spawn(
                SpawnSpec(
                    argv=tuple(argv),
                    cwd=daemon.workspace,
                    env=env,
                    stdin=stdin_read,
                    stdout=stdout_write,
                    stderr=stderr_write,
                ),
                decision.confinement,
            )
        except BaseException:
            close_fds(stdin_write, stdout_read, stderr_read)
            raise
        finally:
            close_fds(stdin_read, stdout_write, stderr_write)
        self.confinement = decision.confinement
        self.starts += 1
        reader = asyncio.StreamReader(limit=1 << 20)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(stdout_read, "rb", 0)
        )
        writer, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(stdin_write, "wb", 0))
        errors = asyncio.StreamReader()
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(errors), os.fdopen(stderr_read, "rb", 0)
        )
        client = DiagnosticsClient(self)
        client.start_pipes(reader, writer)
        self.client = client
        self._track(self._drain_stderr(errors))
        self._track(self._watch(self.child, client))
        self._track(self._cap_memory(self.child))
        workspace = daemon.workspace
        options = await asyncio.to_thread(self.kind.initialization_options, workspace)
        await asyncio.wait_for(
            client.initialize_async(
                types.InitializeParams(
                    # No pid: a server watching it would find none inside the sandbox's PID
                    # namespace and exit.
                    process_id=None,
                    root_uri=from_fs_path(workspace),
                    workspace_folders=[
                        types.WorkspaceFolder(uri=from_fs_path(workspace) or "", name="workspace")
                    ],
                    initialization_options=options,
                    capabilities=types.ClientCapabilities(
                        workspace=types.WorkspaceClientCapabilities(configuration=True),
                        text_document=types.TextDocumentClientCapabilities(
                            synchronization=types.TextDocumentSyncClientCapabilities(),
                            publish_diagnostics=types.PublishDiagnosticsClientCapabilities(
                                version_support=True
                            ),
                        ),
                    ),
                )
            ),
            START_TIMEOUT_SECONDS,
        )
        client.initialized(types.InitializedParams())
        self.start_seconds = time.monotonic() - began
        self.down_reason = ""
        log.info("%s started in %.2f s (pid %d)", self.kind.name, self.start_seconds, self.pid)
        return client

    def _missing(self) -> str:
        if self.kind.from_workspace:
            return (
                f"{self.kind.name}: no program {self.kind.command!r} "
                f"(the command {HELIX_CONFIG} names) on PATH or in the workspace"
            )
        return f"{self.kind.name} is not installed"

    def _track(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain_stderr(self, errors: asyncio.StreamReader) -> None:
        while chunk := await errors.read(65536):
            self.stderr_tail = (self.stderr_tail + chunk)[-STDERR_TAIL_BYTES:]

    def _stderr_note(self) -> str:
        lines = self.stderr_tail.decode("utf-8", "replace").strip().splitlines()
        return f" ({lines[-1][:300]})" if lines else ""

    async def _watch(self, child: Child, client: DiagnosticsClient) -> None:
        code = await child.wait()
        if self._stopping or self.child is not child:
            return
        reason = self.down_reason or f"{self.kind.name} exited (code {code}){self._stderr_note()}"
        log.warning("%s", reason)
        await self._discard(reason)
        self.crashes += 1
        delay = min(RESTART_DELAY_SECONDS * 2 ** (self.crashes - 1), RESTART_DELAY_MAX_SECONDS)
        self._restart = asyncio.create_task(self._restart_after(delay))

    async def _restart_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        idle = self.daemon.config.language_server_idle_minutes * 60.0
        if time.monotonic() - self.last_used > idle:
            self._restart = None  # started again on next need
            return
        with contextlib.suppress(ServerUnavailable):
            await self.ensure_running_now()

    async def ensure_running_now(self) -> None:
        self._restart = None
        await self.ensure_running()

    async def _cap_memory(self, child: Child) -> None:
        limit_mb = self.daemon.config.language_server_memory_mb
        while child.returncode is None:
            await asyncio.sleep(MEMORY_CHECK_SECONDS)
            used = await asyncio.to_thread(self.memory_bytes)
            if used > limit_mb * 2**20 and child.returncode is None and self.child is child:
                self.down_reason = (
                    f"{self.kind.name} was stopped: it used {used // 2**20} MB of memory, "
                    f"more than {limit_mb} MB"
                )
                await child.terminate(grace=0.5)

    def memory_bytes(self) -> int:
        """Resident memory of the server and every process it started."""
        child = self.child
        if child is None or child.returncode is not None:
            return 0
        session = in_sessions({child.pid})
        escaped = (
            self.confinement.command_processes(child.pid, child.started_ticks)
            if self.confinement is not None
            else None
        )
        return tree_memory(lambda info: session(info) or (escaped is not None and escaped(info)))

    async def _discard(self, reason: str = "") -> None:
        """Forgets the process (ending it if alive) and fails whoever waits on it."""
        child, client = self.child, self.client
        self.child, self.client = None, None
        self.down_reason = reason
        if child is not None and child.returncode is None:
            await child.terminate(grace=0.5)
        if child is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(child.wait(), 5.0)
        if client is not None:
            await _close_client(client, reason or f"{self.kind.name} stopped")
        async with self.changed:
            self.changed.notify_all()

    async def stop(self) -> None:
        """Ends the server (SIGTERM to its session, SIGKILL soon after): quick enough for the
        daemon's bounded shutdown, and a server holds nothing a polite shutdown would save."""
        self._stopping = True
        try:
            if self._restart is not None:
                self._restart.cancel()
            await self._discard()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            self._stopping = False

    # -- documents -----------------------------------------------------------------------------

    def published_diagnostics(self, params: types.PublishDiagnosticsParams) -> None:
        path = _path_of(params.uri)
        if path is None:
            return
        document = self.documents.get(path)
        if params.version is None and document is not None and self.kind.reopens_on_change:
            return
        latest = document.version if document is not None else 0
        self.published[path] = Published(
            params.version if params.version is not None else latest, params.diagnostics
        )
        self._track(self._wake())

    async def _wake(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    def configuration(self, params: types.ConfigurationParams) -> list[Any]:
        return [settings_section(self.kind.settings, item.section or "") for item in params.items]

    def sync(self, path: str, text: str | None) -> None:
        """Sends the server `text` as `path`'s content (opening it first); None closes it."""
        client = self.client
        if client is None or not self.running:
            return
        uri = from_fs_path(path) or ""
        document = self.documents.get(path)
        if text is None:
            if document is not None:
                del self.documents[path]
                self.published.pop(path, None)
                client.text_document_did_close(
                    types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
                )
            return
        now = time.monotonic()
        if document is None:
            self.documents[path] = Document(1, text, now)
            client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    types.TextDocumentItem(uri, self.kind.language_id(path), 1, text)
                )
            )
            self._close_oldest()
            return
        document.asked = now
        if document.text == text:
            return
        document.version += 1
        document.text = text
        if self.kind.reopens_on_change:
            client.text_document_did_close(
                types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
            )
            client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    types.TextDocumentItem(uri, self.kind.language_id(path), document.version, text)
                )
            )
            return
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(document.version, uri),
                [types.TextDocumentContentChangeWholeDocument(text)],
            )
        )

    def _close_oldest(self) -> None:
        extra = len(self.documents) - MAX_OPEN_DOCUMENTS
        if extra <= 0:
            return
        oldest = sorted(self.documents, key=lambda path: self.documents[path].asked)[:extra]
        for path in oldest:
            self.sync(path, None)

    async def diagnostics(
        self, files: dict[str, str], within: float = REPORT_TIMEOUT_SECONDS
    ) -> tuple[dict[str, list[LintDiagnostic]], dict[str, str]]:
        """({path: diagnostics}, {path: why skipped}) for `files` ({path: current text})."""
        self.last_used = time.monotonic()
        await self.ensure_running()
        for path, text in files.items():
            self.sync(path, text)
        if self.kind.asks_tsserver:
            return await self._ask_tsserver(list(files), within)
        wanted = {path: self.documents[path].version for path in files if path in self.documents}

        def ready() -> bool:
            return not self.running or all(
                (found := self.published.get(path)) is not None and found.version >= version
                for path, version in wanted.items()
            )

        with contextlib.suppress(TimeoutError):
            async with self.changed:
                await asyncio.wait_for(self.changed.wait_for(ready), within)
        self._answered()
        found: dict[str, list[LintDiagnostic]] = {}
        skipped: dict[str, str] = {}
        for path in files:
            published = self.published.get(path)
            if not self.running:
                skipped[path] = self._down_note()
            elif published is None or published.version < wanted.get(path, 1):
                skipped[path] = f"{self.kind.name} did not report on it within {within:g} s"
            else:
                found[path] = [
                    to_lint(diagnostic, self.kind.name)
                    for diagnostic in published.diagnostics
                    if not is_editor_hint(diagnostic)
                ]
        return found, skipped

    def _down_note(self) -> str:
        return f"{self.down_reason or self.kind.name + ' stopped'}; restarting"

    async def _ask_tsserver(
        self, paths: list[str], within: float
    ) -> tuple[dict[str, list[LintDiagnostic]], dict[str, str]]:
        client = self.client
        assert client is not None
        found: dict[str, list[LintDiagnostic]] = {}
        skipped: dict[str, str] = {}

        async def check(path: str) -> None:
            diagnostics: list[LintDiagnostic] = []
            for command in TSSERVER_CHECKS:
                response = await client.workspace_execute_command_async(
                    types.ExecuteCommandParams(TSSERVER_REQUEST, [command, {"file": path}])
                )
                body = response.get("body") if isinstance(response, dict) else None
                if not isinstance(body, list):
                    raise ServerUnavailable(f"tsserver gave no {command} answer: {response!r:.200}")
                diagnostics += [tsserver_lint(entry, self.kind.name) for entry in body]
            found[path] = diagnostics

        async def bounded(path: str) -> None:
            try:
                await asyncio.wait_for(check(path), within)
            except TimeoutError:
                skipped[path] = f"{self.kind.name} did not answer within {within:g} s"
            except ServerUnavailable as failure:
                skipped[path] = str(failure)
            except Exception as exc:
                skipped[path] = (
                    self._down_note() if not self.running else f"{self.kind.name} failed: {exc}"
                )

        await asyncio.gather(*(bounded(path) for path in paths))
        self._answered()
        return found, skipped

    def _answered(self) -> None:
        self.last_used = time.monotonic()
        if self.running:
            self.crashes = 0


async def _close_client(client: DiagnosticsClient, reason: str) -> None:
    """Stops pygls's reader and fails the requests still waiting for an answer."""
    for future in client.protocol._request_futures.values():
        if not future.done():
            future.set_exception(ServerUnavailable(reason))
    client._stop_event.set()
    writer = client.protocol.writer
    if isinstance(writer, asyncio.WriteTransport):
        writer.close()
    for task in client._async_tasks:
        task.cancel()
    await asyncio.gather(*client._async_tasks, return_exceptions=True)


def _path_of(uri: str) -> str | None:
    path = to_fs_path(uri)
    return os.path.normpath(path) if path else None
