"""read_lints_tool_call (tools/lints.py) on the real daemon with the real command-line linters
(--no-language-servers: what read_lints falls back to where no language server is installed;
tests/test_language_servers.py covers the servers)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.v1.files_pb2 import ReadLintsArgs
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon, running_daemon

REPO = Path(__file__).resolve().parent.parent
BAD_PYTHON = "import os\n\ndef f(:\n    pass\n"
UNDEFINED_NAME = "def f():\n    return undefined_name\n"
BAD_SHELL = "#!/bin/bash\nrm -rf $1/*\n"
BAD_JS = "const a = 1;\nconst b = ;\n"
BAD_JSON = '{\n  "a": 1,\n  "b": \n}\n'


@pytest.fixture
def daemon(workspace: Path, tmp_path: Path) -> Iterator[RunningDaemon]:
    with running_daemon(workspace, tmp_path / "state", "--no-language-servers") as running:
        yield running


async def read_lints(client: ExecDaemonClient, *paths: str) -> Any:
    call = ToolCall()
    call.read_lints_tool_call.args.CopyFrom(ReadLintsArgs(paths=list(paths)))
    outcome = await client.run(call)
    assert outcome.error is None, outcome.error
    assert outcome.result is not None
    return outcome.result.read_lints_tool_call.result


def diagnostics(success: Any) -> dict[str, list[tuple[str, str, str, int, int]]]:
    return {
        file.path: [
            (d.source, d.severity, d.code, d.start_line, d.start_column) for d in file.diagnostics
        ]
        for file in success.files
    }


def write(workspace: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


async def test_each_kind_of_file_is_checked_by_its_linter(
    client: ExecDaemonClient, workspace: Path
) -> None:
    write(
        workspace,
        {
            "broken.py": BAD_PYTHON,
            "names.py": UNDEFINED_NAME,
            "clean.py": "VALUE = 1\n",
            "deploy": BAD_SHELL,
            "app.js": BAD_JS,
            "config.json": BAD_JSON,
        },
    )
    result = await read_lints(
        client, "broken.py", "names.py", "clean.py", "deploy", "app.js", "config.json"
    )
    assert result.WhichOneof("result") == "success", result
    found = diagnostics(result.success)
    assert found["clean.py"] == []
    assert found["broken.py"][0][:3] == ("ruff", "error", "")
    assert found["broken.py"][0][3] == 3, "the syntax error is on line 3"
    assert ("ruff", "warning", "F821", 2, 12) in found["names.py"]
    assert ("shellcheck", "warning", "SC2115", 2, 8) in found["deploy"]
    assert found["app.js"] == [("node", "error", "", 2, 11)]
    assert found["config.json"] == [("json", "error", "", 4, 1)]
    messages = {d.message for file in result.success.files for d in file.diagnostics}
    assert "SyntaxError: Unexpected token ';'" in messages
    assert "Undefined name `undefined_name`" in messages
    assert result.success.total_diagnostics == sum(len(v) for v in found.values())
    linters = " ".join(result.success.linters)
    assert "ruff 0." in linters and "shellcheck 0." in linters and "node " in linters
    assert list(result.success.unsupported_paths) == []


async def test_files_without_a_linter_and_missing_files_are_listed_apart(
    client: ExecDaemonClient, workspace: Path
) -> None:
    write(workspace, {"README.md": "# hi\n", "data.bin": "x"})
    result = await read_lints(client, "README.md", "data.bin", "nowhere.py")
    assert sorted(result.success.unsupported_paths) == ["README.md", "data.bin"]
    assert [(s.path, s.reason) for s in result.success.skipped] == [("nowhere.py", "no such file")]
    assert list(result.success.files) == []


async def test_typescript_type_errors_come_back_from_the_workspaces_tsc(
    client: ExecDaemonClient, workspace: Path
) -> None:
    """The project's typescript (package.json, installed by scripts/setup), as a TypeScript
    workspace has it: node_modules/.bin/tsc."""
    (workspace / "node_modules").symlink_to(REPO / "node_modules", target_is_directory=True)
    write(
        workspace,
        {
            "src/main.ts": "export const total: number = 1;\nlet label: number = 'a';\n",
            "src/clean.ts": "export const ok: string = 'yes';\n",
        },
    )
    result = await read_lints(client, "src/main.ts", "src/clean.ts")
    assert result.WhichOneof("result") == "success", result
    found = diagnostics(result.success)
    assert found == {"src/main.ts": [("tsc", "error", "TS2322", 2, 5)], "src/clean.ts": []}
    [message] = [d.message for f in result.success.files for d in f.diagnostics]
    assert message == "Type 'string' is not assignable to type 'number'."
    assert "tsc 5." in " ".join(result.success.linters)


@pytest.mark.skipif(shutil.which("tsc") is not None, reason="tsc is installed here")
async def test_typescript_without_tsc_is_unsupported(
    client: ExecDaemonClient, workspace: Path
) -> None:
    write(workspace, {"main.ts": "let x: number = 'a';\n"})
    result = await read_lints(client, "main.ts")
    assert list(result.success.unsupported_paths) == ["main.ts"]


async def test_a_directory_means_the_files_under_it_the_agent_may_see(
    client: ExecDaemonClient, workspace: Path
) -> None:
    write(
        workspace,
        {
            ".cursorignore": "src/secret.py\n",
            "src/a.py": UNDEFINED_NAME,
            "src/secret.py": UNDEFINED_NAME,
            "src/sub/b.json": "{}",
            "other.py": UNDEFINED_NAME,
        },
    )
    result = await read_lints(client, "src")
    assert sorted(diagnostics(result.success)) == ["src/a.py", "src/sub/b.json"]
    hidden = await read_lints(client, "src/secret.py")
    assert [s.reason for s in hidden.success.skipped] == ["hidden from the agent by .cursorignore"]


def git(workspace: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=workspace,
        check=True,
        capture_output=True,
    )


async def test_no_paths_means_the_files_git_sees_changed(
    client: ExecDaemonClient, workspace: Path
) -> None:
    write(workspace, {"kept.py": UNDEFINED_NAME, "edited.py": "A = 1\n", "gone.py": "B = 2\n"})
    git(workspace, "init", "-q")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "base")
    write(workspace, {"edited.py": UNDEFINED_NAME, "new/fresh.py": BAD_PYTHON})
    (workspace / "gone.py").unlink()
    result = await read_lints(client)
    assert sorted(diagnostics(result.success)) == ["edited.py", "new/fresh.py"]


async def test_no_paths_outside_a_git_repository_is_a_typed_error(
    client: ExecDaemonClient,
) -> None:
    result = await read_lints(client)
    assert result.WhichOneof("result") == "error"
    assert result.error.code == "failed_precondition"
