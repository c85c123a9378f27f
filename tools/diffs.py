"""Unified diffs: made for edit results, and applied by apply_agent_diff_tool_call.

Making one: only the changed window of the file goes through difflib (the common prefix and
suffix are found with memcmp-speed slice compares first), so a one-line edit of a huge file costs
little. Applying one: every hunk of every file must apply (context matched exactly, first where
the header says, then the nearest place; header counts are not trusted, agents get them wrong)
before anything is written; then every file is written atomically, and the files already
replaced are put back if a later one fails. What the files were is first recorded (fsynced) in
the daemon's own folder, so a daemon killed midway has its successor put them back: all or
none, across a kill -9 too.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import logging
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agent.v1.common_pb2 import PermissionDenied, ToolError
from agent.v1.files_pb2 import (
    AppliedFile,
    ApplyAgentDiffArgs,
    ApplyAgentDiffResult,
    ApplyAgentDiffSuccess,
    DiffDoesNotApply,
)
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.paths import (
    PathRefused,
    PathRules,
    check_writable,
    delete_checked,
    ensure_daemon_folder,
    open_target,
    read_checked,
)
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, Subject, ToolSpec
from tools import reports
from tools.language_servers import LanguageServers
from tools.workspace import atomic_write, display_path, resolve_path, write_failure, write_rules

log = logging.getLogger(__name__)

NO_NEWLINE = "\\ No newline at end of file"
# Beyond this many lines in the changed window the diff is not computed (counts still are).
MAX_DIFF_WINDOW_LINES = 50_000
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class DiffStats:
    diff: str
    lines_added: int
    lines_removed: int


def line_count(text: str) -> int:
    """Lines in `text`; a last line without a newline counts."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _common_prefix_chars(a: str, b: str) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _common_suffix_chars(a: str, b: str, limit: int) -> int:
    low, high = 0, limit
    while low < high:
        mid = (low + high + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            low = mid
        else:
            high = mid - 1
    return low


def _with_no_newline_markers(lines: Iterator[str]) -> Iterator[str]:
    for line in lines:
        if line.endswith("\n"):
            yield line
        else:
            yield line + "\n"
            yield NO_NEWLINE + "\n"


def _aligned_suffix(old: str, new: str, prefix: int) -> int:
    """The common suffix of whole lines (in both texts) that does not overlap the prefix."""
    suffix = _common_suffix_chars(old, new, min(len(old), len(new)) - prefix)
    old_end, new_end = len(old) - suffix, len(new) - suffix
    at_line_start = (old_end == prefix or old[old_end - 1] == "\n") and (
        new_end == prefix or new[new_end - 1] == "\n"
    )
    if suffix == 0 or at_line_start:
        return suffix
    # The suffix text is the same in both: cutting just after one of its newlines aligns both.
    newline = old.find("\n", old_end, len(old))
    return 0 if newline == -1 else len(old) - (newline + 1)


def _context_start(text: str, at: int, context: int) -> int:
    for _ in range(context):
        if at == 0:
            break
        at = text.rfind("\n", 0, at - 1) + 1
    return at


def _context_end(text: str, at: int, context: int) -> int:
    for _ in range(context):
        if at >= len(text):
            break
        newline = text.find("\n", at)
        at = len(text) if newline == -1 else newline + 1
    return at


def unified_diff(old: str, new: str, name: str, context: int = 3) -> DiffStats:
    """The unified diff from `old` to `new` (git-style a/ b/ names) with its line counts."""
    if old == new:
        return DiffStats("", 0, 0)
    # Whole lines only: back up to the start of the line the first difference is on.
    prefix = old.rfind("\n", 0, _common_prefix_chars(old, new)) + 1
    suffix = _aligned_suffix(old, new, prefix)
    old_end, new_end = len(old) - suffix, len(new) - suffix
    window_start = _context_start(old, prefix, context)
    window_end = _context_end(old, old_end, context)
    before = old[window_start:prefix]
    after = old[old_end:window_end]
    old_window = (before + old[prefix:old_end] + after).splitlines(keepends=True)
    new_window = (before + new[prefix:new_end] + after).splitlines(keepends=True)
    if len(old_window) + len(new_window) > MAX_DIFF_WINDOW_LINES:
        return DiffStats("", line_count(new[prefix:new_end]), line_count(old[prefix:old_end]))
    shift = old.count("\n", 0, window_start)
    lines = difflib.unified_diff(
        old_window, new_window, f"a/{name}", f"b/{name}", n=context, lineterm="\n"
    )
    out: list[str] = []
    added = removed = 0
    for line in _with_no_newline_markers(lines):
        match = _HUNK_HEADER.match(line)
        if match:
            line = _shifted_header(match, shift) + line[match.end() :]
        elif line.startswith("+") and not line.startswith("+++ "):
            added += 1
        elif line.startswith("-") and not line.startswith("--- "):
            removed += 1
        out.append(line)
    return DiffStats(_displayable("".join(out)), added, removed)


def _displayable(text: str) -> str:
    """Text read with surrogateescape (undecodable bytes) made valid for a protobuf string."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text


def _shifted_header(match: re.Match[str], shift: int) -> str:
    old_start, old_count, new_start, new_count = match.groups()
    old_part = f"-{int(old_start) + shift}" + (f",{old_count}" if old_count is not None else "")
    new_part = f"+{int(new_start) + shift}" + (f",{new_count}" if new_count is not None else "")
    return f"@@ {old_part} {new_part} @@"


def replace_text(
    text: str, old: str, new: str, replace_all: bool
) -> tuple[str, int] | tuple[None, int]:
    """(new text, replacements), or (None, matches) when there is not exactly one match.

    A file with CRLF line ends also matches an old_string written with LF ones.
    """
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
    if count == 0 or (count > 1 and not replace_all):
        return None, count
    return text.replace(old, new) if replace_all else text.replace(old, new, 1), count


# ---------------------------------------------------------------------------------------------
# Parsing and applying


class DiffError(Exception):
    def __init__(self, path: str, reason: str, hunk_index: int = 0) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason
        self.hunk_index = hunk_index


@dataclass
class Hunk:
    old_start: int  # 1-based, as the header says (for a pure insertion: the line it follows)
    old_count: int
    new_count: int
    lines: list[str] = field(default_factory=list)  # " x", "-x", "+x" without line ends
    new_no_newline: bool = False

    def old_lines(self) -> list[str]:
        return [line[1:] for line in self.lines if line[:1] in (" ", "-")]

    def new_lines(self) -> list[str]:
        return [line[1:] for line in self.lines if line[:1] in (" ", "+")]

    def complete(self) -> bool:
        """All the lines the header announced are there (agents' counts may still be wrong)."""
        olds = sum(1 for line in self.lines if line[:1] in (" ", "-"))
        news = sum(1 for line in self.lines if line[:1] in (" ", "+"))
        return olds >= self.old_count and news >= self.new_count


@dataclass
class FilePatch:
    old_path: str | None  # None = /dev/null (a new file)
    new_path: str | None  # None = /dev/null (a deleted file)
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""


def _strip_prefix(name: str) -> str | None:
    name = name.split("\t", 1)[0].strip()
    if name.startswith('"') and name.endswith('"') and len(name) >= 2:
        name = name[1:-1]
    if name == "/dev/null":
        return None
    if name.startswith(("a/", "b/")):
        return name[2:]
    return name


def _is_file_header(lines: list[str], index: int, hunk: Hunk | None) -> bool:
    if not (lines[index].startswith("--- ") and index + 1 < len(lines)):
        return False
    if not lines[index + 1].startswith("+++ "):
        return False
    # "--- x" could also be the removal of a line "-- x": it is a header when the hunk is done
    # or a hunk header follows.
    follows_hunk = index + 2 < len(lines) and lines[index + 2].startswith("@@")
    return hunk is None or hunk.complete() or follows_hunk


def parse_unified_diff(text: str) -> list[FilePatch]:
    """The file patches of a unified diff (git or plain); header line counts are only hints."""
    patches: list[FilePatch] = []
    current: FilePatch | None = None
    hunk: Hunk | None = None
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if _is_file_header(lines, index, hunk):
            current = FilePatch(_strip_prefix(line[4:]), _strip_prefix(lines[index + 1][4:]))
            patches.append(current)
            hunk = None
            index += 2
            continue
        if line.startswith("@@"):
            if current is None:
                raise DiffError("", "a hunk comes before any ---/+++ file header")
            match = _HUNK_HEADER.match(line)
            if match is None:
                raise DiffError(current.path, f"malformed hunk header: {line[:80]}")
            old_count, new_count = match.group(2), match.group(4)
            hunk = Hunk(
                old_start=int(match.group(1)),
                old_count=1 if old_count is None else int(old_count),
                new_count=1 if new_count is None else int(new_count),
            )
            current.hunks.append(hunk)
        elif hunk is not None and line.startswith(("+", "-", " ")):
            hunk.lines.append(line)
        elif hunk is not None and line == "" and not hunk.complete():
            # Some tools strip the single space of an empty context line.
            hunk.lines.append(" ")
        elif hunk is not None and line.startswith("\\"):
            if hunk.lines and hunk.lines[-1][:1] in (" ", "+"):
                hunk.new_no_newline = True
        else:
            # git's "diff --git", "index", mode lines, and free text between files.
            hunk = None
        index += 1
    return [patch for patch in patches if patch.hunks or patch.new_path is None]


def _find_hunk(lines: list[str], old: list[str], hint: int, floor: int) -> int:
    """Where `old` occurs in `lines` at or after `floor`, nearest to `hint`; -1 if nowhere."""
    last_start = len(lines) - len(old)
    hint = min(max(hint, floor), max(last_start, floor))
    if not old:
        return hint
    for distance in range(max(last_start - floor, 0) + 1):
        for start in (hint - distance, hint + distance) if distance else (hint,):
            if floor <= start <= last_start and lines[start : start + len(old)] == old:
                return start
    return -1


def apply_hunks(original: str, patch: FilePatch) -> str:
    """The new text of one file, or DiffError naming the hunk that does not apply."""
    lines = original.split("\n") if original else []
    ends_with_newline = original.endswith("\n")
    if ends_with_newline:
        lines.pop()
    result: list[str] = []
    cursor = 0
    drift = 0  # how far the file's lines are from where the headers said
    for number, hunk in enumerate(patch.hunks, start=1):
        old = hunk.old_lines()
        said = hunk.old_start if not old else hunk.old_start - 1
        at = _find_hunk(lines, old, said + drift, cursor)
        if at == -1:
            where = f" after line {cursor}" if cursor else ""
            raise DiffError(
                patch.path,
                f"hunk {number} does not apply: its context and removed lines are not in the "
                f"file{where}",
                number,
            )
        result.extend(lines[cursor:at])
        result.extend(hunk.new_lines())
        cursor = at + len(old)
        drift = at - said
        if cursor == len(lines):
            ends_with_newline = not hunk.new_no_newline
    result.extend(lines[cursor:])
    text = "\n".join(result)
    return text + "\n" if ends_with_newline and result else text


@dataclass
class PlannedChange:
    path: Path
    old_text: str | None  # None: the file does not exist yet
    new_text: str | None  # None: the file is deleted
    stats: DiffStats


# Sources larger than this are not patched (they are loaded whole).
MAX_SOURCE_BYTES = 256 * 1024 * 1024


def _read_source(path: Path, shown: str, rules: PathRules) -> str:
    try:
        data, _ = read_checked(path, rules, MAX_SOURCE_BYTES + 1)
    except PathRefused as refused:
        raise DiffError(shown, refused.reason) from None
    except FileNotFoundError:
        raise DiffError(shown, f"{shown} does not exist") from None
    except IsADirectoryError:
        raise DiffError(shown, f"{shown} is a directory") from None
    except OSError:
        raise DiffError(shown, f"{shown} cannot be read") from None
    if len(data) > MAX_SOURCE_BYTES:
        raise DiffError(shown, f"{shown} is larger than {MAX_SOURCE_BYTES} bytes")
    return data.decode("utf-8", "surrogateescape")


def plan_change(patch: FilePatch, base: Path, rules: PathRules) -> PlannedChange:
    """One file's new content, computed in memory; DiffError if a hunk does not apply."""
    path = resolve_path(base, patch.path)
    old_text: str | None = None
    if patch.old_path is None:
        if path.exists():
            raise DiffError(patch.path, f"{patch.path} already exists but the diff creates it")
    else:
        # A diff between two names (x.orig -> x) patches the file that exists, preferring the new.
        source = path if path.exists() else resolve_path(base, patch.old_path)
        old_text = _read_source(source, patch.path, rules)
    new_text = apply_hunks(old_text or "", patch)
    if patch.new_path is None:
        if new_text:
            raise DiffError(patch.path, "the diff deletes the file but not all of its lines")
        return PlannedChange(path, old_text, None, DiffStats("", 0, line_count(old_text or "")))
    return PlannedChange(
        path, old_text, new_text, unified_diff(old_text or "", new_text, patch.path)
    )


def plan_changes(patches: list[FilePatch], base: Path, rules: PathRules) -> list[PlannedChange]:
    planned: list[PlannedChange] = []
    seen: set[Path] = set()
    for patch in patches:
        change = plan_change(patch, base, rules)
        if change.path in seen:
            raise DiffError(patch.path, "the diff changes this file twice")
        seen.add(change.path)
        planned.append(change)
    return planned


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _move_aside(path: Path, rules: PathRules) -> Path:
    """Renames `path` (the file or link itself, in its checked folder) to a hidden name."""
    target = open_target(path, rules, create_parents=False, follow_link=False)
    try:
        aside = f".{target.name}.{os.getpid()}.deleted"
        os.rename(target.name, aside, src_dir_fd=target.dir_fd, dst_dir_fd=target.dir_fd)
    finally:
        target.close()
    return path.with_name(aside)


# In the daemon's own folder (the terminals folder): one folder per apply in flight, holding what
# each of its files was before (write-ahead, fsynced); a daemon killed mid-apply has its
# successor put every file back (recover_interrupted_applies).
JOURNAL_FOLDER = "diff-journal"
_PLAN = "plan.json"
_OLD = "old-{}"


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class UndoJournal:
    """What the files of one apply were, on disk before the first of them changes."""

    def __init__(self, root: Path, planned: list[PlannedChange]) -> None:
        ensure_daemon_folder(root)
        self.folder = root / f"{time.time_ns()}-{os.getpid()}-{secrets.token_hex(4)}"
        self.folder.mkdir(0o700)
        try:
            self._record(planned)
        except BaseException:
            self.close()
            raise

    def _record(self, planned: list[PlannedChange]) -> None:
        entries = []
        for index, change in enumerate(planned):
            old = None
            if change.old_text is not None:
                old = _OLD.format(index)
                _write_synced(self.folder / old, _encode(change.old_text))
            deleted = change.new_text is None
            entries.append({"path": str(change.path), "old": old, "deleted": deleted})
        _write_synced(self.folder / f"{_PLAN}.new", json.dumps(entries).encode())
        os.rename(self.folder / f"{_PLAN}.new", self.folder / _PLAN)
        _fsync_folder(self.folder)

    def close(self) -> None:
        """The apply ended (done or undone): nothing to put back any more."""
        with contextlib.suppress(FileNotFoundError):
            (self.folder / _PLAN).unlink()
        shutil.rmtree(self.folder, ignore_errors=True)


def recover_interrupted_applies(root: Path, rules: PathRules) -> list[str]:
    """Puts back the files of every apply a killed daemon left half done (newest first); returns
    the paths restored. A file the rules now refuse is left as it is (and logged)."""
    restored: list[str] = []
    if not root.is_dir():
        return restored
    for folder in sorted(root.iterdir(), reverse=True):
        plan = folder / _PLAN
        if plan.is_file():
            pid = folder.name.split("-")[1] if folder.name.count("-") >= 2 else ""
            for entry in reversed(json.loads(plan.read_bytes())):
                if _undo_entry(folder, entry, pid, rules):
                    restored.append(entry["path"])
            plan.unlink()
        shutil.rmtree(folder, ignore_errors=True)
    return restored


def _undo_entry(folder: Path, entry: dict[str, object], pid: str, rules: PathRules) -> bool:
    path = Path(str(entry["path"]))
    old = entry["old"]
    try:
        if old is None:
            with contextlib.suppress(FileNotFoundError):
                delete_checked(path, rules)
        else:
            atomic_write(path, (folder / str(old)).read_bytes(), rules=rules)
        if entry["deleted"]:
            with contextlib.suppress(FileNotFoundError):
                delete_checked(path.with_name(f".{path.name}.{pid}.deleted"), rules)
    except (OSError, CodedError, PathRefused) as exc:
        log.warning("could not put back %s after an interrupted apply_agent_diff: %s", path, exc)
        return False
    return True


def commit_changes(
    planned: list[PlannedChange], rules: PathRules, journal_root: Path | None = None
) -> None:
    """Writes every planned change, or none: what was already changed is undone on failure,
    and, with `journal_root`, by the next daemon if this one is killed midway.

    Deleted files are first moved aside (so undoing restores them exactly) and removed at the end.
    """
    journal = None
    if journal_root is not None:
        try:
            journal = UndoJournal(journal_root, planned)
        except OSError as exc:
            raise write_failure(exc, journal_root) from None
    try:
        _commit(planned, rules)
    finally:
        if journal is not None:
            journal.close()


def _commit(planned: list[PlannedChange], rules: PathRules) -> None:
    written: list[PlannedChange] = []
    moved_aside: list[tuple[Path, Path]] = []
    try:
        for change in planned:
            if change.new_text is None:
                moved_aside.append((change.path, _move_aside(change.path, rules)))
            else:
                atomic_write(change.path, _encode(change.new_text), rules=rules)
                written.append(change)
    except (OSError, CodedError, PathRefused):
        for change in reversed(written):
            with contextlib.suppress(OSError, CodedError, PathRefused):
                if change.old_text is None:
                    delete_checked(change.path, rules)
                else:
                    atomic_write(change.path, _encode(change.old_text), rules=rules)
        for original, aside in reversed(moved_aside):
            with contextlib.suppress(OSError):
                os.rename(aside, original)
        raise
    for _, aside in moved_aside:
        with contextlib.suppress(OSError):
            os.unlink(aside)


def _permission_check(planned: list[PlannedChange], rules: PathRules) -> PathRefused | None:
    for change in planned:
        try:
            check_writable(change.path, rules)
        except PathRefused as refused:
            return refused
        except OSError:
            continue  # the write reports it
    return None


def _apply(
    args: ApplyAgentDiffArgs,
    workspace: Path,
    rules: PathRules,
    journal_root: Path,
    applied: list[PlannedChange],
) -> ApplyAgentDiffResult:
    """Applies the diff; the changes it made are added to `applied`."""
    base = resolve_path(workspace, args.base_directory)
    try:
        patches = parse_unified_diff(args.diff)
        if not patches:
            return ApplyAgentDiffResult(
                error=ToolError(code="invalid_argument", message="the diff has no file changes")
            )
        planned = plan_changes(patches, base, rules)
    except DiffError as exc:
        return ApplyAgentDiffResult(
            does_not_apply=DiffDoesNotApply(
                path=exc.path, reason=exc.reason, hunk_index=exc.hunk_index
            )
        )
    refused = _permission_check(planned, rules)
    if refused is not None and refused.kind == "invalid":
        return ApplyAgentDiffResult(
            error=ToolError(code="invalid_argument", message=refused.reason)
        )
    if refused is not None:
        return ApplyAgentDiffResult(
            permission_denied=PermissionDenied(path=refused.path, reason=refused.reason)
        )
    try:
        commit_changes(planned, rules, journal_root)
    except PathRefused as exc:
        return ApplyAgentDiffResult(
            permission_denied=PermissionDenied(path=exc.path, reason=exc.reason)
        )
    except CodedError as exc:
        return ApplyAgentDiffResult(error=ToolError(code=exc.code, message=exc.message))
    except OSError:
        return ApplyAgentDiffResult(
            error=ToolError(code="io_error", message="a file of the diff could not be written")
        )
    files = [
        AppliedFile(
            path=display_path(workspace, change.path),
            lines_added=change.stats.lines_added,
            lines_removed=change.stats.lines_removed,
            created=change.old_text is None,
            deleted=change.new_text is None,
        )
        for change in planned
    ]
    applied.extend(planned)
    return ApplyAgentDiffResult(success=ApplyAgentDiffSuccess(files=files))


async def apply_agent_diff(args: ApplyAgentDiffArgs, ctx: CallContext) -> ApplyAgentDiffResult:
    rules = write_rules(ctx)
    journal_root = ctx.daemon.config.terminals_folder / JOURNAL_FOLDER
    applied: list[PlannedChange] = []
    result = await asyncio.to_thread(
        _apply, args, Path(ctx.daemon.workspace), rules, journal_root, applied
    )
    servers = ctx.daemon.service(LanguageServers)
    for change in applied:
        if change.new_text is None:
            await servers.file_deleted(change.path)
        else:
            await servers.file_written(change.path, change.new_text)
    return result


def _diff_subject(args: ApplyAgentDiffArgs) -> Subject:
    # The files the diff writes (creates, patches or deletes), from its base directory. A diff
    # that does not parse names nothing here: the handler refuses it.
    try:
        patches = parse_unified_diff(args.diff)
    except DiffError:
        patches = []
    written = [os.path.join(args.base_directory, patch.path) for patch in patches if patch.path]
    return Subject(paths_written=tuple(written))


APPLY_AGENT_DIFF = ToolSpec(
    "apply_agent_diff_tool_call",
    apply_agent_diff,
    effects=Effect.WORKSPACE | Effect.MACHINE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("ApplyAgentDiff"),
    subject=_diff_subject,
    edit_lines=reports.applied_diff_lines,
)
