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
sandbox decision of a call that asked for nothing (`Sandboxing.decide(None, demand)`:
confined when the sandbox is on), since it loads workspace code (tsserver plugins a
tsconfig.json names, pyright's configured environments). Memory is capped (V8's heap limit, and the server's
processes are killed when their resident memory passes --language-server-memory-mb); a server
idle for --language-server-idle-minutes is stopped; one that exits is restarted in the
background, and until it answers again its files are reported skipped with the reason.
--no-language-servers leaves read_lints to the command-line linters.

Outside run_everything, and for a restricted agent, a server runs only confined
(`server_demand`): with no sandbox to be had its files are skipped with the reason.

Servers the workspace names in .helix/languages.toml (tools/helix_languages.py) are kept here
too, one per definition and demand: the command is the agent's own program.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from exec_daemon.kernel.agents import AgentModes, SubagentSessions
from exec_daemon.kernel.context import RUN_EVERYTHING, CallContext, call_run_mode
from exec_daemon.kernel.sandboxing import AS_REQUESTED, SandboxDemand
from exec_daemon.kernel.spec import EVERYTHING
from exec_daemon.kernel.state import Daemon

if TYPE_CHECKING:
    # pygls and lsprotocol take ~0.6 s to import: only a daemon that starts a server pays it.
    from tools.lsp_session import LanguageServer

from tools.helix_languages import (
    CONFIG_PATH,
    WorkspaceLanguages,
    read_languages,
)
from tools.language_server_kinds import (
    SERVER_FOR_KIND,
    ServerKind,
    ServerUnavailable,
    server_argv,
    workspace_server,
)
from tools.workspace import AgentPaths

log = logging.getLogger(__name__)


class LanguageServers:
    """The daemon's language servers, and the files the agent changed in this session."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        # By (name, demand); a workspace's server's name is prefixed with its file's path.
        self.servers: dict[tuple[str, SandboxDemand], LanguageServer] = {}
        self._session_files: dict[str, None] = {}
        self._idle: asyncio.Task[None] | None = None

    async def server_for(
        self, kind: str, demand: SandboxDemand = AS_REQUESTED
    ) -> LanguageServer | None:
        """The server for a file kind of tools/lints.py running under `demand`, None when no
        server covers it or it is not installed."""
        spec = SERVER_FOR_KIND.get(kind)
        config = self.daemon.config
        if not config.language_servers_enabled or spec is None:
            return None
        key = (spec.name, demand)
        if key not in self.servers:
            env = self.daemon.env.snapshot()
            argv = await asyncio.to_thread(
                server_argv, spec, env, config.language_server_memory_mb, self.daemon.workspace
            )
            if argv is None:
                return None
            # Label read now, off the event loop (cached).
            await asyncio.to_thread(spec.label)
        return self._kept(key, spec, demand)

    def _kept(
        self, key: tuple[str, SandboxDemand], kind: ServerKind, demand: SandboxDemand
    ) -> LanguageServer:
        if key not in self.servers:
            from tools.lsp_session import LanguageServer

            self.servers[key] = LanguageServer(kind, self.daemon, demand)
            if self._idle is None:
                self._idle = asyncio.create_task(self._stop_idle())
        return self.servers[key]

    async def workspace_languages(self) -> WorkspaceLanguages:
        """What the workspace's .helix/languages.toml names (nothing when language servers are
        off). Raises BadConfig."""
        if not self.daemon.config.language_servers_enabled:
            return WorkspaceLanguages({}, ())
        rules = self.daemon.service(AgentPaths)
        return await asyncio.to_thread(read_languages, self.daemon.workspace, rules)

    async def named_server(
        self, languages: WorkspaceLanguages, name: str, demand: SandboxDemand
    ) -> LanguageServer:
        """The server a workspace language lists, under `demand`: one the file defines (the
        agent's own program), else the built-in one of that name. Raises ServerUnavailable when
        there is neither."""
        named = languages.servers.get(name)
        if named is None:
            builtin = BUILTIN_BY_NAME.get(name)
            server = await self.server_for(builtin, demand) if builtin is not None else None
            if server is None:
                raise ServerUnavailable(
                    f"{name}: {CONFIG_PATH} lists it but defines no [language-server.{name}]"
                    if builtin is None
                    else f"{name} is not installed"
                )
            return server
        kind = workspace_server(named, _first_language_id(languages, name))
        return await self._workspace_server(kind, demand)

    async def _workspace_server(self, kind: ServerKind, demand: SandboxDemand) -> LanguageServer:
        """The server of this definition running under `demand`; those of a changed definition
        are stopped."""
        name = f"{CONFIG_PATH}:{kind.name}"
        for key, stale in list(self.servers.items()):
            if key[0] == name and stale.kind != kind:
                del self.servers[key]
                await stale.stop()
        return self._kept((name, demand), kind, demand)

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


BUILTIN_BY_NAME = {server.name: kind for kind, server in SERVER_FOR_KIND.items()}


def server_demand(ctx: CallContext) -> SandboxDemand:
    """How the language servers must run for this call. Each runs workspace code: the command
    .helix/languages.toml names, tsserver plugins a tsconfig.json names and the workspace's
    typescript, pyright's configured environments. So outside run_everything (and for a
    read-only agent or one in a mode that changes nothing: read-only then) only confined, as
    shell commands that run the repository's code do. One server runs per demand: a call that
    may run it only confined is not lent one a run_everything call started unconfined."""
    daemon = ctx.daemon
    restricted = daemon.service(SubagentSessions).is_readonly(ctx.agent_id) or (
        daemon.service(AgentModes).allows(ctx.agent_id) is not EVERYTHING
    )
    if not restricted and call_run_mode(ctx) == RUN_EVERYTHING:
        return AS_REQUESTED
    return SandboxDemand(read_only=restricted, confined=True)


def _first_language_id(languages: WorkspaceLanguages, server: str) -> str:
    """The languageId of the first language listing `server` (one per server, so its
    definition stays the same whichever file asks)."""
    return next(
        (language.language_id for language in languages.languages if server in language.servers),
        server,
    )


def _real(path: Path | str) -> str:
    return os.path.normpath(os.path.realpath(path))
