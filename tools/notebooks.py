"""Notebook cell edits: edit_tool_call with `notebook_cell` set (the seed's EditNotebook).

The notebook is read and written with `nbformat` and validated before the (atomic) write, so a
bad edit never leaves an unreadable notebook. The original JSON indentation is kept, so the
file's git diff stays about the cell.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.v1.common_pb2 import FileNotFound, PermissionDenied, ToolError
from agent.v1.files_pb2 import EditArgs, EditMultipleMatches, EditNoMatch, EditResult, EditSuccess
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.paths import PathRefused, PathRules, read_checked
from tools.diffs import replace_text, unified_diff
from tools.workspace import atomic_write, display_path, write_rules

if TYPE_CHECKING:
    # nbformat (with jsonschema) takes ~0.3 s to import: it is imported by the first notebook edit,
    # in its worker thread, not at the daemon's start.
    from nbformat import NotebookNode

log = logging.getLogger(__name__)

MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024
CELL_TYPES = {"markdown": "markdown", "raw": "raw"}  # every other language is a code cell
_INDENT = re.compile(r"\n( +)\"")


@dataclass
class CellChange:
    notebook: NotebookNode
    old_source: str
    new_source: str
    created_file: bool
    replacements: int


class NotebookEditError(Exception):
    def __init__(self, result: EditResult) -> None:
        super().__init__(result.WhichOneof("result"))
        self.result = result


def _error(code: str, message: str) -> NotebookEditError:
    return NotebookEditError(EditResult(error=ToolError(code=code, message=message)))


def _new_cell(language: str, source: str, notebook: NotebookNode) -> NotebookNode:
    import nbformat

    kind = CELL_TYPES.get(language, "code")
    if kind == "markdown":
        cell = nbformat.v4.new_markdown_cell(source)
    elif kind == "raw":
        cell = nbformat.v4.new_raw_cell(source)
    else:
        cell = nbformat.v4.new_code_cell(source)
        kernel_language = notebook.metadata.get("language_info", {}).get("name", "python")
        if language and language not in ("other", kernel_language):
            # How VS Code / Cursor mark a cell in another language than the kernel's.
            cell.metadata["vscode"] = {"languageId": language}
    if notebook.nbformat_minor < 5:
        cell.pop("id", None)
    return cell


def _load(
    path: Path, create: bool, language: str, rules: PathRules
) -> tuple[NotebookNode, bool, int]:
    """(notebook, whether it is new, JSON indent of the file)."""
    import nbformat

    try:
        data, _ = read_checked(path, rules, MAX_NOTEBOOK_BYTES + 1)
        text = data.decode("utf-8")
    except PathRefused as refused:
        raise NotebookEditError(
            EditResult(permission_denied=PermissionDenied(path=refused.path, reason=refused.reason))
        ) from None
    except FileNotFoundError:
        if not create:
            raise NotebookEditError(
                EditResult(
                    file_not_found=FileNotFound(path=str(path), reason=f"{path} does not exist")
                )
            ) from None
        notebook = nbformat.v4.new_notebook()
        if language in ("", "python"):
            notebook.metadata["language_info"] = {"name": "python"}
        return notebook, True, 1
    except PermissionError:
        raise NotebookEditError(
            EditResult(
                permission_denied=PermissionDenied(
                    path=str(path), reason=f"no permission to read {path}"
                )
            )
        ) from None
    except (OSError, UnicodeDecodeError):
        raise _error("invalid_notebook", f"{path} cannot be read as a notebook") from None
    if len(text) > MAX_NOTEBOOK_BYTES:
        raise _error("too_large", f"{path} is larger than {MAX_NOTEBOOK_BYTES} bytes")
    try:
        notebook = nbformat.reads(text, as_version=4)
    except (json.JSONDecodeError, nbformat.reader.NotJSONError, ValueError, KeyError):
        raise _error("invalid_notebook", f"{path} is not a valid Jupyter notebook") from None
    indent = _INDENT.search(text)
    return notebook, False, len(indent.group(1)) if indent else 1


def _replace_in_cell(source: str, args: EditArgs, path: Path, index: int) -> tuple[str, int]:
    if not args.old_string:
        if source:
            raise _error(
                "invalid_argument",
                f"old_string is empty but cell {index} is not; give the text to replace",
            )
        return args.new_string, 1
    replaced, count = replace_text(source, args.old_string, args.new_string, args.replace_all)
    if replaced is None and count == 0:
        raise NotebookEditError(
            EditResult(
                no_match=EditNoMatch(
                    path=str(path), reason=f"old_string was not found in cell {index} of {path}"
                )
            )
        )
    if replaced is None:
        raise NotebookEditError(
            EditResult(
                multiple_matches=EditMultipleMatches(
                    path=str(path),
                    match_count=count,
                    reason=f"old_string occurs {count} times in cell {index}; make it unique or "
                    "set replace_all",
                )
            )
        )
    return replaced, count


def plan_cell_edit(args: EditArgs, path: Path, rules: PathRules) -> tuple[CellChange, int]:
    cell_edit = args.notebook_cell
    index = cell_edit.cell_idx
    notebook, created, indent = _load(path, cell_edit.is_new_cell, cell_edit.cell_language, rules)
    cells: list[Any] = notebook.cells
    if cell_edit.is_new_cell:
        if index > len(cells):
            raise _error(
                "invalid_argument",
                f"cell_idx {index} is out of range: a new cell goes at 0..{len(cells)}",
            )
        cells.insert(index, _new_cell(cell_edit.cell_language, args.new_string, notebook))
        return CellChange(notebook, "", args.new_string, created, 1), indent
    if index >= len(cells):
        raise _error(
            "invalid_argument",
            f"cell_idx {index} is out of range: the notebook has {len(cells)} cells",
        )
    old_source = cells[index].source
    new_source, count = _replace_in_cell(old_source, args, path, index)
    cells[index].source = new_source
    return CellChange(notebook, old_source, new_source, created, count), indent


def _serialize(notebook: NotebookNode, indent: int) -> bytes:
    import nbformat
    from nbformat.validator import ValidationError

    try:
        nbformat.validate(notebook)
    except ValidationError as exc:
        log.info("notebook edit would be invalid: %s", exc.message)
        raise _error("invalid_notebook", "the edit would make the notebook invalid") from None
    text = nbformat.writes(notebook)
    if indent != 1:
        # nbformat always writes indent=1; re-indent like the original file.
        text = json.dumps(
            json.loads(text),
            indent=indent,
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ": "),
        )
    return (text if text.endswith("\n") else text + "\n").encode("utf-8")


def _edit_sync(args: EditArgs, path: Path, workspace: str, rules: PathRules) -> EditResult:
    try:
        change, indent = plan_cell_edit(args, path, rules)
        data = _serialize(change.notebook, indent)
        written, _ = atomic_write(path, data, rules=rules)
    except NotebookEditError as exc:
        return exc.result
    except CodedError as failure:
        if failure.code == "permission_denied":
            return EditResult(
                permission_denied=PermissionDenied(path=str(path), reason=failure.message)
            )
        return EditResult(error=ToolError(code=failure.code, message=failure.message))
    name = f"{display_path(workspace, path)} (cell {args.notebook_cell.cell_idx})"
    stats = unified_diff(change.old_source, change.new_source, name)
    return EditResult(
        success=EditSuccess(
            path=str(path),
            lines_added=stats.lines_added,
            lines_removed=stats.lines_removed,
            diff=stats.diff,
            created=change.created_file,
            bytes_written=written,
            replacements=change.replacements,
        )
    )


async def edit_cell(args: EditArgs, path: Path, ctx: CallContext) -> EditResult:
    """Edits or inserts one cell of the notebook at `path` (already resolved and allowed)."""
    rules = write_rules(ctx)
    return await asyncio.to_thread(_edit_sync, args, path, ctx.daemon.workspace, rules)
