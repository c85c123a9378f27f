"""Language servers the workspace names in Helix's `.helix/languages.toml`
(tools/helix_languages.py): read_lints runs them as the agent's own programs and asks them about
the files their languages cover. The server here is a real one, tests/toy_language_server.py
(pygls over stdio), named `toy-lint` for `.toy` files.

One daemon serves the module (each test writes the workspace's config); the sandbox test has a
daemon of its own (--sandbox-enabled)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.v1.agent_pb2 import SwitchModeArgs, SwitchModeToolCall
from agent.v1.common_pb2 import RunMode
from agent.v1.files_pb2 import ReadLintsArgs
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon, running_daemon
from tests.polling import eventually, generous
from tests.shared_daemon import client, daemon, space
from tests.workspace_support import replace_call, result_of, write_call
from tools.helix_languages import BadConfig, parse_languages

__all__ = ["client", "daemon", "space"]

pytestmark = pytest.mark.timeout(300)

TOY_SERVER = Path(__file__).resolve().parent / "toy_language_server.py"
# A start of the toy server (Python importing pygls) on a loaded 2-core machine.
SETTLE_SECONDS = 60.0


def helix_config(
    workspace: Path,
    command: str = sys.executable,
    args: tuple[str, ...] = (str(TOY_SERVER),),
    config: dict[str, Any] | None = None,
    environment: dict[str, str] | None = None,
) -> None:
    """Names toy-lint for .toy files in the workspace's .helix/languages.toml (JSON strings and
    arrays are TOML ones)."""
    lines = [
        "[language-server.toy-lint]",
        f"command = {json.dumps(command)}",
        f"args = {json.dumps(list(args))}",
    ]
    if config is not None:
        lines.append(f"config = {{ {_inline(config)} }}")
    if environment is not None:
        lines.append(f"environment = {{ {_inline(environment)} }}")
    lines += [
        "",
        "[[language]]",
        'name = "toy"',
        'file-types = ["toy", { glob = "Toyfile" }]',
        'language-servers = ["toy-lint"]',
    ]
    (workspace / ".helix").mkdir(exist_ok=True)
    (workspace / ".helix" / "languages.toml").write_text("\n".join(lines) + "\n")


def _inline(table: dict[str, Any]) -> str:
    return ", ".join(f"{key} = {json.dumps(value)}" for key, value in table.items())


async def read_lints(
    client: ExecDaemonClient, *paths: str, run_mode: int = 0, agent_id: str = ""
) -> Any:
    call = ToolCall()
    call.read_lints_tool_call.args.CopyFrom(ReadLintsArgs(paths=list(paths)))
    outcome = await client.run(call, agent_id, run_mode=run_mode)
    assert outcome.error is None and outcome.result is not None, outcome
    result = outcome.result.read_lints_tool_call.result
    assert result.WhichOneof("result") == "success", result
    return result.success


async def settled(client: ExecDaemonClient, *paths: str, run_mode: int = 0) -> Any:
    """read_lints once every file was answered (the first call may find the server starting)."""
    deadline = time.monotonic() + generous(SETTLE_SECONDS)
    while (success := await read_lints(client, *paths, run_mode=run_mode)).skipped:
        assert time.monotonic() < deadline, success
    return success


def toy_found(success: Any) -> dict[str, set[tuple[int, str]]]:
    return {
        file.path: {(d.start_line, d.message) for d in file.diagnostics if d.source == "toy-lint"}
        for file in success.files
    }


def skipped(success: Any) -> dict[str, str]:
    return {entry.path: entry.reason for entry in success.skipped}


async def test_a_named_server_lints_its_files_and_answers_after_an_edit(
    client: ExecDaemonClient, space: Path, daemon: RunningDaemon
) -> None:
    path = space / "notes.toy"
    name = f"{space.name}/notes.toy"
    assert (await result_of(client, write_call(path, "fine\nTODO later\n"))).success
    # Without the config no linter covers .toy files.
    (daemon.workspace / ".helix" / "languages.toml").unlink(missing_ok=True)
    assert name in (await read_lints(client, name)).unsupported_paths
    helix_config(daemon.workspace, config={"forbidden": ["TODO", "FIXME"]})
    first = await settled(client, name)
    assert toy_found(first)[name] == {(2, "TODO is forbidden here")}
    assert "toy-lint" in first.linters
    edit = await result_of(client, replace_call(path, "TODO later", "done"))
    assert edit.success.replacements == 1
    assert toy_found(await settled(client, name))[name] == set()
    # The server's config (its initializationOptions) holds: FIXME is forbidden too. No paths:
    # the files the edit tools wrote.
    await result_of(client, replace_call(path, "fine", "FIXME soon"))
    assert toy_found(await settled(client))[name] == {(1, "FIXME is forbidden here")}
    # A glob of file-types: a file named Toyfile, no extension.
    (space / "Toyfile").write_text("a TODO\n")
    toyfile = f"{space.name}/Toyfile"
    assert toy_found(await settled(client, toyfile))[toyfile] == {(1, "TODO is forbidden here")}


async def test_it_runs_without_the_daemons_token_with_the_variables_it_names(
    client: ExecDaemonClient, space: Path, daemon: RunningDaemon
) -> None:
    watched = ["EXEC_DAEMON_AUTH_TOKEN", "TOY_MARK"]
    helix_config(
        daemon.workspace, config={"report_env": watched}, environment={"TOY_MARK": "from-config"}
    )
    (space / "env.toy").write_text("nothing\n")
    name = f"{space.name}/env.toy"
    messages = {message for _, message in toy_found(await settled(client, name))[name]}
    # The server reports its environment (the positive control: its own variable is seen).
    assert messages == {"EXEC_DAEMON_AUTH_TOKEN unset", "TOY_MARK=from-config"}


async def test_a_missing_or_failing_command_leaves_its_files_skipped(
    client: ExecDaemonClient, space: Path, daemon: RunningDaemon
) -> None:
    (space / "a.toy").write_text("TODO\n")
    (space / "ok.json").write_text("{}\n")
    names = [f"{space.name}/a.toy", f"{space.name}/ok.json"]
    helix_config(daemon.workspace, command="no-such-toy-lint-7f3a", args=())
    missing = await read_lints(client, *names)
    assert "no program 'no-such-toy-lint-7f3a'" in skipped(missing)[names[0]]
    assert names[1] in {file.path for file in missing.files}, "the other linters still answer"
    # A program that exits at once (the shell's `false`).
    helix_config(daemon.workspace, command="false", args=())
    failing = await read_lints(client, *names)
    assert skipped(failing)[names[0]].startswith("toy-lint "), failing
    # The same file once the config names the real server: the refusals were not vacuous.
    helix_config(daemon.workspace)
    answered = await settled(client, *names)
    assert toy_found(answered)[names[0]] == {(1, "TODO is forbidden here")}


async def test_a_config_that_is_not_toml_is_reported_and_the_rest_answers(
    client: ExecDaemonClient, space: Path, daemon: RunningDaemon
) -> None:
    (daemon.workspace / ".helix").mkdir(exist_ok=True)
    (daemon.workspace / ".helix" / "languages.toml").write_text("[language-server.toy\n")
    (space / "bad.json").write_text("{\n")
    name = f"{space.name}/bad.json"
    success = await read_lints(client, name)
    assert skipped(success)[".helix/languages.toml"].startswith("not TOML")
    assert [d.source for f in success.files for d in f.diagnostics] == ["json"]


def test_the_helix_file_types_and_server_forms_are_read() -> None:
    languages = parse_languages(
        """
        [language-server.a]
        command = "a-lsp"
        config = { style = { strict = true } }
        environment = { A = "1" }

        [[language]]
        name = "alpha"
        language-id = "alpha-lang"
        file-types = ["al", "Alfile", { glob = "conf/*.cfg" }]
        language-servers = [{ name = "a", except-features = ["format"] }, "pyright"]
        """
    )
    server = languages.servers["a"]
    assert (server.command, server.args, server.environment) == ("a-lsp", (), (("A", "1"),))
    assert server.config == {"style": {"strict": True}}
    covered = {
        path: language.language_id if (language := languages.language_of(path)) else None
        for path in ("x/y.al", "Alfile", "sub/Alfile", "conf/a.cfg", "x.alx", "al")
    }
    assert covered == {
        "x/y.al": "alpha-lang",
        "Alfile": "alpha-lang",
        "sub/Alfile": "alpha-lang",
        "conf/a.cfg": "alpha-lang",
        "x.alx": None,
        "al": "alpha-lang",  # a whole file name matches too, as in Helix
    }
    assert languages.languages[0].servers == ("a", "pyright")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[language-server.a\n", "not TOML"),
        ("[language-server.a]\nargs = []\n", "[language-server.a] has no command"),
        ('[language-server.a]\ncommand = "x"\nargs = "--stdio"\n', "args is not a list"),
        ("[[language]]\nfile-types = []\n", "a [[language]] has no name"),
        ('[[language]]\nname = "n"\nfile-types = [1]\n', "a file type is neither"),
    ],
)
def test_a_config_of_another_shape_says_where(text: str, message: str) -> None:
    with pytest.raises(BadConfig, match=re.escape(message)):
        parse_languages(text)


async def test_a_language_may_list_a_built_in_server_or_an_undefined_one(
    client: ExecDaemonClient, space: Path, daemon: RunningDaemon
) -> None:
    (daemon.workspace / ".helix").mkdir(exist_ok=True)
    (daemon.workspace / ".helix" / "languages.toml").write_text(
        '[[language]]\nname = "shellish"\nfile-types = ["shx"]\n'
        'language-servers = ["bash-language-server"]\n\n'
        '[[language]]\nname = "ghost"\nfile-types = ["gho"]\nlanguage-servers = ["ghost-ls"]\n'
    )
    (space / "run.shx").write_text("#!/bin/bash\nrm -rf $1/*\n")
    (space / "x.gho").write_text("boo\n")
    names = [f"{space.name}/run.shx", f"{space.name}/x.gho"]
    deadline = time.monotonic() + generous(SETTLE_SECONDS)
    while names[0] in skipped(success := await read_lints(client, *names)):
        assert time.monotonic() < deadline, success
    shell = {d.code for f in success.files if f.path == names[0] for d in f.diagnostics}
    assert "SC2115" in shell, success
    assert skipped(success)[names[1]] == (
        "ghost-ls: .helix/languages.toml lists it but defines no [language-server.ghost-ls]"
    )


async def test_a_config_hidden_from_the_agent_is_not_read(
    client: ExecDaemonClient, space: Path, daemon: RunningDaemon
) -> None:
    """Read as the agent's reads are: where it really is, under .cursorignore."""
    helix_config(daemon.workspace)
    (space / "hidden.toy").write_text("TODO\n")
    name = f"{space.name}/hidden.toy"
    ignore = daemon.workspace / ".cursorignore"
    ignore.write_text(".helix/\n")
    try:
        hidden = await read_lints(client, name)
    finally:
        ignore.unlink()
    assert skipped(hidden)[".helix/languages.toml"].startswith("not read: "), hidden
    assert name in hidden.unsupported_paths
    # The same config once nothing hides it: the server answers.
    assert toy_found(await settled(client, name))[name] == {(1, "TODO is forbidden here")}


async def test_outside_run_everything_it_runs_only_in_the_sandbox(
    client: ExecDaemonClient, space: Path, daemon: RunningDaemon
) -> None:
    """The config is the agent's (or the repository's) program: in allowlist mode, as for a
    build tool, only confined; this daemon has no sandbox, so it does not run. So for the
    built-in servers, which run workspace code too (a shell script's: bash-language-server)."""
    helix_config(daemon.workspace)
    (space / "gated.toy").write_text("TODO\n")
    (space / "gated.sh").write_text("#!/bin/bash\nrm -rf $1/*\n")
    names = [f"{space.name}/gated.toy", f"{space.name}/gated.sh"]
    allowlist = await read_lints(client, *names, run_mode=RunMode.RUN_MODE_ALLOWLIST)
    for name, server in zip(names, ("toy-lint", "bash-language-server"), strict=True):
        reason = skipped(allowlist)[name]
        assert reason.startswith(f"{server} cannot run: the sandbox is not available"), reason
    everything = await settled(client, *names, run_mode=RunMode.RUN_MODE_RUN_EVERYTHING)
    assert toy_found(everything)[names[0]] == {(1, "TODO is forbidden here")}
    shell = {d.code for f in everything.files if f.path == names[1] for d in f.diagnostics}
    assert "SC2115" in shell, everything
    # The unconfined servers run_everything started are not lent to an allowlist call.
    again = await read_lints(client, *names, run_mode=RunMode.RUN_MODE_ALLOWLIST)
    assert set(skipped(again)) == set(names), again


async def test_an_agent_in_ask_mode_gets_it_only_confined(
    client: ExecDaemonClient, space: Path, daemon: RunningDaemon
) -> None:
    """An agent whose mode changes nothing may not run the workspace's program unconfined,
    even in run_everything (this daemon has no sandbox, so it does not run for it)."""
    helix_config(daemon.workspace)
    (space / "asked.toy").write_text("TODO\n")
    name = f"{space.name}/asked.toy"
    switch = ToolCall(
        switch_mode_tool_call=SwitchModeToolCall(args=SwitchModeArgs(target_mode_id="ask"))
    )
    switched = await client.run(switch, agent_id="asker")
    assert switched.result is not None
    assert switched.result.switch_mode_tool_call.result.WhichOneof("result") == "success"
    asked = await read_lints(client, name, agent_id="asker")
    assert "cannot run: the sandbox is not available" in skipped(asked)[name]
    # Another agent, in agent mode: the server answers.
    assert toy_found(await settled(client, name))[name] == {(1, "TODO is forbidden here")}


async def test_a_killed_named_server_is_restarted(
    client: ExecDaemonClient, space: Path, daemon: RunningDaemon
) -> None:
    helix_config(daemon.workspace)
    (space / "k.toy").write_text("TODO\n")
    name = f"{space.name}/k.toy"
    await settled(client, name)
    [old] = daemon.children_running(str(TOY_SERVER))
    os.kill(old, signal.SIGKILL)
    # Restarted in the background (it was used just now), then it answers for a new text.
    await eventually(
        lambda: [pid for pid in daemon.children_running(str(TOY_SERVER)) if pid != old],
        what="toy-lint started again",
    )
    (space / "k.toy").write_text("fine\nTODO\n")
    answered = await settled(client, name)
    assert toy_found(answered)[name] == {(2, "TODO is forbidden here")}


# ---------------------------------------------------------------------------------------------
# Under the sandbox: the named server runs confined, as the agent's commands do.


async def test_under_the_sandbox_it_writes_in_the_workspace_only(
    sandboxed_client: tuple[RunningDaemon, ExecDaemonClient], escape_target: Path
) -> None:
    running, client = sandboxed_client
    workspace = running.workspace
    (workspace / "w.toy").write_text("TODO\n")
    inside = workspace / "written-by-server.txt"
    helix_config(workspace, config={"write_to": str(inside)})
    success = await settled(client, "w.toy")
    assert (1, "write: ok") in toy_found(success)["w.toy"], "the positive control"
    assert inside.read_text() == "escaped"
    helix_config(workspace, config={"write_to": str(escape_target)})
    success = await settled(client, "w.toy")
    outcomes = {message for _, message in toy_found(success)["w.toy"]} - {"TODO is forbidden here"}
    assert outcomes in ({"write: EACCES"}, {"write: EROFS"}, {"write: EPERM"}), outcomes
    assert not await asyncio.to_thread(escape_target.exists)


# ---------------------------------------------------------------------------------------------
# The memory cap and the idle stop, on a daemon of their own (the smallest cap, the shortest idle
# time the flags allow).


@pytest.fixture
async def capped(tmp_path: Path) -> AsyncIterator[tuple[RunningDaemon, ExecDaemonClient]]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    flags = ("--language-server-memory-mb", "64", "--language-server-idle-minutes", "0.1")
    with running_daemon(workspace, tmp_path / "state", *flags) as running:
        async with running.client() as connected:
            yield running, connected


async def test_a_named_server_is_memory_capped_and_stopped_when_idle(
    capped: tuple[RunningDaemon, ExecDaemonClient],
) -> None:
    running, client = capped
    (running.workspace / "m.toy").write_text("TODO\n")
    helix_config(running.workspace)
    assert toy_found(await settled(client, "m.toy"))["m.toy"] == {(1, "TODO is forbidden here")}
    # Idle for 0.1 minutes: stopped; the next call starts it again.
    await eventually(
        lambda: not running.children_running(str(TOY_SERVER)), seconds=60, what="the idle stop"
    )
    assert toy_found(await settled(client, "m.toy"))["m.toy"] == {(1, "TODO is forbidden here")}
    # Past the cap (it holds 100 MB): stopped, its files skipped with the reason.
    helix_config(running.workspace, config={"hold_mb": 100})
    reasons: list[str] = []
    deadline = time.monotonic() + generous(SETTLE_SECONDS)
    while not any("more than 64 MB" in reason for reason in reasons):
        assert time.monotonic() < deadline, reasons[-3:]
        reasons += skipped(await read_lints(client, "m.toy")).values()
    assert all(reason.startswith("toy-lint") for reason in reasons), reasons
