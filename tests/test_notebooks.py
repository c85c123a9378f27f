"""Notebook cell edits (edit_tool_call with notebook_cell) on the real daemon, checked with nbformat."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from agent.v1 import files_pb2 as files
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon
from tests.shared_daemon import *  # noqa: F403 (the daemon, space and client fixtures)
from tests.workspace_support import case, result_of


def cell_call(
    path: Path,
    index: int,
    new: str,
    old: str = "",
    is_new: bool = False,
    language: str = "python",
    replace_all: bool = False,
) -> ToolCall:
    args = files.EditArgs(
        path=str(path),
        old_string=old,
        new_string=new,
        replace_all=replace_all,
        notebook_cell=files.NotebookCellEdit(
            cell_idx=index, is_new_cell=is_new, cell_language=language
        ),
    )
    return ToolCall(edit_tool_call=files.EditToolCall(args=args))


def sample_notebook(path: Path, indent: int = 1) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["language_info"] = {"name": "python"}
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# Title"),
        nbformat.v4.new_code_cell("x = 1\nprint(x)"),
    ]
    notebook.cells[1].outputs = [nbformat.v4.new_output("stream", text="1\n")]
    path.write_text(json.dumps(json.loads(nbformat.writes(notebook)), indent=indent))


def load(path: Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    return notebook


async def test_new_notebook_from_a_new_cell(client: ExecDaemonClient, space: Path) -> None:
    path = space / "fresh.ipynb"
    result = await result_of(client, cell_call(path, 0, "print('hi')", is_new=True))
    assert case(result) == "success" and result.success.created
    notebook = load(path)
    assert [(c.cell_type, c.source) for c in notebook.cells] == [("code", "print('hi')")]


async def test_insert_cells_of_each_kind(client: ExecDaemonClient, space: Path) -> None:
    path = space / "nb.ipynb"
    sample_notebook(path)
    await result_of(client, cell_call(path, 1, "Some *notes*", is_new=True, language="markdown"))
    await result_of(client, cell_call(path, 3, "SELECT 1", is_new=True, language="sql"))
    await result_of(client, cell_call(path, 0, "raw text", is_new=True, language="raw"))
    notebook = load(path)
    assert [(c.cell_type, c.source) for c in notebook.cells] == [
        ("raw", "raw text"),
        ("markdown", "# Title"),
        ("markdown", "Some *notes*"),
        ("code", "x = 1\nprint(x)"),
        ("code", "SELECT 1"),
    ]
    assert notebook.cells[4].metadata["vscode"] == {"languageId": "sql"}
    assert notebook.cells[3].outputs[0]["text"] == "1\n"  # untouched cells keep their outputs


async def test_edit_a_cell_in_place(client: ExecDaemonClient, space: Path) -> None:
    path = space / "nb.ipynb"
    sample_notebook(path)
    result = await result_of(client, cell_call(path, 1, "x = 2", old="x = 1"))
    success = result.success
    assert (success.lines_added, success.lines_removed, success.replacements) == (1, 1, 1)
    assert "(cell 1)" in success.diff and "-x = 1\n+x = 2\n" in success.diff
    assert load(path).cells[1].source == "x = 2\nprint(x)"


async def test_cell_edit_failures_leave_the_notebook_alone(
    client: ExecDaemonClient, space: Path
) -> None:
    path = space / "nb.ipynb"
    sample_notebook(path)
    before = path.read_bytes()
    no_match = await result_of(client, cell_call(path, 1, "y", old="nope"))
    assert case(no_match) == "no_match"
    out_of_range = await result_of(client, cell_call(path, 7, "y", old="x"))
    assert case(out_of_range) == "error" and "out of range" in out_of_range.error.message
    insert_far = await result_of(client, cell_call(path, 9, "y", is_new=True))
    assert case(insert_far) == "error"
    empty_old = await result_of(client, cell_call(path, 1, "y"))
    assert case(empty_old) == "error" and empty_old.error.code == "invalid_argument"
    missing = await result_of(client, cell_call(space / "none.ipynb", 0, "y", old="x"))
    assert case(missing) == "file_not_found"
    assert path.read_bytes() == before


async def test_invalid_notebook_is_a_typed_error(client: ExecDaemonClient, space: Path) -> None:
    path = space / "broken.ipynb"
    path.write_text("{not json")
    result = await result_of(client, cell_call(path, 0, "x", is_new=True))
    assert case(result) == "error" and result.error.code == "invalid_notebook"
    assert path.read_text() == "{not json"


async def test_json_indentation_of_the_file_is_kept(client: ExecDaemonClient, space: Path) -> None:
    path = space / "wide.ipynb"
    sample_notebook(path, indent=2)
    await result_of(client, cell_call(path, 0, "# New title", old="# Title"))
    text = path.read_text()
    assert text.startswith('{\n  "cells": [')
    assert json.loads(text)["cells"][0]["source"] == ["# New title"]


async def test_old_minor_version_notebooks_stay_valid(
    client: ExecDaemonClient, space: Path
) -> None:
    path = space / "old.ipynb"
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                   "source": ["a = 1"]}],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 2,
    }  # fmt: skip
    path.write_text(json.dumps(notebook))
    result = await result_of(client, cell_call(path, 1, "b = 2", is_new=True))
    assert case(result) == "success"
    loaded = load(path)
    assert [c.source for c in loaded.cells] == ["a = 1", "b = 2"]


async def test_protected_notebook_path_is_refused(
    client: ExecDaemonClient, daemon: RunningDaemon
) -> None:
    path = daemon.workspace / ".vscode" / "x.ipynb"
    result = await result_of(client, cell_call(path, 0, "x", is_new=True))
    assert case(result) == "permission_denied"
