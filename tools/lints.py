"""read_lints_tool_call (ReadLints): diagnostics from warm language servers and the real linters.

| files | language server (tools/language_servers.py), kept warm | command-line linter |
|---|---|---|
| .py .pyi | pyright (types, imports) | ruff beside it (lint rules; the workspace's ruff config applies) |
| shell scripts (.sh .bash .ksh, or a sh/bash shebang) | bash-language-server (shellcheck behind it) | shellcheck, when the server is not installed |
| .js .mjs .cjs | typescript-language-server | `node --check` (syntax errors), when the server is not installed |
| .ts .tsx .mts .cts | typescript-language-server (the workspace's typescript) | tsc --noEmit, when the server is not installed |
| .json | | the JSON parser |
| what a [[language]] of the workspace's .helix/languages.toml covers | the servers it lists (tools/helix_languages.py), run as the agent's own programs | ruff beside, for Python |

A linter that is not installed makes its files `unsupported_paths`, as are files no linter
covers. No paths = the files the edit tools wrote in this session and those `git status` lists
as changed or new in the workspace. Directories are expanded to the files under them that the
agent may see (.gitignore and .cursorignore apply). Linters run at the same time, each bounded
in time; one that fails or times out (or a server that crashed and is being restarted) puts its
files in `skipped` with the reason, the others still answer: a Python file can then be both in
`files` (ruff's findings) and in `skipped` (why pyright did not answer).

A linter runs what the workspace holds (its node_modules/.bin/tsc is the agent's to write) and
parses what the agent wrote: with the sandbox on (--sandbox-enabled) every linter, and its
`--version`, runs under the sandbox's isolated confinement (exec_daemon/kernel/sandboxing.py's
ISOLATED: no network, no writes but a few devices); when the sandbox cannot confine them the
call is `unavailable` with the reason. Without the sandbox they run unconfined, as the agent's
own commands then do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agent.v1.common_pb2 import ToolError
from agent.v1.files_pb2 import (
    FileLints,
    LintDiagnostic,
    ReadLintsArgs,
    ReadLintsResult,
    ReadLintsSuccess,
    SkippedLintPath,
)
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.git_run import run_git
from exec_daemon.kernel.paths import PathRefused, real_path
from exec_daemon.kernel.processes import Confinement
from exec_daemon.kernel.runner import HelperFailed, run_helper
from exec_daemon.kernel.sandboxing import ISOLATED, Sandboxing
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, Subject, ToolSpec
from exec_daemon.kernel.state import Daemon
from tools.helix_languages import CONFIG_PATH as HELIX_CONFIG
from tools.helix_languages import NO_LANGUAGES, BadConfig, WorkspaceLanguages
from tools.language_server_kinds import ServerUnavailable
from tools.language_servers import LanguageServers, server_demand

if TYPE_CHECKING:
    from tools.lsp_session import LanguageServer
from tools.workspace import AgentPaths, CursorIgnore, display_path, resolve_path
from tools.workspace_files import list_files

log = logging.getLogger(__name__)

LINT_TIMEOUT_SECONDS = 60.0
MAX_FILES = 500
MAX_DIAGNOSTICS = 2000
MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_OUTPUT_BYTES = 32 * 1024 * 1024
STDERR_LIMIT_BYTES = 1024 * 1024
# node --check takes one file per process; this many run at once.
NODE_PARALLEL = 4

PYTHON = frozenset({".py", ".pyi"})
SHELL = frozenset({".sh", ".bash", ".ksh"})
JAVASCRIPT = frozenset({".js", ".mjs", ".cjs"})
TYPESCRIPT = frozenset({".ts", ".tsx", ".mts", ".cts"})
JSON_FILES = frozenset({".json"})
_SHELL_SHEBANG = re.compile(rb"^#!\s*(?:/usr)?/bin/(?:env\s+)?(?:ba|k|da)?sh\b")


class LintFailure(Exception):
    """A linter could not lint its files; the message is the reason shown for each."""


@dataclass
class LintRun:
    """What one linter found: diagnostics per absolute path."""

    name: str
    diagnostics: dict[str, list[LintDiagnostic]] = field(default_factory=dict)
    # Files this linter could not lint, with the reason (the others' diagnostics still count).
    skipped: dict[str, str] = field(default_factory=dict)

    def add(self, path: str, diagnostic: LintDiagnostic) -> None:
        self.diagnostics.setdefault(os.path.normpath(path), []).append(diagnostic)


# ---------------------------------------------------------------------------------------------
# Finding the linters


def find_tool(name: str, env: dict[str, str]) -> str | None:
    """`name` from PATH, else beside this Python (the .venv's ruff), like the CLI finds rg."""
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def find_tsc(workspace: str, env: dict[str, str]) -> str | None:
    local = Path(workspace) / "node_modules" / ".bin" / "tsc"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which("tsc", path=env.get("PATH", os.defpath))


class LinterVersions:
    """`<tool> --version` of each linter, asked once per daemon."""

    def __init__(self, daemon: Daemon) -> None:
        self._versions: dict[str, str] = {}

    async def version(self, name: str, tool: str, launch: Launch) -> str:
        if tool not in self._versions:
            try:
                output = await _run(tool, ["--version"], launch)
                words = output.stdout.decode("utf-8", "replace").split()
                numbers = [word.lstrip("v") for word in words if re.match(r"v?\d+\.\d+", word)]
                self._versions[tool] = f"{name} {numbers[0]}" if numbers else name
            except LintFailure:
                self._versions[tool] = name
        return self._versions[tool]


# ---------------------------------------------------------------------------------------------
# Running a linter


@dataclass
class ProcessOutput:
    returncode: int
    stdout: bytes
    stderr: bytes


@dataclass(frozen=True)
class Launch:
    """How the linters of one call run: in `cwd` (the workspace), with `env`, under
    `confinement`."""

    cwd: str
    env: dict[str, str]
    confinement: Confinement


async def linters_launch(daemon: Daemon, env: dict[str, str]) -> Launch:
    """The launch of a call's linters: with the sandbox on, isolated (no network, no writes):
    a linter runs what the workspace holds (its node_modules/.bin/tsc) and parses what the agent
    wrote. Raises LintFailure when the sandbox is on but cannot confine them."""
    decision = await daemon.service(Sandboxing).decide(None, ISOLATED)
    if decision.refusal:
        raise LintFailure(f"the linters cannot be sandboxed: {decision.refusal}")
    return Launch(daemon.workspace, env, decision.confinement)


async def _run(tool: str, args: list[str], launch: Launch) -> ProcessOutput:
    """Runs a linter to completion through the helper runner, bounded in time and output."""
    try:
        done = await run_helper(
            [tool, *args],
            env=launch.env,
            cwd=launch.cwd,
            confinement=launch.confinement,
            time_limit=LINT_TIMEOUT_SECONDS,
            limit=MAX_OUTPUT_BYTES,
            stderr_limit=STDERR_LIMIT_BYTES,
        )
    except HelperFailed as exc:
        raise LintFailure(exc.message) from None
    if done.stdout.cut:
        raise LintFailure(f"{os.path.basename(tool)} printed more than {MAX_OUTPUT_BYTES} bytes")
    return ProcessOutput(done.returncode, done.stdout.data, done.stderr.data)


def _diagnostic(
    severity: str,
    message: str,
    source: str,
    code: str,
    start: tuple[int, int],
    end: tuple[int, int] | None = None,
) -> LintDiagnostic:
    end = end or start
    return LintDiagnostic(
        severity=severity,
        message=message,
        source=source,
        code=code,
        start_line=max(start[0], 0),
        start_column=max(start[1], 0),
        end_line=max(end[0], 0),
        end_column=max(end[1], 0),
    )


def _stderr_reason(tool: str, output: ProcessOutput) -> str:
    text = output.stderr.decode("utf-8", "replace").strip().splitlines()
    detail = text[0][:300] if text else f"exit code {output.returncode}"
    return f"{tool} failed: {detail}"


async def lint_python(tool: str, files: list[str], launch: Launch) -> LintRun:
    output = await _run(
        tool,
        ["check", "--output-format=json", "--exit-zero", "--no-cache", "--", *files],
        launch,
    )
    try:
        entries = json.loads(output.stdout or b"[]")
    except ValueError:
        raise LintFailure(_stderr_reason("ruff", output)) from None
    if output.returncode != 0 and not entries:
        raise LintFailure(_stderr_reason("ruff", output))
    run = LintRun("ruff")
    for entry in entries:
        code = entry.get("code") or ""
        syntax = not code or code == "invalid-syntax"
        start, end = entry.get("location") or {}, entry.get("end_location") or {}
        run.add(
            entry["filename"]
            if os.path.isabs(entry["filename"])
            else os.path.join(launch.cwd, entry["filename"]),
            _diagnostic(
                "error" if syntax else "warning",
                entry.get("message", ""),
                "ruff",
                "" if syntax else code,
                (start.get("row", 0), start.get("column", 0)),
                (end.get("row", 0), end.get("column", 0)),
            ),
        )
    return run


SHELLCHECK_SEVERITY = {"error": "error", "warning": "warning", "info": "info", "style": "hint"}


async def lint_shell(tool: str, files: list[str], launch: Launch) -> LintRun:
    output = await _run(tool, ["--format=json1", "--", *files], launch)
    try:
        report = json.loads(output.stdout)
    except ValueError:
        raise LintFailure(_stderr_reason("shellcheck", output)) from None
    run = LintRun("shellcheck")
    for comment in report.get("comments", []):
        path = comment["file"]
        run.add(
            path if os.path.isabs(path) else os.path.join(launch.cwd, path),
            _diagnostic(
                SHELLCHECK_SEVERITY.get(comment.get("level", ""), "warning"),
                comment.get("message", ""),
                "shellcheck",
                f"SC{comment.get('code', '')}",
                (comment.get("line", 0), comment.get("column", 0)),
                (comment.get("endLine", 0), comment.get("endColumn", 0)),
            ),
        )
    return run


_NODE_ERROR = re.compile(r"^(\w*Error): (.*)$", re.MULTILINE)


def parse_node_check(path: str, stderr: str) -> LintDiagnostic | None:
    """The syntax error `node --check` reports: `file:LINE`, the line, a caret, `XError: msg`."""
    lines = stderr.splitlines()
    location = re.match(r"^(.*):(\d+)$", lines[0]) if lines else None
    error = _NODE_ERROR.search(stderr)
    if location is None or error is None:
        return None
    line = int(location.group(2))
    caret = next((text for text in lines[1:4] if text.strip().startswith("^")), "")
    column = caret.index("^") + 1 if caret else 0
    return _diagnostic("error", f"{error.group(1)}: {error.group(2)}", "node", "", (line, column))


async def lint_javascript(tool: str, files: list[str], launch: Launch) -> LintRun:
    run = LintRun("node --check")
    gate = asyncio.Semaphore(NODE_PARALLEL)

    async def check(path: str) -> None:
        async with gate:
            output = await _run(tool, ["--check", path], launch)
        if output.returncode == 0:
            return
        diagnostic = parse_node_check(path, output.stderr.decode("utf-8", "replace"))
        if diagnostic is None:
            raise LintFailure(_stderr_reason("node --check", output))
        run.add(path, diagnostic)

    await asyncio.gather(*(check(path) for path in files))
    return run


_TSC_LINE = re.compile(r"^(.+?)\((\d+),(\d+)\): (error|warning|message) (TS\d+): (.*)$")


async def lint_typescript(tool: str, files: list[str], launch: Launch) -> LintRun:
    output = await _run(tool, ["--noEmit", "--pretty", "false", *files], launch)
    run = LintRun("tsc")
    for line in output.stdout.decode("utf-8", "replace").splitlines():
        match = _TSC_LINE.match(line)
        if match is None:
            continue
        path, row, column, severity, code, message = match.groups()
        run.add(
            path if os.path.isabs(path) else os.path.join(launch.cwd, path),
            _diagnostic(
                "info" if severity == "message" else severity,
                message,
                "tsc",
                code,
                (int(row), int(column)),
            ),
        )
    if output.returncode not in (0, 1, 2) or (output.returncode and not run.diagnostics):
        raise LintFailure(_stderr_reason("tsc", output))
    return run


def _parse_json_files(files: list[str]) -> LintRun:
    run = LintRun("json")
    for path in files:
        try:
            if os.path.getsize(path) > MAX_JSON_BYTES:
                raise LintFailure(f"larger than {MAX_JSON_BYTES} bytes")
            text = Path(path).read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            run.add(path, _diagnostic("error", f"not UTF-8: {exc.reason}", "json", "", (1, 1)))
            continue
        except OSError as exc:
            raise LintFailure(f"cannot read {path}: {exc.strerror}") from None
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            run.add(path, _diagnostic("error", exc.msg, "json", "", (exc.lineno, exc.colno)))
    return run


async def lint_json(tool: str, files: list[str], launch: Launch) -> LintRun:
    return await asyncio.to_thread(_parse_json_files, files)


# ---------------------------------------------------------------------------------------------
# Choosing files and linters

Linter = Callable[[str, list[str], Launch], Awaitable[LintRun]]


@dataclass(frozen=True)
class LinterSpec:
    name: str
    run: Linter


LINTERS = {
    "python": LinterSpec("ruff", lint_python),
    "shell": LinterSpec("shellcheck", lint_shell),
    "javascript": LinterSpec("node", lint_javascript),
    "typescript": LinterSpec("tsc", lint_typescript),
    "json": LinterSpec("json", lint_json),
}


def file_kind(path: str) -> str | None:
    extension = os.path.splitext(path)[1].lower()
    for kind, extensions in (
        ("python", PYTHON),
        ("shell", SHELL),
        ("javascript", JAVASCRIPT),
        ("typescript", TYPESCRIPT),
        ("json", JSON_FILES),
    ):
        if extension in extensions:
            return kind
    if not extension:
        with contextlib.suppress(OSError), open(path, "rb") as file:
            if _SHELL_SHEBANG.match(file.read(128)):
                return "shell"
    return None


def _tool_for(kind: str, workspace: str, env: dict[str, str]) -> str | None:
    if kind == "json":
        return "json"
    if kind == "typescript":
        return find_tsc(workspace, env)
    return find_tool(LINTERS[kind].name, env)


@dataclass
class Selection:
    files: list[str] = field(default_factory=list)  # absolute
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (absolute, reason)


_HIDDEN = "hidden from the agent by .cursorignore"


def _classify(named: Path, rules: AgentPaths, ignore: CursorIgnore) -> tuple[str, str]:
    """("dir" | "file", real path) or (why it is skipped, path). Linters read by name, so what
    they get is checked where it really is."""
    try:
        real = Path(real_path(named, rules))
    except PathRefused as refused:
        hidden = refused.kind == "hidden" and ignore.is_ignored(refused.path)
        return (_HIDDEN if hidden else refused.reason), str(named)
    except OSError:
        return "no such file", str(named)
    if ignore.is_ignored(real, real.is_dir()):
        return _HIDDEN, str(real)
    if real.is_dir():
        return "dir", str(real)
    if real.is_file():
        return "file", str(real)
    return "no such file", str(real)


async def _select(daemon: Daemon, paths: list[str]) -> Selection:
    workspace = daemon.workspace
    ignore = daemon.service(CursorIgnore)
    selection = Selection()
    rules = daemon.service(AgentPaths)
    for path in paths:
        kind, shown = await asyncio.to_thread(
            _classify, resolve_path(workspace, path), rules, ignore
        )
        if kind == "dir":
            found, _more = await list_files(
                daemon, Path(shown), MAX_FILES + 1, LINT_TIMEOUT_SECONDS
            )
            selection.files += found
        elif kind == "file":
            selection.files.append(shown)
        else:
            selection.skipped.append((shown, kind))
    unique = list(dict.fromkeys(selection.files))
    for extra in unique[MAX_FILES:]:
        selection.skipped.append((extra, f"more than {MAX_FILES} files asked for"))
    selection.files = unique[:MAX_FILES]
    return selection


async def changed_files(daemon: Daemon) -> list[str]:
    """Workspace files git sees as changed or new (not deleted ones), relative paths."""
    top = await run_git(daemon, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise CodedError(
            ErrorCode.FAILED_PRECONDITION,
            "no paths given and the workspace is not a git repository",
        )
    status = await run_git(
        daemon, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", "."
    )
    if status.returncode != 0:
        raise CodedError(ErrorCode.INTERNAL, f"git status failed: {status.stderr[:300]}")
    root = top.stdout.decode().strip()
    entries = status.stdout.decode("utf-8", "surrogateescape").split("\0")
    candidates = []
    skip_next = False
    for entry in entries:
        if skip_next:  # the old name of a rename
            skip_next = False
            continue
        if len(entry) < 4:
            continue
        state, name = entry[:2], entry[3:]
        skip_next = "R" in state or "C" in state
        if "D" not in state:
            candidates.append(os.path.join(root, name))
    return await asyncio.to_thread(lambda: [path for path in candidates if os.path.isfile(path)])


def _error(code: str, message: str) -> ReadLintsResult:
    return ReadLintsResult(error=ToolError(code=code, message=message))


async def _default_paths(daemon: Daemon) -> list[str]:
    """The files the edit tools wrote in this session, then those git sees changed."""
    written = await asyncio.to_thread(daemon.service(LanguageServers).session_files)
    try:
        changed = await changed_files(daemon)
    except CodedError:
        if not written:
            raise
        changed = []
    return list(dict.fromkeys([*written, *changed]))


async def read_lints(args: ReadLintsArgs, ctx: CallContext) -> ReadLintsResult:
    daemon = ctx.daemon
    paths = list(args.paths)
    if not paths:
        try:
            paths = await _default_paths(daemon)
        except CodedError as failure:
            return _error(failure.code, failure.message)
    try:
        selection = await _select(daemon, paths)
    except CodedError as failure:
        return _error(failure.code, failure.message)
    env = daemon.env.snapshot()
    kinds = await asyncio.to_thread(lambda: [file_kind(path) for path in selection.files])
    servers = daemon.service(LanguageServers)
    named = await _workspace_named(daemon, selection)
    demand = server_demand(ctx)
    found = {kind: await servers.server_for(kind, demand) for kind in set(kinds) if kind}
    # Python keeps ruff beside pyright; a server replaces the other kinds' linter.
    tools = {
        kind: _tool_for(kind, daemon.workspace, env)
        for kind in found
        if found[kind] is None or kind == "python"
    }
    jobs: list[tuple[list[str], Awaitable[tuple[str, LintRun | str]]]] = []
    unsupported: list[str] = []
    by_kind: dict[str, list[str]] = {}
    by_name: dict[str, list[str]] = {}
    for path, kind in zip(selection.files, kinds, strict=True):
        names = named.get(path)
        if names:
            # A language of .helix/languages.toml covers it: its servers answer (ruff still
            # runs beside for Python).
            for name in names:
                by_name.setdefault(name, []).append(path)
            if kind == "python" and tools.get(kind) is not None:
                by_kind.setdefault(kind, []).append(path)
        elif kind is None or (found[kind] is None and tools[kind] is None):
            unsupported.append(path)
        else:
            by_kind.setdefault(kind, []).append(path)
    try:
        launch = await linters_launch(daemon, env)
    except LintFailure as failure:
        return _error("unavailable", str(failure))
    by_server: dict[int, tuple[LanguageServer, list[str]]] = {}
    for kind, files in by_kind.items():
        server = found[kind]
        own = [path for path in files if not named.get(path)]
        if server is not None and own:
            by_server.setdefault(id(server), (server, []))[1].extend(own)
        if tools.get(kind) is not None:
            jobs.append((files, _lint_kind(daemon, kind, tools[kind], files, launch)))
    for name, files in by_name.items():
        try:
            server = await servers.named_server(named.languages, name, demand)
        except ServerUnavailable as failure:
            jobs.append((files, _unavailable(name, str(failure))))
            continue
        by_server.setdefault(id(server), (server, []))[1].extend(files)
    for server, files in by_server.values():
        jobs.append((files, _ask_server(server, files)))
    outcomes = await asyncio.gather(*(job for _, job in jobs))
    return ReadLintsResult(
        success=_success(
            daemon.workspace, selection, unsupported, [files for files, _ in jobs], outcomes
        )
    )


class NamedServers(dict[str, tuple[str, ...]]):
    """The servers the workspace's .helix/languages.toml lists for each asked file it covers."""

    languages: WorkspaceLanguages = NO_LANGUAGES


async def _workspace_named(daemon: Daemon, selection: Selection) -> NamedServers:
    """Which asked files a language of .helix/languages.toml covers, and the servers it lists;
    a file that cannot be used is reported skipped and the built-in servers answer."""
    named = NamedServers()
    try:
        named.languages = await daemon.service(LanguageServers).workspace_languages()
    except BadConfig as bad:
        config = os.path.join(daemon.workspace, HELIX_CONFIG)
        selection.skipped.append((config, f"{bad}; the built-in language servers answered"))
        return named
    named.update(named.languages.servers_by_file(daemon.workspace, selection.files))
    return named


async def _unavailable(name: str, reason: str) -> tuple[str, LintRun | str]:
    return name, reason


async def _ask_server(server: LanguageServer, files: list[str]) -> tuple[str, LintRun | str]:
    label = server.kind.label()
    texts = await asyncio.to_thread(_read_texts, files)
    run = LintRun(label)
    for path, text in texts.items():
        if isinstance(text, LintFailure):
            run.skipped[path] = str(text)
    readable = {path: text for path, text in texts.items() if isinstance(text, str)}
    try:
        found, skipped = await server.diagnostics(readable)
    except ServerUnavailable as failure:
        return label, str(failure)
    for path, diagnostics in found.items():
        run.diagnostics[path] = diagnostics
    run.skipped.update(skipped)
    return label, run


def _read_texts(files: list[str]) -> dict[str, str | LintFailure]:
    texts: dict[str, str | LintFailure] = {}
    for path in files:
        try:
            if os.path.getsize(path) > MAX_JSON_BYTES:
                texts[path] = LintFailure(f"larger than {MAX_JSON_BYTES} bytes")
                continue
            texts[path] = Path(path).read_bytes().decode("utf-8", "replace")
        except OSError as exc:
            texts[path] = LintFailure(f"cannot read {path}: {exc.strerror}")
    return texts


READ_LINTS = ToolSpec(
    "read_lints_tool_call",
    read_lints,
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("ReadLints"),
    subject=lambda args: Subject(paths_read=tuple(args.paths)),
)


async def _lint_kind(
    daemon: Daemon, kind: str, tool: str | None, files: list[str], launch: Launch
) -> tuple[str, LintRun | str]:
    """(linter with version, its run or why it failed)."""
    spec = LINTERS[kind]
    assert tool is not None
    label = (
        "json"
        if kind == "json"
        else await daemon.service(LinterVersions).version(spec.name, tool, launch)
    )
    try:
        return label, await spec.run(tool, files, launch)
    except LintFailure as failure:
        log.info("%s failed: %s", label, failure)
        return label, str(failure)


def _success(
    workspace: str,
    selection: Selection,
    unsupported: list[str],
    grouped: list[list[str]],
    outcomes: list[tuple[str, LintRun | str]],
) -> ReadLintsSuccess:
    success = ReadLintsSuccess(
        unsupported_paths=[display_path(workspace, path) for path in unsupported],
        skipped=[
            SkippedLintPath(path=display_path(workspace, path), reason=reason)
            for path, reason in selection.skipped
        ],
    )
    # A file two linters checked (ruff and pyright) is one entry with both's diagnostics.
    merged: dict[str, list[LintDiagnostic]] = {}
    for files, (label, outcome) in zip(grouped, outcomes, strict=True):
        success.linters.append(label)
        for path in files:
            reason = outcome if isinstance(outcome, str) else outcome.skipped.get(path)
            if reason is not None:
                success.skipped.append(
                    SkippedLintPath(path=display_path(workspace, path), reason=reason)
                )
            elif not isinstance(outcome, str):
                merged.setdefault(path, []).extend(
                    outcome.diagnostics.get(os.path.normpath(path), [])
                )
    shown = 0
    for path, found in merged.items():
        diagnostics = sorted(found, key=lambda d: (d.start_line, d.start_column))
        success.total_diagnostics += len(diagnostics)
        room = max(MAX_DIAGNOSTICS - shown, 0)
        if len(diagnostics) > room:
            success.truncated = True
            diagnostics = diagnostics[:room]
        shown += len(diagnostics)
        success.files.append(FileLints(path=display_path(workspace, path), diagnostics=diagnostics))
    success.files.sort(key=lambda file: file.path)
    return success
