"""ls_tool_call, glob_tool_call and grep_tool_call (on ripgrep).

ripgrep runs with the workspace as its cwd so `.cursorignore` (passed as `--ignore-file`, whose
patterns are relative to the cwd) anchors right, and paths inside the workspace are shown
relative to it. Both glob and grep keep ripgrep's parallel walk and do the sorting here:

- grep reads `rg --json` per file block (a begin line, the file's matches, an end line; ripgrep
  never interleaves files) and only looks at the begin line of a block to know its file. It keeps
  just the blocks that can still be among the first `offset + head_limit` entries in the asked-for
  order, and parses JSON only for those at the end, so a common word over a large tree costs
  little more than ripgrep itself. Totals come from ripgrep's summary.
- glob stats the files for newest-first order as ripgrep lists them.

Globs (glob's pattern, grep's `glob`) are never given to ripgrep as --glob: that flag overrides
every ignore rule and would list gitignored, hidden or .cursorignore'd files. They go in as the
lowest-precedence --ignore-file instead (see GlobFilters).

GrepArgs.sandbox_policy is accepted but ripgrep is not confined: it only reads, and the sandbox
restricts writes and network, so confining it would cost a few ms per call and change nothing.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import stat
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import pathspec

from agent.v1.common_pb2 import FileNotFound, PermissionDenied, ToolError
from agent.v1.files_pb2 import (
    GlobToolArgs,
    GlobToolResult,
    GlobToolSuccess,
    GrepArgs,
    GrepFileCount,
    GrepFileMatches,
    GrepInvalidPattern,
    GrepResult,
    GrepSuccess,
    LsArgs,
    LsDirectoryTreeNode,
    LsResult,
    LsSuccess,
)
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.paths import PathRefused, private_proc_reason, real_path
from exec_daemon.kernel.runner import Helper, HelperFailed, Output, read_bounded, start_helper
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, Subject, ToolSpec
from exec_daemon.kernel.state import Daemon
from tools.workspace import AgentPaths, CursorIgnore, relative_to_workspace, resolve_path

log = logging.getLogger(__name__)

MAX_LS_ENTRIES = 1000
MAX_GLOB_FILES = 1000
# Entries grep returns when head_limit is not given (lines, files or counts, by output mode).
DEFAULT_GREP_ENTRIES = {"content": 1000, "files_with_matches": 1000, "count": 1000}
# Content mode also stops at this many bytes of line text.
MAX_GREP_CONTENT_BYTES = 512 * 1024
MAX_GREP_LINE_CHARS = 2000
READ_CHUNK = 1 << 20
# How long an abandoned call waits for its reader thread after killing ripgrep.
READER_EXIT_SECONDS = 5.0
PIPE_BYTES = 1 << 20
# A search still running after this long is stopped (ripgrep killed) and answered `timeout`.
SEARCH_TIMEOUT_SECONDS = 120.0
STDERR_LIMIT = 64 * 1024
OUTPUT_MODES = ("content", "files_with_matches", "count")
SORTS = ("path", "modified", "none")
# Files and directories that are never listed (ripgrep already skips .git as hidden VCS data).
ALWAYS_HIDDEN = frozenset({".git"})


# ---------------------------------------------------------------------------------------------
# Running ripgrep


@dataclass
class RgRun:
    returncode: int
    stderr: str


def _big_pipe() -> tuple[int, int]:
    """A pipe with room for PIPE_BYTES, so ripgrep rarely waits for the daemon to read."""
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    with contextlib.suppress(OSError):
        fcntl.fcntl(read_fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    return read_fd, write_fd


class RgProcess:
    """One ripgrep process: stdout consumed in a worker thread, stderr collected, and ripgrep
    killed if the call is abandoned.

    ripgrep writes its output in ~8 KiB pieces. An asyncio reader wakes up for each, and that
    machinery costs more CPU than parsing the output (for a broad `rg --json`, about as much
    as the rest of the daemon's work on it); a plain blocking read loop in a thread does not.
    The 1 MiB pipe lets ripgrep run ahead while the consumer works.
    """

    def __init__(self, rg_path: str, args: list[str], cwd: str, env: dict[str, str]) -> None:
        self._command = [rg_path, "--no-config", *args]
        self._cwd = cwd
        self._env = env
        self._helper: Helper | None = None
        self._stdout_fd = -1
        self._reader: threading.Thread | None = None
        self._stderr_task: asyncio.Task[Output] | None = None

    async def __aenter__(self) -> RgProcess:
        read_fd, write_fd = _big_pipe()
        try:
            self._helper = await start_helper(
                self._command,
                env=self._env,
                cwd=self._cwd,
                stdout=write_fd,
                stderr=asyncio.subprocess.PIPE,
            )
        except HelperFailed:
            os.close(read_fd)
            log.warning("cannot start ripgrep %s", self._command[0], exc_info=True)
            raise CodedError(
                ErrorCode.UNAVAILABLE, f"ripgrep cannot be started (--rg-path {self._command[0]})"
            ) from None
        finally:
            os.close(write_fd)
        self._stdout_fd = read_fd
        self._stderr_task = asyncio.create_task(
            read_bounded(self._helper.process.stderr, STDERR_LIMIT)
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        helper = self._helper
        if helper is not None and helper.returncode is None:
            await helper.stop(grace=0)
        reader = self._reader
        if reader is not None and reader.is_alive():
            # Abandoned mid-read: the thread sees EOF now that ripgrep is gone; close after it.
            await asyncio.to_thread(reader.join, READER_EXIT_SECONDS)
        if self._stdout_fd != -1 and not (reader is not None and reader.is_alive()):
            os.close(self._stdout_fd)
            self._stdout_fd = -1
        if self._stderr_task is not None and not self._stderr_task.done():
            self._stderr_task.cancel()

    async def consume(self, consumer: Callable[[bytes], None]) -> None:
        """Calls `consumer` with every chunk of stdout, in a worker thread, until EOF."""
        fd = self._stdout_fd
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def report(error: BaseException | None) -> None:
            if done.done():
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        def read_all() -> None:
            error: BaseException | None = None
            try:
                while chunk := os.read(fd, READ_CHUNK):
                    consumer(chunk)
            except BaseException as exc:
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting
                loop.call_soon_threadsafe(report, error)

        # A thread of its own (not the shared executor): it starts at once, so it can always be
        # joined before the fd is closed.
        self._reader = threading.Thread(target=read_all, name="rg-reader", daemon=True)
        self._reader.start()
        await done

    async def finish(self) -> RgRun:
        assert self._helper is not None and self._stderr_task is not None
        stderr = await self._stderr_task
        returncode = await self._helper.wait()
        return RgRun(returncode, stderr.text().strip())


def _split_records(buffer: bytearray, chunk: bytes, separator: bytes) -> list[bytes]:
    """Complete records of `buffer + chunk`; the incomplete tail stays in `buffer`."""
    buffer += chunk
    cut = buffer.rfind(separator)
    if cut == -1:
        return []
    records = bytes(buffer[:cut]).split(separator)
    del buffer[: cut + 1]
    return records


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


@dataclass
class SearchRoot:
    """Where a search runs: ripgrep's cwd, the path argument to give it, whether it is ours.

    Searches run on the real path (symlinks, `/proc/self/cwd` resolved by the kernel), so
    .cursorignore applies to what is really searched; `absolute` is the path as the agent named
    it. `outer`: the workspace lies inside the searched folder, so results are filtered by
    .cursorignore one by one (ripgrep applies it only under its cwd).
    """

    cwd: str
    target: str | None  # None = the cwd itself
    in_workspace: bool
    absolute: Path
    real: Path
    outer: bool = False


def _search_root(ctx: CallContext, path: str) -> SearchRoot | PathRefused | None:
    """The root of a search, a refusal (hidden, the daemon's own /proc, a NUL byte), or None
    when it does not exist."""
    workspace = ctx.daemon.workspace
    absolute = resolve_path(workspace, path)
    try:
        real = Path(real_path(absolute, ctx.daemon.service(AgentPaths)))
    except PathRefused as refused:
        return refused
    except OSError:
        return None
    real_workspace = os.path.realpath(workspace)
    for base in (workspace, real_workspace):
        relative = relative_to_workspace(base, real)
        if relative is not None:
            return SearchRoot(base, None if relative == "." else relative, True, absolute, real)
    outer = relative_to_workspace(real, real_workspace) is not None
    return SearchRoot(str(real.parent), str(real), False, absolute, real, outer)


def root_problem(found: PathRefused | None, ctx: CallContext, path: str) -> dict[str, Any]:
    """The result fields (file_not_found, permission_denied or error) of a root that is not."""
    if found is None:
        shown = resolve_path(ctx.daemon.workspace, path)
        return {"file_not_found": FileNotFound(path=str(shown), reason=f"{shown} does not exist")}
    if found.kind == "invalid":
        return {"error": ToolError(code="invalid_argument", message=found.reason)}
    return {"permission_denied": PermissionDenied(path=found.path, reason=found.reason)}


def _outer_rejects(ctx: CallContext, root: SearchRoot, cwd: str) -> Callable[[str], bool] | None:
    """For a search of a folder holding what the read tools refuse (the workspace's ignored
    files, `/proc`'s secret entries, secret declared paths): whether a result is one of them.
    ripgrep does not follow symlinks while walking, so its paths are real below the root."""
    checks: list[Callable[[str], bool]] = []
    ignore = ctx.daemon.service(CursorIgnore)
    if root.outer and ignore.exists():
        checks.append(ignore.is_ignored)
    if _holds(root.real, "/proc"):
        checks.append(lambda path: private_proc_reason(path) is not None)
    secrets = ctx.daemon.service(AgentPaths).declared.secrets()
    if any(_holds(root.real, secret) for secret in secrets):
        checks.append(lambda path: any(_holds(secret, path) for secret in secrets))
    if not checks:
        return None
    return lambda path: any(check(os.path.join(cwd, path)) for check in checks)


def _secret_links(ctx: CallContext, cwd: str) -> Callable[[str], bool] | None:
    """For a grep: whether a result is a hard link to a secret file (the token file). Its path
    says nothing, its content would; one lstat per file with a match."""
    declared = ctx.daemon.service(AgentPaths).declared
    if not declared.secrets():
        return None

    def linked(path: str) -> bool:
        try:
            info = os.lstat(os.path.join(cwd, path))
        except OSError:
            return False
        return declared.secret_file_reason(info) is not None

    return linked


def _holds(folder: Path | str, path: str) -> bool:
    return relative_to_workspace(folder, path) is not None


def _either(
    first: Callable[[str], bool] | None, second: Callable[[str], bool] | None
) -> Callable[[str], bool] | None:
    if first is None or second is None:
        return first or second
    return lambda path: first(path) or second(path)


def _ignore_args(ctx: CallContext, root: SearchRoot) -> list[str]:
    return ctx.daemon.service(CursorIgnore).rg_args() if root.in_workspace else []


class GlobFilters:
    """Ignore files that let through only what a glob matches, for ripgrep's --ignore-file.

    ripgrep's --glob overrides every ignore rule (.gitignore, .cursorignore, hidden files), so
    a glob would reveal ignored files. Given as an --ignore-file ("ignore everything except
    directories and what the glob matches"), it filters only what the real ignore rules let
    through: ripgrep consults such a file only for paths no other ignore rule decided.
    Every filter also drops `.git/` (searches run with --hidden): cheaper than a `--glob !.git`
    override, which ripgrep checks on every path. One small file per distinct glob (and one
    for "no glob"), kept while the daemon runs.
    """

    MAX_FILES = 1000

    def __init__(self, daemon: Daemon) -> None:
        self._directory: tempfile.TemporaryDirectory[str] | None = None
        self._paths: dict[str | None, str] = {}

    @staticmethod
    def lines(glob: str | None) -> list[str]:
        keep_only = ["*", "!*/", "!" + glob] if glob else []
        return [*keep_only, ".git/"]

    def path_for(self, glob: str | None) -> str:
        path = self._paths.get(glob)
        if path is not None:
            return path
        if self._directory is None or len(self._paths) >= self.MAX_FILES:
            self.aclose()
            self._directory = tempfile.TemporaryDirectory(prefix="exec-daemon-globs-")
        name = hashlib.sha256((glob or "").encode()).hexdigest()[:32]
        path = os.path.join(self._directory.name, name)
        Path(path).write_text("\n".join(self.lines(glob)) + "\n")
        self._paths[glob] = path
        return path

    def spec(self, glob: str) -> pathspec.GitIgnoreSpec:
        return pathspec.GitIgnoreSpec.from_lines(self.lines(glob))

    def aclose(self) -> None:
        if self._directory is not None:
            self._directory.cleanup()
        self._directory = None
        self._paths.clear()


def _glob_args(ctx: CallContext, root: SearchRoot, glob: str | None) -> list[str]:
    """--ignore-file arguments: the glob filter first (lowest precedence), then .cursorignore."""
    filters = ["--ignore-file", ctx.daemon.service(GlobFilters).path_for(glob)]
    return [*filters, *_ignore_args(ctx, root)]


def _glob_rejects(
    ctx: CallContext, root: SearchRoot, glob: str | None
) -> Callable[[str], bool] | None:
    """A check for the one case ripgrep's filtering misses (None when it cannot happen): a `!`
    exception in .cursorignore outranks the glob filter, so a file it re-allows shows up even
    if the glob does not match it."""
    if not glob or not (root.in_workspace and ctx.daemon.service(CursorIgnore).has_exceptions()):
        return None
    spec = ctx.daemon.service(GlobFilters).spec(glob)
    return lambda path: bool(spec.match_file(path))


def _timeout_error(tool: str) -> ToolError:
    return ToolError(
        code="timeout",
        message=f"{tool} did not finish within {SEARCH_TIMEOUT_SECONDS:.0f} s; "
        "search a narrower path or a more specific pattern",
    )


def _glob_error(glob: str, stderr: str) -> str | None:
    at = stderr.find("error parsing glob")
    if at == -1:
        return None
    detail = stderr[at:].split("\n", 1)[0].split("': ", 1)[-1]
    return f"invalid glob {glob!r}: {detail}"


# ---------------------------------------------------------------------------------------------
# Grep


class _Selection:
    """Keeps the fewest items that still hold the first `needed` entries in key order.

    Once a prune has shown which key is the last one that can still be shown (`cutoff`), items
    beyond it are turned away without looking at them (`wants`).
    """

    def __init__(self, needed: int) -> None:
        self.needed = needed
        self.items: list[tuple[Any, int, Any]] = []  # (key, entries, payload)
        self.cutoff: Any = None
        # Entries were turned away or pruned: there is more than what is kept.
        self.dropped = False
        self._kept_entries = 0

    def wants(self, key: Any) -> bool:
        if self.cutoff is None or key < self.cutoff:
            return True
        self.dropped = True
        return False

    def add(self, key: Any, entries: int, payload: Any) -> None:
        self.items.append((key, entries, payload))
        self._kept_entries += entries
        if self._kept_entries > 2 * self.needed + 1000 and len(self.items) > 64:
            self._prune()

    def _prune(self) -> None:
        self.items.sort(key=itemgetter(0))
        kept = 0
        for index, (_, entries, _) in enumerate(self.items):
            kept += entries
            if kept >= self.needed:
                self.dropped = self.dropped or index + 1 < len(self.items)
                del self.items[index + 1 :]
                self.cutoff = self.items[-1][0]
                break
        self._kept_entries = sum(entries for _, entries, _ in self.items)

    def ordered(self) -> list[tuple[Any, int, Any]]:
        self._prune()
        return self.items

    def kept_entries(self) -> int:
        return self._kept_entries


@dataclass
class GrepOptions:
    mode: str
    sort: str
    ascending: bool
    offset: int
    limit: int


class _BlockReader:
    """Cuts `rg --json` output into per-file blocks without parsing their match lines.

    Every message is one line and begins with its type, and JSON strings escape quotes, so a
    line starting with {"type":"begin" or {"type":"end" can only be a block's first or last.
    """

    def __init__(self, on_block: Callable[[str, bytes], None]) -> None:
        self.on_block = on_block
        self.summary: dict[str, Any] = {}
        self._carry = b""  # an incomplete last line
        self._parts: list[bytes] | None = None  # the block being read

    def feed(self, chunk: bytes) -> None:
        last_newline = chunk.rfind(b"\n")
        if last_newline == -1:
            self._carry += chunk
            return
        region = b"".join((self._carry, memoryview(chunk)[: last_newline + 1]))
        self._carry = chunk[last_newline + 1 :]
        position = 0
        if self._parts is not None:
            # The block that the previous chunk left open.
            end = region.find(_END_MARK)
            if end == -1:
                self._parts.append(region)
                return
            position = region.index(b"\n", end) + 1
            self._parts.append(region[:position])
            self._emit(b"".join(self._parts))
            self._parts = None
        while position < len(region):
            begin = region.find(_BEGIN_MARK, position)
            if begin == -1:
                self._outside(region[position:])
                return
            if begin != position:
                self._outside(region[position:begin])
            end = region.find(_END_MARK, begin)
            if end == -1:
                self._parts = [region[begin:]]
                return
            position = region.index(b"\n", end) + 1
            self._emit(region[begin:position])

    def _emit(self, block: bytes) -> None:
        self.on_block(_begin_path(block[: block.index(b"\n")]), block)

    def _outside(self, data: bytes) -> None:
        for line in data.splitlines():
            if b'"type":"summary"' in line:
                with contextlib.suppress(ValueError, KeyError):
                    self.summary = json.loads(line)["data"]["stats"]

    def finish(self) -> None:
        self.feed(b"\n")


_BEGIN_MARK = b'{"type":"begin"'
_END_MARK = b'{"type":"end"'
_BEGIN_PREFIX = b'{"type":"begin","data":{"path":{"text":"'
_BEGIN_SUFFIX = b'"}}}'


_BEGIN_PATH = slice(len(_BEGIN_PREFIX), -len(_BEGIN_SUFFIX))


def _matched_lines(block: bytes) -> int:
    """matched_lines of a block's end message (its last line)."""
    last = block.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    with contextlib.suppress(ValueError, KeyError, TypeError):
        return int(json.loads(last)["data"]["stats"]["matched_lines"])
    return 0


def _begin_path(line: bytes) -> str:
    """The file of a begin line; plain paths are sliced out, escaped ones go through json."""
    if line.startswith(_BEGIN_PREFIX) and line.endswith(_BEGIN_SUFFIX) and b"\\" not in line:
        return line[_BEGIN_PATH].decode("utf-8", "replace")
    return _json_text(json.loads(line)["data"]["path"])


def _json_text(value: dict[str, str]) -> str:
    if "text" in value:
        return value["text"]
    return _decode(base64.b64decode(value.get("bytes", "")))


def _cut(text: str) -> str:
    text = text.removesuffix("\n").removesuffix("\r")
    if len(text) <= MAX_GREP_LINE_CHARS:
        return text
    return text[:MAX_GREP_LINE_CHARS] + f" … [line cut: {len(text) - MAX_GREP_LINE_CHARS} more]"


def _mtime(cwd: str, path: str) -> float:
    try:
        return os.stat(os.path.join(cwd, path)).st_mtime
    except OSError:
        return 0.0


def _sort_key(options: GrepOptions, cwd: str, path: str, arrival: int) -> Any:
    if options.sort == "modified":
        mtime = _mtime(cwd, path)
        return (mtime if options.ascending else -mtime, path)
    if options.sort == "none":
        return arrival
    return path


def _rg_grep_args(args: GrepArgs, mode: str) -> list[str]:
    flags = ["--hidden"]
    if args.case_insensitive:
        flags.append("--ignore-case")
    if args.multiline:
        flags += ["--multiline", "--multiline-dotall"]
    if args.type:
        flags += ["--type", args.type]
    if mode == "content":
        flags.append("--json")
        context = args.context if args.HasField("context") else None
        before = args.context_before if args.HasField("context_before") else context
        after = args.context_after if args.HasField("context_after") else context
        if before:
            flags += ["--before-context", str(before)]
        if after:
            flags += ["--after-context", str(after)]
    elif mode == "files_with_matches":
        flags += ["--files-with-matches", "--null"]
    else:
        flags += ["--count", "--with-filename", "--null"]
    return [*flags, "--regexp", args.pattern]


def _rg_failure(args: GrepArgs, run: RgRun) -> GrepResult | None:
    message = run.stderr
    if "regex parse error" in message or "error parsing regex" in message:
        return GrepResult(invalid_pattern=GrepInvalidPattern(pattern=args.pattern, reason=message))
    if "unrecognized file type" in message:
        return GrepResult(
            error=ToolError(
                code="invalid_argument",
                message=f"unknown file type {args.type!r} (ripgrep's --type-list shows them)",
            )
        )
    glob_error = _glob_error(args.glob, message)
    if glob_error is not None:
        return GrepResult(error=ToolError(code="invalid_argument", message=glob_error))
    return None


def _content_result(selection: _Selection, options: GrepOptions, success: GrepSuccess) -> None:
    skip, left, used = options.offset, options.limit, 0
    for _, entries, block in selection.ordered():
        if skip >= entries:
            skip -= entries
            continue
        if left <= 0 or used > MAX_GREP_CONTENT_BYTES:
            break
        lines = block.split(b"\n")[1 + skip : 1 + entries]
        skip = 0
        file_matches: GrepFileMatches | None = None
        for raw in lines:
            if left <= 0 or used > MAX_GREP_CONTENT_BYTES:
                break
            message = json.loads(raw)
            data = message["data"]
            if file_matches is None:
                file_matches = success.matches.add(file=_json_text(data["path"]))
            text = _cut(_json_text(data["lines"]))
            used += len(text)
            left -= 1
            file_matches.lines.add(
                line_number=data.get("line_number") or 0,
                content=text,
                is_context=message["type"] == "context",
            )
    shown = options.limit - left
    success.truncated = selection.dropped or options.offset + shown < selection.kept_entries()


async def _grep_content(
    rg: RgProcess,
    options: GrepOptions,
    cwd: str,
    rejects: Callable[[str], bool] | None,
    success: GrepSuccess,
) -> None:
    selection = _Selection(options.offset + options.limit)
    arrivals = 0
    rejected_files = rejected_lines = 0

    def on_block(path: str, block: bytes) -> None:
        nonlocal arrivals, rejected_files, rejected_lines
        if rejects is not None and rejects(path):
            # Left out of the totals too: counts must not tell about hidden files.
            rejected_files += 1
            rejected_lines += _matched_lines(block)
            return
        arrivals += 1
        key = _sort_key(options, cwd, path, arrivals)
        if selection.wants(key):
            # A block is its begin line, one line per match or context line, its end line.
            selection.add(key, block.count(b"\n") - 2, block)

    reader = _BlockReader(on_block)
    await rg.consume(reader.feed)
    reader.finish()
    _content_result(selection, options, success)
    stats = reader.summary
    success.total_matches = max(int(stats.get("matched_lines", 0)) - rejected_lines, 0)
    success.total_files = max(int(stats.get("searches_with_match", 0)) - rejected_files, 0)


async def _grep_listing(
    rg: RgProcess,
    options: GrepOptions,
    cwd: str,
    rejects: Callable[[str], bool] | None,
    success: GrepSuccess,
) -> None:
    buffer = bytearray()
    entries: list[tuple[str, int]] = []

    def collect(chunk: bytes) -> None:
        if options.mode == "count":
            for record in _split_records(buffer, chunk, b"\n"):
                path, _, count = record.rpartition(b"\x00")
                entries.append((_decode(path), int(count or 0)))
        else:
            entries.extend(
                (_decode(record), 1) for record in _split_records(buffer, chunk, b"\x00")
            )

    await rg.consume(collect)
    if rejects is not None:
        entries = [entry for entry in entries if not rejects(entry[0])]
    if options.sort == "none":
        ordered = entries
    else:
        keys = await asyncio.to_thread(
            lambda: [
                _sort_key(options, cwd, path, index) for index, (path, _) in enumerate(entries)
            ]
        )
        ordered = [entry for _, entry in sorted(zip(keys, entries, strict=True))]
    chosen = ordered[options.offset : options.offset + options.limit]
    success.truncated = len(ordered) > options.offset + options.limit
    success.total_files = len(entries)
    if options.mode == "count":
        success.counts.extend(GrepFileCount(file=path, count=count) for path, count in chosen)
        success.total_matches = sum(count for _, count in entries)
    else:
        success.files.extend(path for path, _ in chosen)


def _grep_options(args: GrepArgs) -> GrepOptions | GrepResult:
    mode = args.output_mode or "content"
    sort = args.sort or "path"
    if mode not in OUTPUT_MODES:
        return GrepResult(
            error=ToolError(
                code="invalid_argument",
                message=f"output_mode must be one of {', '.join(OUTPUT_MODES)}",
            )
        )
    if sort not in SORTS:
        return GrepResult(
            error=ToolError(
                code="invalid_argument", message=f"sort must be one of {', '.join(SORTS)}"
            )
        )
    limit = args.head_limit or DEFAULT_GREP_ENTRIES[mode]
    # Paths sort a to z; modification times newest first unless sort_ascending.
    ascending = args.sort_ascending if sort == "modified" else True
    return GrepOptions(mode, sort, ascending, args.offset, limit)


async def grep(args: GrepArgs, ctx: CallContext) -> GrepResult:
    if not args.pattern:
        return GrepResult(error=ToolError(code="invalid_argument", message="pattern is empty"))
    options = _grep_options(args)
    if isinstance(options, GrepResult):
        return options
    root = _search_root(ctx, args.path)
    if not isinstance(root, SearchRoot):
        return GrepResult(**root_problem(root, ctx, args.path))
    glob = args.glob.strip() or None
    rg_args = [*_glob_args(ctx, root, glob), *_rg_grep_args(args, options.mode), "--"]
    if root.target is not None:
        rg_args.append(root.target)
    rejects = _either(_glob_rejects(ctx, root, glob), _outer_rejects(ctx, root, root.cwd))
    rejects = _either(rejects, _secret_links(ctx, root.cwd))
    success = GrepSuccess(pattern=args.pattern, path=str(root.absolute), output_mode=options.mode)
    try:
        async with (
            asyncio.timeout(SEARCH_TIMEOUT_SECONDS),
            RgProcess(
                ctx.daemon.config.rg_path, rg_args, root.cwd, ctx.daemon.env.snapshot()
            ) as rg,
        ):
            if options.mode == "content":
                await _grep_content(rg, options, root.cwd, rejects, success)
            else:
                await _grep_listing(rg, options, root.cwd, rejects, success)
            run = await rg.finish()
    except TimeoutError:
        return GrepResult(error=_timeout_error("grep"))
    failure = _rg_failure(args, run) if run.returncode != 0 and not success.total_files else None
    if failure is not None:
        return failure
    if run.returncode == 2 and not success.total_files:
        log.warning("rg failed (%d): %s", run.returncode, run.stderr[:500])
        return GrepResult(
            error=ToolError(code="search_failed", message=f"ripgrep failed: {run.stderr[:2000]}")
        )
    return GrepResult(success=success)


# ---------------------------------------------------------------------------------------------
# Glob


GREP = ToolSpec(
    "grep_tool_call",
    grep,
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("Grep"),
    subject=lambda args: Subject(paths_read=(args.path,)),
)

_GLOB_SPECIAL = str.maketrans({char: f"\\{char}" for char in "*?[]{}\\"})


def glob_pattern_for(pattern: str, prefix: str | None) -> str:
    """The gitignore-style glob, anchored at ripgrep's cwd, for a glob relative to `prefix`.

    Patterns get `**/` prepended unless they start with `**/` or `/` (anchored at the target).
    """
    if pattern.startswith("/"):
        anchored = pattern.lstrip("/")
    elif pattern.startswith("**/"):
        anchored = pattern
    else:
        anchored = "**/" + pattern
    if prefix is None:
        return "/" + anchored
    return "/" + prefix.translate(_GLOB_SPECIAL) + "/" + anchored


def _split_absolute_glob(pattern: str) -> tuple[str, str] | None:
    """An absolute pattern `/dir/sub/**/*.py` as (existing directory, rest); None if not one."""
    parts = pattern.split("/")
    literal: list[str] = []
    for part in parts[1:]:
        if any(char in part for char in "*?[{"):
            break
        literal.append(part)
    for cut in range(len(literal), 0, -1):
        directory = "/" + "/".join(literal[:cut])
        if os.path.isdir(directory):
            return directory, "/".join(parts[cut + 1 :])
    return None


def _stat_batch(cwd: str, names: list[bytes]) -> list[tuple[int, bytes]]:
    """(mtime, name) of each name relative to `cwd` (0 for a file that is gone)."""
    prefix = os.fsencode(cwd) + b"/"
    stamped = []
    for name in names:
        try:
            stamped.append((os.stat(prefix + name).st_mtime_ns, name))
        except OSError:
            stamped.append((0, name))
    return stamped


async def glob(args: GlobToolArgs, ctx: CallContext) -> GlobToolResult:
    pattern = args.glob_pattern.strip()
    if not pattern:
        return GlobToolResult(
            error=ToolError(code="invalid_argument", message="glob_pattern is empty")
        )
    target = args.target_directory
    if pattern.startswith("/") and (split := _split_absolute_glob(pattern)) is not None:
        target, pattern = split[0], "/" + split[1]
    root = _search_root(ctx, target)
    if not isinstance(root, SearchRoot):
        return GlobToolResult(**root_problem(root, ctx, target))
    if not root.real.is_dir():
        return GlobToolResult(
            error=ToolError(code="not_a_directory", message=f"{root.absolute} is not a directory")
        )
    if root.in_workspace:
        cwd, glob_filter = root.cwd, glob_pattern_for(pattern, root.target)
    else:
        cwd, glob_filter = str(root.real), glob_pattern_for(pattern, None)
    rg_args = [*_glob_args(ctx, root, glob_filter), "--files", "--hidden", "--null"]
    if root.in_workspace and root.target is not None:
        rg_args += ["--", root.target]
    rejects = _either(_glob_rejects(ctx, root, glob_filter), _outer_rejects(ctx, root, cwd))
    buffer = bytearray()
    stamped: list[tuple[int, bytes]] = []

    def stat_names(chunk: bytes) -> None:
        # While this thread stats a batch, ripgrep keeps listing into the pipe.
        stamped.extend(_stat_batch(cwd, _split_records(buffer, chunk, b"\x00")))

    try:
        async with (
            asyncio.timeout(SEARCH_TIMEOUT_SECONDS),
            RgProcess(ctx.daemon.config.rg_path, rg_args, cwd, ctx.daemon.env.snapshot()) as rg,
        ):
            await rg.consume(stat_names)
            run = await rg.finish()
    except TimeoutError:
        return GlobToolResult(error=_timeout_error("glob"))
    glob_error = _glob_error(args.glob_pattern, run.stderr) if not stamped else None
    if glob_error is not None:
        return GlobToolResult(error=ToolError(code="invalid_argument", message=glob_error))
    if rejects is not None:
        stamped = [entry for entry in stamped if not rejects(_decode(entry[1]))]
    # Newest first, then by path: two stable C-keyed sorts are far cheaper than a tuple key.
    stamped.sort(key=itemgetter(1))
    stamped.sort(key=itemgetter(0), reverse=True)
    shown_root = "" if cwd == root.cwd else cwd + "/"
    files = [shown_root + _decode(name) for _, name in stamped[:MAX_GLOB_FILES]]
    return GlobToolResult(
        success=GlobToolSuccess(
            pattern=args.glob_pattern,
            path=str(root.absolute),
            files=files,
            total_files=len(stamped),
            truncated=len(stamped) > MAX_GLOB_FILES,
        )
    )


# ---------------------------------------------------------------------------------------------
# Ls


GLOB = ToolSpec(
    "glob_tool_call",
    glob,
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("Glob"),
    subject=lambda args: Subject(paths_read=(args.target_directory,)),
)


@dataclass
class _LsWalk:
    """One listing: breadth-first below `root` until MAX_LS_ENTRIES entries are shown.

    Its cost is what the listed folders hold: each is read with one scandir, and only shown
    files are stat'ed; nothing outside `root` is read."""

    root: Path
    ignore: pathspec.GitIgnoreSpec | None
    cursorignored: Callable[[str, bool], bool] | None  # CursorIgnore.matcher()
    budget: int = MAX_LS_ENTRIES
    files: int = 0
    dirs: int = 0
    truncated: bool = False

    def __post_init__(self) -> None:
        self._prefix_length = len(str(self.root).rstrip("/") + "/")

    def hidden(self, name: str, path: str, is_dir: bool) -> bool:
        if name in ALWAYS_HIDDEN:
            return True
        if self.cursorignored is not None and self.cursorignored(path, is_dir):
            return True
        if self.ignore is None:
            return False
        relative = path[self._prefix_length :]  # scandir's paths extend the root's own
        return bool(self.ignore.match_file(relative + "/" if is_dir else relative))

    def list_dir(self, node: LsDirectoryTreeNode) -> list[LsDirectoryTreeNode]:
        """Fills `node` with its entries (within the budget); returns its subdirectory nodes."""
        directory = Path(node.abs_path)
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            return []
        visible = []
        for entry in entries:
            is_dir = entry.is_dir(follow_symlinks=False)
            if not self.hidden(entry.name, entry.path, is_dir):
                visible.append((entry, is_dir))
        shown = visible[: self.budget]
        node.omitted_entries = len(visible) - len(shown)
        if node.omitted_entries:
            self.truncated = True
        self.budget -= len(shown)
        children = []
        for entry, is_dir in shown:
            if is_dir:
                self.dirs += 1
                children.append(node.children_dirs.add(abs_path=entry.path))
                continue
            self.files += 1
            try:
                info = entry.stat(follow_symlinks=True)
                regular = stat.S_ISREG(info.st_mode)
                size, modified_ms = (info.st_size if regular else 0), int(info.st_mtime * 1000)
            except OSError:
                size, modified_ms = 0, 0
            node.children_files.add(
                name=entry.name,
                size=size,
                modified_ms=modified_ms,
                is_symlink=entry.is_symlink(),
            )
        return children

    def walk(self) -> LsSuccess:
        root_node = LsDirectoryTreeNode(abs_path=str(self.root))
        level = [root_node]
        while level:
            next_level: list[LsDirectoryTreeNode] = []
            for node in level:
                if self.budget <= 0:
                    node.omitted_entries = _count_entries(Path(node.abs_path))
                    self.truncated = self.truncated or node.omitted_entries > 0
                    continue
                next_level.extend(self.list_dir(node))
            level = next_level
        return LsSuccess(
            root=root_node, total_files=self.files, total_dirs=self.dirs, truncated=self.truncated
        )


def _count_entries(directory: Path) -> int:
    try:
        with os.scandir(directory) as scan:
            return sum(1 for _ in scan)
    except OSError:
        return 0


async def ls(args: LsArgs, ctx: CallContext) -> LsResult:
    found = _search_root(ctx, args.path)
    if not isinstance(found, SearchRoot):
        return LsResult(**root_problem(found, ctx, args.path))
    # The walk runs in the real folder: every entry it checks against .cursorignore is real.
    root = found.real
    if not root.is_dir():
        return LsResult(
            error=ToolError(code="not_a_directory", message=f"{root} is not a directory")
        )
    cursorignore = ctx.daemon.service(CursorIgnore)
    if not os.access(root, os.R_OK | os.X_OK):
        return LsResult(
            permission_denied=PermissionDenied(
                path=str(root), reason=f"no permission to list {root}"
            )
        )
    patterns = [pattern for pattern in args.ignore if pattern.strip()]
    spec = pathspec.GitIgnoreSpec.from_lines(patterns) if patterns else None
    walk = _LsWalk(root, spec, cursorignore.matcher())
    return LsResult(success=await asyncio.to_thread(walk.walk))


LS = ToolSpec(
    "ls_tool_call",
    ls,
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("LS"),
    subject=lambda args: Subject(paths_read=(args.path,)),
)
