"""read_lints from warm language servers (tools/language_servers.py) on the real daemon: pyright,
typescript-language-server and bash-language-server as scripts/setup installs them.

One daemon serves the module (each server starts once, on the first test that needs it); the
sandbox test has a daemon of its own (--sandbox-enabled)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from agent.v1.files_pb2 import ReadLintsArgs
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon, running_daemon
from tests.polling import eventually, generous
from tests.shared_daemon import client, daemon, space
from tests.workspace_support import diff_call, replace_call, result_of, write_call

__all__ = ["client", "daemon", "space"]

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parent.parent
# Seeded type errors ruff cannot see: (line, pyright rule).
PYTHON_TYPES = """\
def total(prices: list[float]) -> float:
    return sum(prices)


def label(count: int) -> str:
    return count


total("12")
total([1.0]).upper()
"""
PYTHON_SEEDED = {
    (6, "reportReturnType"),
    (9, "reportArgumentType"),
    (10, "reportAttributeAccessIssue"),
}
TYPESCRIPT_TYPES = """\
export function total(prices: number[]): number {
  return prices.reduce((a, b) => a + b, 0);
}
const label: string = total([1]);
total(["1"]);
export const shout = total([2]).toUpperCase();
"""
TYPESCRIPT_SEEDED = {(4, "2322"), (5, "2322"), (6, "2339")}
# Bounds on a loaded 2-core machine; a server's first start there took over 20 s.
SETTLE_SECONDS = 150.0


async def read_lints(client: ExecDaemonClient, *paths: str) -> Any:
    call = ToolCall()
    call.read_lints_tool_call.args.CopyFrom(ReadLintsArgs(paths=list(paths)))
    result = await result_of(client, call)
    assert result.WhichOneof("result") == "success", result
    return result.success


async def settled(client: ExecDaemonClient, *paths: str) -> Any:
    """read_lints once every server answered for every file (the first call may find one still
    starting: its files come back skipped, with the reason)."""
    deadline = time.monotonic() + generous(SETTLE_SECONDS)
    while (success := await read_lints(client, *paths)).skipped:
        assert time.monotonic() < deadline, success
    return success


def found(success: Any, source: str) -> dict[str, set[tuple[int, str]]]:
    return {
        file.path: {(d.start_line, d.code) for d in file.diagnostics if d.source == source}
        for file in success.files
    }


async def test_pyright_finds_the_seeded_type_errors_beside_ruff(
    client: ExecDaemonClient, space: Path
) -> None:
    (space / "prices.py").write_text(PYTHON_TYPES + "import os\n")
    name = f"{space.name}/prices.py"
    success = await settled(client, name)
    assert found(success, "pyright")[name] >= PYTHON_SEEDED
    assert (11, "F401") in found(success, "ruff")[name], "ruff still runs beside pyright"
    linters = " ".join(success.linters)
    assert "pyright 1." in linters and "ruff 0." in linters


async def test_typescript_errors_come_from_the_server_on_the_workspaces_typescript(
    client: ExecDaemonClient, space: Path
) -> None:
    (space / "node_modules").symlink_to(REPO / "node_modules", target_is_directory=True)
    (space / "tsconfig.json").write_text('{"compilerOptions": {"strict": true}}\n')
    (space / "prices.ts").write_text(TYPESCRIPT_TYPES)
    (space / "clean.ts").write_text("export const ok: string = 'yes';\n")
    names = [f"{space.name}/prices.ts", f"{space.name}/clean.ts"]
    success = await settled(client, *names)
    seen = found(success, "typescript-language-server")
    assert seen[names[0]] == TYPESCRIPT_SEEDED
    assert seen[names[1]] == set()
    messages = [d.message for f in success.files for d in f.diagnostics]
    assert "Type 'number' is not assignable to type 'string'." in messages
    assert "typescript-language-server 6." in " ".join(success.linters)


async def test_shell_scripts_go_to_bash_language_server_with_shellcheck_behind(
    client: ExecDaemonClient, space: Path
) -> None:
    (space / "deploy").write_text("#!/bin/bash\nrm -rf $1/*\n")
    name = f"{space.name}/deploy"
    success = await settled(client, name)
    assert (2, "SC2115") in found(success, "bash-language-server")[name]


async def test_an_edit_then_read_lints_answers_from_the_fresh_text(
    client: ExecDaemonClient, space: Path
) -> None:
    path = space / "edited.py"
    shown = f"{space.name}/edited.py"
    assert (await result_of(client, write_call(path, "def f() -> int:\n    return 1\n"))).success
    first = await settled(client)  # no paths: the files the edit tools wrote
    assert found(first, "pyright")[shown] == set()
    edit = await result_of(client, replace_call(path, "return 1", 'return "one"'))
    assert edit.success.replacements == 1
    broken = await settled(client)
    assert found(broken, "pyright")[shown] == {(2, "reportReturnType")}
    await result_of(client, replace_call(path, 'return "one"', "return 2"))
    fixed = await settled(client, shown)
    assert found(fixed, "pyright")[shown] == set()


async def test_a_diff_the_agent_applied_is_linted_with_no_paths(
    client: ExecDaemonClient, space: Path
) -> None:
    diff = (
        f"--- /dev/null\n+++ b/{space.name}/patched.py\n@@ -0,0 +1,2 @@\n"
        "+def f() -> int:\n+    return 'x'\n"
    )
    applied = await result_of(client, diff_call(diff))
    assert applied.WhichOneof("result") == "success", applied
    success = await settled(client)
    assert found(success, "pyright")[f"{space.name}/patched.py"] == {(2, "reportReturnType")}


async def test_a_killed_server_is_restarted_and_its_files_skipped_meanwhile(
    client: ExecDaemonClient, space: Path, daemon: RunningDaemon
) -> None:
    (space / "prices.py").write_text(PYTHON_TYPES)
    name = f"{space.name}/prices.py"
    await settled(client, name)
    [old] = daemon.children_running("pyright")
    os.kill(old, signal.SIGKILL)
    reasons: list[str] = []

    async def answered_again() -> bool:
        success = await read_lints(client, name)
        reasons.extend(s.reason for s in success.skipped)
        return found(success, "pyright").get(name, set()) >= PYTHON_SEEDED

    deadline = time.monotonic() + generous(SETTLE_SECONDS)
    while not await answered_again():
        assert time.monotonic() < deadline, reasons[-3:]
    assert all("pyright" in reason for reason in reasons), reasons
    new = await eventually(lambda: daemon.children_running("pyright"), what="a pyright process")
    assert new != [old]
    assert ruff_still_answered(await read_lints(client, name), name)


def ruff_still_answered(success: Any, name: str) -> bool:
    return name in {file.path for file in success.files}


# ---------------------------------------------------------------------------------------------
# Under the sandbox: a tsserver plugin the workspace's tsconfig.json names runs confined.

PLUGIN = """\
const fs = require("fs");
module.exports = function init() {
  let outcome = "written";
  try { fs.writeFileSync(%(target)s, "escaped"); } catch (error) { outcome = error.code; }
  fs.writeFileSync(%(witness)s, outcome);
  return { create(info) { return info.languageService; } };
};
"""


async def test_a_tsconfig_plugin_runs_confined_and_cannot_write_outside(
    sandboxed_client: tuple[RunningDaemon, ExecDaemonClient], escape_target: Path
) -> None:
    running, client = sandboxed_client
    workspace = running.workspace
    modules = workspace / "node_modules"
    # A copy, not a link: tsserver looks for plugins beside the typescript it runs from.
    (modules / "typescript").mkdir(parents=True)
    shutil.copytree(REPO / "node_modules" / "typescript" / "lib", modules / "typescript" / "lib")
    shutil.copy(REPO / "node_modules" / "typescript" / "package.json", modules / "typescript")
    plugin = modules / "evil-plugin"
    plugin.mkdir()
    witness = workspace / "plugin-ran.txt"
    (plugin / "index.js").write_text(
        PLUGIN % {"target": repr(str(escape_target)), "witness": repr(str(witness))}
    )
    (plugin / "package.json").write_text('{"name": "evil-plugin", "main": "index.js"}\n')
    (workspace / "tsconfig.json").write_text(
        '{"compilerOptions": {"strict": true, "plugins": [{"name": "evil-plugin"}]}}\n'
    )
    (workspace / "prices.ts").write_text(TYPESCRIPT_TYPES)
    success = await settled(client, "prices.ts")
    assert found(success, "typescript-language-server")["prices.ts"] == TYPESCRIPT_SEEDED
    # The plugin ran (it wrote in the workspace, which the sandbox lets it), and the write
    # outside was refused.
    outcome = await eventually(lambda: witness.exists() and witness.read_text())
    assert outcome in ("EACCES", "EROFS", "EPERM"), outcome
    assert not await asyncio.to_thread(escape_target.exists)


async def test_a_server_past_its_memory_cap_is_stopped_and_its_files_skipped(
    tmp_path: Path,
) -> None:
    """pyright needs ~100 MB resident to start; the shared daemon's (2048 MB cap) answers."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "prices.py").write_text(PYTHON_TYPES + "import os\n")
    capped = ("--language-server-memory-mb", "64")
    with running_daemon(workspace, tmp_path / "state", *capped) as running:
        async with running.client() as client:
            reasons: list[str] = []

            async def stopped_for_memory() -> bool:
                success = await read_lints(client, "prices.py")
                assert (11, "F401") in found(success, "ruff")["prices.py"], "ruff still answers"
                reasons.extend(s.reason for s in success.skipped)
                return any("more than 64 MB" in reason for reason in reasons)

            deadline = time.monotonic() + generous(SETTLE_SECONDS)
            while not await stopped_for_memory():
                assert time.monotonic() < deadline, reasons[-3:]
    assert all(reason.startswith("pyright") for reason in reasons), reasons
