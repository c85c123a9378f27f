#!/usr/bin/env python3
"""read_lints from warm language servers vs the command-line path, printed as JSON (issue #31).

In one run, on a generated Python repository (10k files; --quick: 200) and a generated
TypeScript project (300 files; --quick: 40) with seeded type errors, two real daemons serve
the same workspace: one with its language servers (tools/language_servers.py), one with
--no-language-servers (the command-line linters of before: ruff; tsc --noEmit per call).
For each language:

- `read_lints` of one just-edited file (the edit tool changes it, then read_lints asks for it),
  warm: p50 on each daemon and their ratio (goal for TypeScript: warm p50 <= 300 ms and
  >= 10x faster than the command-line path);
- recall on the seeded type errors (each is one labelled (file, line)): what each path finds
  (goal for the servers: >= 0.9);
- the first call (the server starting and loading the project) and the resident memory of the
  server with every process it started (tsserver under typescript-language-server).

Calls to the two daemons alternate, so load from other work falls on both; every answer is
checked (a read_lints that fails or skips the file ends the run with an error, and each timed
answer of the servers must hold the edited file's seeded error at its labelled line). The JSON
also holds the machine's load average before and after, and whether each goal was met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.* when run as a script

from agent.v1.files_pb2 import ReadLintsArgs
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from scripts.benchmarking import add_quick_flag, expect, tool_success
from tests.daemon_process import RunningDaemon, running_daemon
from tests.workspace_support import replace_call

SERVER_SCRIPTS = {"python": "langserver.index.js", "typescript": "typescript-language-server"}
FIRST_CALL_SECONDS = 300.0


def make_python(root: Path, files: int, seeded_every: int) -> list[tuple[str, int]]:
    """pkg/m<i>.py, each importing its parent in a tree; every `seeded_every`-th file gets a
    type error on its last line. Returns the seeded (file, line)s."""
    package = root / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    seeded = []
    for i in range(files):
        lines = []
        if i:
            lines.append(f"from pkg.m{i // 10} import f{i // 10}")
        lines += [
            f"def f{i}(x: int) -> int:",
            f"    return x + {i}  # edit",
            "",
        ]
        if i % seeded_every == seeded_every - 1:
            lines.append(f'WRONG: str = f{i}("{i}")')
            seeded.append((f"pkg/m{i}.py", len(lines)))
        (package / f"m{i}.py").write_text("\n".join(lines) + "\n")
    return seeded


def make_typescript(root: Path, files: int, seeded_every: int) -> list[tuple[str, int]]:
    src = root / "web" / "src"
    src.mkdir(parents=True)
    (root / "web" / "tsconfig.json").write_text(
        '{"compilerOptions": {"strict": true, "target": "es2022", "module": "es2022",'
        ' "moduleResolution": "bundler", "noEmit": true}, "include": ["src"]}\n'
    )
    # At the top too: the command-line path runs the workspace's node_modules/.bin/tsc.
    for folder in (root, root / "web"):
        (folder / "node_modules").symlink_to(REPO / "node_modules", target_is_directory=True)
    seeded = []
    for i in range(files):
        lines = []
        if i:
            lines.append(f'import {{ f{i // 10} }} from "./m{i // 10}";')
        lines += [f"export function f{i}(x: number): number {{", f"  return x + {i}; // edit", "}"]
        if i % seeded_every == seeded_every - 1:
            lines.append(f"export const wrong{i}: string = f{i}({i});")
            seeded.append((f"web/src/m{i}.ts", len(lines)))
        (src / f"m{i}.ts").write_text("\n".join(lines) + "\n")
    return seeded


async def read_lints(client: ExecDaemonClient, paths: list[str]) -> Any:
    call = ToolCall()
    call.read_lints_tool_call.args.CopyFrom(ReadLintsArgs(paths=paths))
    success = tool_success(await client.run(call))
    expect(not success.skipped, f"read_lints skipped files: {list(success.skipped)[:3]}")
    return success


async def first_call_ms(client: ExecDaemonClient, path: str) -> float:
    """The first read_lints that needs the server: it starts; a call that comes back with the
    file skipped (the server still loading past read_lints's bound) is asked again."""
    started = time.perf_counter()
    deadline = time.monotonic() + FIRST_CALL_SECONDS
    while True:
        call = ToolCall()
        call.read_lints_tool_call.args.CopyFrom(ReadLintsArgs(paths=[path]))
        success = tool_success(await client.run(call))
        if not success.skipped:
            return (time.perf_counter() - started) * 1000
        expect(time.monotonic() < deadline, f"no answer: {success.skipped[0].reason}")


def error_lines(success: Any) -> set[tuple[str, int]]:
    """(file, line) of every error the answer holds."""
    return {
        (file.path, d.start_line)
        for file in success.files
        for d in file.diagnostics
        if d.severity == "error"
    }


def recall(success: Any, seeded: list[tuple[str, int]]) -> float:
    lines = error_lines(success)
    return sum(1 for label in seeded if label in lines) / len(seeded)


def tree_rss_mb(daemon: RunningDaemon, script: str) -> float:
    """Resident MB of the daemon's child running `script` and all its descendants."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        parent = int(text[text.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(stat.parent.name))
    roots = []
    for pid in children.get(daemon.process.pid, []):
        try:
            if script.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                roots.append(pid)
        except OSError:
            continue
    total, todo = 0, list(roots)
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except OSError:
            continue
    return round(total * 4096 / 2**20, 1)


async def edit_marker(client: ExecDaemonClient, path: Path, tag: str) -> None:
    """Changes the file's `edit` comment through the edit tool (a real edit, every time new)."""
    text = await asyncio.to_thread(path.read_text)
    line = next(line for line in text.splitlines() if " edit" in line)
    marker = line[line.index(" edit") - 2 :]
    tool_success(await client.run(replace_call(path, marker, f"{marker[:2]} edit {tag}")))


async def measure_language(
    language: str,
    servers: RunningDaemon,
    cli: RunningDaemon,
    seeded: list[tuple[str, int]],
    rounds: int,
) -> dict[str, Any]:
    async with servers.client() as fast, cli.client() as slow:
        target = seeded[0][0]
        first = await first_call_ms(fast, target)
        warm: list[float] = []
        baseline: list[float] = []
        for round_ in range(rounds):
            for client, samples in ((fast, warm), (slow, baseline)):
                await edit_marker(
                    fast, servers.workspace / target, f"{round_}-{len(warm)}-{len(baseline)}"
                )
                started = time.perf_counter()
                success = await read_lints(client, [target])
                samples.append((time.perf_counter() - started) * 1000)
                expect(bool(success.files), "read_lints returned no file")
                if client is fast:
                    expect(
                        seeded[0] in error_lines(success),
                        f"the servers missed the seeded error {seeded[0]}",
                    )
        everything = [path for path, _ in seeded]
        server_recall = recall(await read_lints(fast, everything), seeded)
        cli_recall = recall(await read_lints(slow, everything), seeded)
    warm_p50, cli_p50 = statistics.median(warm), statistics.median(baseline)
    return {
        "rounds": rounds,
        "seeded_errors": len(seeded),
        "first_call_ms": round(first, 1),
        "warm_p50_ms": round(warm_p50, 1),
        "cli_p50_ms": round(cli_p50, 1),
        "cli_over_warm_ratio": round(cli_p50 / warm_p50, 2),
        "recall_servers": round(server_recall, 3),
        "recall_cli": round(cli_recall, 3),
        "server_memory_mb": tree_rss_mb(servers, SERVER_SCRIPTS[language]),
        "goals_met": {
            "warm_p50_le_300_ms": warm_p50 <= 300,
            "recall_ge_0.9": server_recall >= 0.9,
            **({"ge_10x_cli": cli_p50 / warm_p50 >= 10} if language == "typescript" else {}),
        },
    }


async def run(workspace: Path, state: Path, options: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"cpus": os.cpu_count(), "load_average_before": os.getloadavg()}
    with (
        running_daemon(workspace, state / "servers") as servers,
        running_daemon(workspace, state / "cli", "--no-language-servers") as cli,
    ):
        for language, seeded in options.seeded.items():
            report[language] = {
                "files": options.files[language],
                **await measure_language(language, servers, cli, seeded, options.rounds),
            }
    report["load_average_after"] = os.getloadavg()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python-files", type=int, default=10_000)
    parser.add_argument("--typescript-files", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=15)
    add_quick_flag(parser)
    options = parser.parse_args()
    if options.quick:
        options.python_files, options.typescript_files, options.rounds = 200, 40, 3
    options.files = {"python": options.python_files, "typescript": options.typescript_files}
    with tempfile.TemporaryDirectory(prefix="bench-lints-") as root:
        workspace = Path(root) / "workspace"
        workspace.mkdir()
        options.seeded = {
            "python": make_python(
                workspace, options.python_files, max(options.python_files // 20, 5)
            ),
            "typescript": make_typescript(workspace, options.typescript_files, 10),
        }
        report = asyncio.run(run(workspace, Path(root) / "state", options))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
