"""report_bugfix_results_tool_call and ai_attribution_tool_call.

Bugfix results become a JSON report in the artifacts folder (the orchestrator lists and uploads
artifacts through ControlService).

Attribution compares what git sees changed (`git diff HEAD`, plus untracked files) with what
the agent's own edit tools wrote: every successful edit_tool_call and apply_agent_diff_tool_call
is recorded (its added and removed lines, per file) by `record_agent_edits`, a middleware. A
changed line counts as the agent's when the agent wrote a line with that content in that file
(lines are compared as multisets, so each recorded line is matched once). Lines the agent
changed with its shell, or before the daemon started, are not known and count as not the
agent's; the result says so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from agent.v1.agent_pb2 import (
    AiAttributionArgs,
    AiAttributionResult,
    AiAttributionSuccess,
    FileAttribution,
    ReportBugfixResultsArgs,
    ReportBugfixResultsResult,
    ReportBugfixResultsSuccess,
)
from agent.v1.common_pb2 import ToolError
from agent.v1.files_pb2 import ApplyAgentDiffArgs, EditArgs
from exec_daemon.kernel.context import CallContext, Invocation, Middleware, Next, only_for
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.git_run import EMPTY_TREE, run_git
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, ToolSpec, no_subject
from exec_daemon.kernel.state import Daemon
from tools.workspace import atomic_write, relative_to_workspace, resolve_path

log = logging.getLogger(__name__)

BUGFIX_STATUSES = ("fixed", "not_reproduced", "wont_fix", "failed")
MAX_DIFF_BYTES = 64 * 1024 * 1024
MAX_UNTRACKED_FILE_BYTES = 4 * 1024 * 1024
MAX_UNTRACKED_FILES = 5000
# Distinct lines remembered per file and per direction; beyond it the oldest are not dropped,
# new ones are just not recorded (a file rewritten with millions of lines is not worth more).
MAX_RECORDED_LINES_PER_FILE = 200_000

# ---------------------------------------------------------------------------------------------
# Bugfix reports


def _report_name(tool_call_id: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    suffix = re.sub(r"[^A-Za-z0-9_.-]+", "-", tool_call_id)[:40] or secrets.token_hex(4)
    return f"bugfix-report-{stamp}-{suffix}.json"


async def report_bugfix_results(
    args: ReportBugfixResultsArgs, ctx: CallContext
) -> ReportBugfixResultsResult:
    if not args.results:
        return ReportBugfixResultsResult(
            error=ToolError(code="invalid_argument", message="there are no results to report")
        )
    for result in args.results:
        if result.status not in BUGFIX_STATUSES:
            return ReportBugfixResultsResult(
                error=ToolError(
                    code="invalid_argument",
                    message=f"bug {result.bug_id or '(no id)'} has status {result.status!r}; "
                    f"valid statuses: {', '.join(BUGFIX_STATUSES)}",
                )
            )
    report = {
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "agent_id": ctx.agent_id,
        "tool_call_id": args.tool_call_id,
        "workspace": ctx.daemon.workspace,
        "results": [_as_json(result) for result in args.results],
    }
    path = Path(ctx.daemon.config.artifacts_folder) / _report_name(args.tool_call_id)
    data = (json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        await asyncio.to_thread(atomic_write, path, data)
    except CodedError as failure:
        return ReportBugfixResultsResult(
            error=ToolError(code=failure.code, message=failure.message)
        )
    return ReportBugfixResultsResult(
        success=ReportBugfixResultsSuccess(report_path=str(path), result_count=len(args.results))
    )


REPORT_BUGFIX_RESULTS = ToolSpec(
    "report_bugfix_results_tool_call",
    report_bugfix_results,
    # Its report goes to the daemon's artifacts folder, for the orchestrator.
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("ReportBugfixResults"),
    subject=no_subject,
)


def _as_json(message: Message) -> dict[str, object]:
    return MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


# ---------------------------------------------------------------------------------------------
# The record of the agent's edits


@dataclass
class FileEdits:
    added: Counter[str] = field(default_factory=Counter)
    removed: Counter[str] = field(default_factory=Counter)

    def record(self, added: list[str], removed: list[str]) -> None:
        for lines, counter in ((added, self.added), (removed, self.removed)):
            for line in lines:
                if line in counter or len(counter) < MAX_RECORDED_LINES_PER_FILE:
                    counter[line] += 1


class AgentEdits:
    """Lines the agent's edit tools added and removed, per absolute file path, since start."""

    def __init__(self, daemon: Daemon) -> None:
        self.files: dict[str, FileEdits] = {}

    def record(self, path: str, added: list[str], removed: list[str]) -> None:
        if added or removed:
            self.files.setdefault(os.path.normpath(path), FileEdits()).record(added, removed)

    def get(self, path: str) -> FileEdits | None:
        return self.files.get(os.path.normpath(path))


def diff_lines(diff: str) -> tuple[list[str], list[str]]:
    """The added and removed lines (without their +/- and newline) of a one-file unified diff."""
    added, removed = [], []
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++ "):
            added.append(line[1:])
        elif line.startswith("-") and not line.startswith("--- "):
            removed.append(line[1:])
    return added, removed


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def diff_lines_by_file(diff: str, trust_counts: bool) -> dict[str, tuple[list[str], list[str]]]:
    """Added and removed lines of a multi-file unified diff, by the path its headers name
    (the new path; the old one for a deletion), without a/ b/ prefixes.

    With `trust_counts` (git's own output) hunk headers say where a hunk ends, so a removed
    line "-- x" is never taken for a file header; agents' diffs get their counts wrong, so
    there a "--- " line is a header when a "+++ " line follows it.
    """
    files: dict[str, tuple[list[str], list[str]]] = {}
    lines = diff.splitlines()
    current: tuple[list[str], list[str]] | None = None
    old_left = new_left = 0
    for index, line in enumerate(lines):
        in_hunk = old_left > 0 or new_left > 0
        if trust_counts and in_hunk:
            if line.startswith("+"):
                new_left -= 1
            elif line.startswith("-"):
                old_left -= 1
            elif line.startswith(" "):
                old_left, new_left = old_left - 1, new_left - 1
        elif line.startswith("--- ") and (
            index + 1 < len(lines) and lines[index + 1].startswith("+++ ")
        ):
            old_path = _diff_header_path(line[4:])
            new_path = _diff_header_path(lines[index + 1][4:])
            name = old_path if new_path == "/dev/null" else new_path
            current = files.setdefault(name, ([], []))
            continue
        elif line.startswith("+++ ") and index > 0 and lines[index - 1].startswith("--- "):
            continue
        elif match := _HUNK.match(line):
            old_left = int(match.group(1) or 1)
            new_left = int(match.group(2) or 1)
            continue
        if current is None:
            continue
        if line.startswith("+"):
            current[0].append(line[1:])
        elif line.startswith("-"):
            current[1].append(line[1:])
    return files


def _diff_header_path(text: str) -> str:
    name = text.split("\t", 1)[0].strip()
    if name.startswith(("a/", "b/")):
        name = name[2:]
    return name


Lines = dict[str, tuple[list[str], list[str]]]


def edit_lines(workspace: str, args: EditArgs, result: Message) -> Lines:
    """The lines a successful edit_tool_call wrote (its spec's `edit_lines`)."""
    if result.WhichOneof("result") != "success":
        return {}
    success = result.success  # type: ignore[attr-defined]
    if success.diff:
        added, removed = diff_lines(success.diff)
    elif args.HasField("contents"):
        # The diff was too large to compute: every line of the new content is the agent's.
        added, removed = args.contents.splitlines(), []
    else:
        added, removed = args.new_string.splitlines(), args.old_string.splitlines()
    return {success.path: (added, removed)}


def applied_diff_lines(workspace: str, args: ApplyAgentDiffArgs, result: Message) -> Lines:
    """The lines a successful apply_agent_diff_tool_call wrote (its spec's `edit_lines`)."""
    if result.WhichOneof("result") != "success":
        return {}
    base = resolve_path(workspace, args.base_directory)
    by_file = diff_lines_by_file(args.diff, trust_counts=False)
    return {str(resolve_path(base, name)): lines for name, lines in by_file.items()}


def record_agent_edits(daemon: Daemon) -> Middleware:
    """Records the lines of every successful edit the agent's edit tools made (for attribution):
    the tools whose spec says which lines they wrote.

    Goes innermost, so it sees the arguments the call really ran with and its raw result."""

    @only_for(lambda spec: spec.edit_lines is not None)
    async def middleware(inv: Invocation, call_next: Next) -> Message:
        result = await call_next(inv)
        record = inv.spec.edit_lines
        if record is None:
            return result
        try:
            edits = daemon.service(AgentEdits)
            for path, (added, removed) in record(daemon.workspace, inv.args, result).items():
                edits.record(path, added, removed)
        except Exception:
            log.exception("recording the agent's edit failed")
        return result

    return middleware


# ---------------------------------------------------------------------------------------------
# Attribution


@dataclass
class FileChanges:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def _matched(lines: list[str], recorded: Counter[str]) -> int:
    return sum((Counter(lines) & recorded).values())


def _parse_workspace_diff(diff: str) -> dict[str, FileChanges]:
    changes: dict[str, FileChanges] = {}
    for name, (added, removed) in diff_lines_by_file(diff, trust_counts=True).items():
        changes[name] = FileChanges(added, removed)
    return changes


def _untracked_lines(root: str, names: list[str]) -> dict[str, FileChanges]:
    """Every line of each untracked file counts as added (binary and huge files: none)."""
    changes = {}
    for name in names[:MAX_UNTRACKED_FILES]:
        path = os.path.join(root, name)
        try:
            if os.path.getsize(path) > MAX_UNTRACKED_FILE_BYTES:
                continue
            data = Path(path).read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue  # binary: no lines
        changes[name] = FileChanges(added=data.decode("utf-8", "replace").splitlines())
    return changes


async def _workspace_changes(
    daemon: Daemon, repo_root: str, pathspecs: list[str]
) -> dict[str, FileChanges]:
    """Changed lines per file under the pathspecs (relative to the workspace), by path from the
    repository's top."""
    head = await run_git(daemon, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    base = head.stdout.decode().strip() if head.returncode == 0 else EMPTY_TREE
    diff = await run_git(
        daemon,
        "diff", base, "--no-color", "--no-renames", "--unified=0", "--", *pathspecs,
        config=[("core.quotePath", "false")],
        max_output=MAX_DIFF_BYTES,
    )  # fmt: skip
    if diff.returncode != 0:
        raise CodedError(ErrorCode.INTERNAL, f"git diff failed: {diff.stderr[:500]}")
    changes = _parse_workspace_diff(diff.stdout.decode("utf-8", "replace"))
    untracked = await run_git(
        daemon, "ls-files", "--others", "--exclude-standard", "--full-name", "-z", "--", *pathspecs
    )
    names = [name for name in untracked.stdout.decode("utf-8", "replace").split("\0") if name]
    changes.update(await asyncio.to_thread(_untracked_lines, repo_root, names))
    return changes


def _attribution_error(code: str, message: str) -> AiAttributionResult:
    return AiAttributionResult(error=ToolError(code=code, message=message))


async def ai_attribution(args: AiAttributionArgs, ctx: CallContext) -> AiAttributionResult:
    daemon = ctx.daemon
    top = await run_git(daemon, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        return _attribution_error("failed_precondition", "the workspace is not in a git repository")
    # The workspace may be a subdirectory of the repository: only its files count.
    pathspecs = [] if args.paths else ["."]
    for path in args.paths:
        relative = relative_to_workspace(daemon.workspace, resolve_path(daemon.workspace, path))
        if relative is None:
            return _attribution_error("invalid_argument", f"{path} is outside the workspace")
        pathspecs.append(f":(literal){relative}")
    # git names paths from the repository's top, which may lie above the workspace.
    repo_root = top.stdout.decode().strip()
    try:
        changes = await _workspace_changes(daemon, repo_root, pathspecs)
    except CodedError as failure:
        return _attribution_error(failure.code, failure.message)
    edits = daemon.service(AgentEdits)
    files = []
    for name in sorted(changes):
        change = changes[name]
        absolute = os.path.join(repo_root, name)
        recorded = edits.get(absolute) or FileEdits()
        files.append(
            FileAttribution(
                path=relative_to_workspace(daemon.workspace, absolute) or absolute,
                ai_lines_added=_matched(change.added, recorded.added),
                ai_lines_removed=_matched(change.removed, recorded.removed),
                total_lines_added=len(change.added),
                total_lines_removed=len(change.removed),
            )
        )
    recorded_any = bool(edits.files)
    if recorded_any:
        note = (
            "a changed line is the agent's when the agent's edit tools (edit, apply_agent_diff) "
            "wrote that line to that file since the daemon started; changes made through the "
            "shell or before the daemon started count as not the agent's"
        )
    else:
        note = (
            "the daemon has no record of edits by the agent's edit tools since it started, so "
            "no line is attributed to the agent (changes made through the shell or before the "
            "daemon started cannot be attributed)"
        )
    return AiAttributionResult(
        success=AiAttributionSuccess(files=files, ai_edits_recorded=recorded_any, note=note)
    )


AI_ATTRIBUTION = ToolSpec(
    "ai_attribution_tool_call",
    ai_attribution,
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("AiAttribution"),
    subject=no_subject,
)
