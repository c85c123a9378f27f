"""`exec-daemon serve`: the seed's flags, the token sources, log levels, not-yet-built flags."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from exec_daemon.cli import main, serve
from scripts.flag_table import README, with_table
from tests.daemon_process import free_port, running_daemon

SEED_FLAGS = {
    "--port": "8080", "--pty-websocket-port": "8081", "--auth-token": None, "--log-level": "info",
    "--rg-path": "rg", "--browser-enabled": None, "--cursor-self-control-enabled": None,
    "--mcp-config": None, "--mcp-oauth-server-urls": None, "--http-mcp-tools-file": None,
    "--cloud-rules-enabled": None, "--computer-use-enabled": None,
    "--secret-redaction-enabled": None, "--chrome-executable-path": None,
    "--record-screen-enabled": None, "--generate-image-enabled": None, "--sandbox-enabled": None,
    "--sandbox-helper-path": None, "--claude-md-enabled": "claude-md-enabled", "--no-claude-md-enabled": None,
    "--trace-endpoint": None, "--trace-auth-token": None, "--ghost-mode": "True",
    "--trace-insecure": None, "--host": None, "--workspace": None, "--max-message-bytes": None,
}  # fmt: skip
# (click names the default of an on/off flag pair by its flag: "claude-md-enabled" is True.)


def test_serve_accepts_every_flag_of_the_seed_with_its_default() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for flag, default in SEED_FLAGS.items():
        assert re.search(rf"{re.escape(flag)}\b", text), flag
        if default is not None:
            option = text[text.index(flag) :]
            assert f"default: {default}" in option.split("--", 2)[1] + option[:300], flag
    assert "-p, --port" in text


def test_serve_without_a_token_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "exec_daemon", "serve", "--workspace", str(tmp_path)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=30,
    )
    assert result.returncode == 2
    assert "--auth-token" in result.stderr


async def test_token_from_the_environment_and_deprecated_flags_are_said_once(
    workspace: Path, tmp_path: Path
) -> None:
    with running_daemon(
        workspace, tmp_path / "state", "--cursor-self-control-enabled", "--log-level", "info"
    ) as daemon:
        async with daemon.client() as client:
            assert (await client.ping()).workspace == str(workspace)
        assert daemon.stop() == 0  # the whole log is written
        log = daemon.log()
    assert log.count("--cursor-self-control-enabled is deprecated and does nothing") == 1
    assert "not built" not in log
    # CLAUDE.md loading (on by default) is built (tools/agent_context.py): no warning for it.
    assert "CLAUDE.md" not in log
    assert "DEBUG" not in log


async def test_without_claude_md_nothing_is_said_of_it_and_the_browser_flag_names_the_image(
    workspace: Path, tmp_path: Path
) -> None:
    flags = ("--no-claude-md-enabled", "--browser-enabled", "--log-level", "info")
    with running_daemon(workspace, tmp_path / "state", *flags) as daemon:
        async with daemon.client() as client:
            await client.ping()
        log = daemon.log()
    assert "CLAUDE.md" not in log
    assert log.count("--browser-enabled: the VM image's init starts the browser") == 1
    assert "--browser-enabled is accepted but" not in log


async def test_log_level_error_hides_info(workspace: Path, tmp_path: Path) -> None:
    with running_daemon(workspace, tmp_path / "state", "--log-level", "error") as daemon:
        async with daemon.client() as client:
            await client.ping()
        log = daemon.log()
    assert " INFO " not in log and " DEBUG " not in log


async def test_ping_exits_0_when_the_daemon_answers_and_1_otherwise(
    workspace: Path, tmp_path: Path
) -> None:
    def ping(url: str, token: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "exec_daemon", "ping", "--url", url, "--timeout", "5"],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "EXEC_DAEMON_AUTH_TOKEN": token},
            timeout=30,
        )

    with running_daemon(workspace, tmp_path / "state") as daemon:
        answered = ping(daemon.url, daemon.token)
        without_scheme = ping(f"127.0.0.1:{daemon.port}", daemon.token)
        refused = ping(daemon.url, "wrong-token")
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["workspace"] == str(workspace)
    assert without_scheme.returncode == 0, without_scheme.stderr
    assert refused.returncode == 1
    assert "unauthenticated" in refused.stderr.lower()
    stopped = ping(daemon.url, daemon.token)
    assert stopped.returncode == 1
    assert daemon.url in stopped.stderr


def test_help_names_every_command_whole_and_every_serve_option_says_what_it_does() -> None:
    overview = CliRunner().invoke(main, ["--help"], terminal_width=80).output
    summaries = dict(
        line.split(None, 1) for line in overview.split("Commands:")[1].splitlines() if line.strip()
    )
    assert set(summaries) == {
        "attach",
        "generate-token",
        "install",
        "ping",
        "record",
        "run",
        "serve",
    }
    assert not any(summary.rstrip().endswith("...") for summary in summaries.values()), summaries
    serve_help = CliRunner().invoke(main, ["serve", "--help"], terminal_width=200).output
    options = re.findall(r"^  (-\S.*?)(?:\s{2,}(.*))?$", serve_help, re.MULTILINE)
    undocumented = [
        flags for flags, text in options if not re.sub(r"\[default: .*?\]", "", text).strip()
    ]
    assert undocumented == [], undocumented
    text = " ".join(serve_help.split())
    assert "--mcp-config JSON|PATH" in text and "path" in text.split("--mcp-config", 1)[1][:200]
    insecure = text.split("--trace-insecure", 1)[1][:200]
    assert "plaintext" in insecure and "Skip TLS verification" not in insecure


def test_serve_listens_on_loopback_unless_told_otherwise() -> None:
    with serve.make_context("serve", ["--auth-token", "t"]) as context:
        assert context.params["host"] == "127.0.0.1"


def test_a_port_in_use_ends_the_start_with_one_line_before_anything_is_served(
    tmp_path: Path,
) -> None:
    def serve_on(port: int, pty_port: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "exec_daemon", "serve", "--workspace", str(tmp_path),
             "--port", str(port), "--pty-websocket-port", str(pty_port),
             "--terminals-folder", str(tmp_path / "terminals"), "--no-claude-md-enabled"],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "EXEC_DAEMON_AUTH_TOKEN": "t"},
            timeout=30,
        )  # fmt: skip

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        rpc_taken = serve_on(busy, free_port())
        pty_taken = serve_on(free_port(), busy)
    same = free_port()
    twice = serve_on(same, same)
    for result, port, flag in (
        (rpc_taken, busy, "--port"),
        (pty_taken, busy, "--pty-websocket-port"),
        (twice, same, "--pty-websocket-port"),
    ):
        assert result.returncode == 1
        assert result.stderr == (
            f"Error: cannot listen on 127.0.0.1:{port} ({flag}): Address already in use\n"
        )


def test_a_workspace_that_is_no_folder_ends_the_start_with_one_line(tmp_path: Path) -> None:
    def serve_in(workspace: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "exec_daemon", "serve", "--workspace", str(workspace),
             "--port", str(free_port()), "--pty-websocket-port", str(free_port()),
             "--terminals-folder", str(tmp_path / "terminals"), "--no-claude-md-enabled"],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "EXEC_DAEMON_AUTH_TOKEN": "t"},
            timeout=30,
        )  # fmt: skip

    a_file = tmp_path / "a-file"
    a_file.write_text("")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    for workspace, why in (
        (Path("/does/not/exist"), "does not exist"),
        (tmp_path / "missing" / "deeper", "does not exist"),
        (a_file, "is not a folder"),
        (dangling, "does not exist"),
    ):
        result = serve_in(workspace)
        assert result.returncode == 1, (workspace, result.stderr[-2000:])
        assert result.stderr == f"Error: --workspace {workspace} {why}\n", result.stderr[-2000:]
    install = subprocess.run(
        [sys.executable, "-m", "exec_daemon", "install", "--workspace", "/does/not/exist"],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, timeout=30,
    )  # fmt: skip
    assert install.returncode == 1
    assert install.stderr == "Error: --workspace /does/not/exist does not exist\n", install.stderr


def test_mcp_config_takes_json_text_or_a_file_read_once_at_start(tmp_path: Path) -> None:
    def mcp_config(value: str) -> object:
        with serve.make_context("serve", ["--auth-token", "t", "--mcp-config", value]) as context:
            return context.params["mcp_config"]

    path = tmp_path / "servers.json"
    path.write_text('{"mcpServers": {"f": {"command": "from-file"}}} // the operator\'s\n')
    assert mcp_config(str(path)) == path.read_text()
    assert mcp_config(' {"x": {"command": "inline"}}') == ' {"x": {"command": "inline"}}'
    missing = CliRunner().invoke(
        main, ["serve", "--auth-token", "t", "--mcp-config", str(tmp_path / "nope.json")]
    )
    assert missing.exit_code == 2
    assert (
        f"Invalid value for '--mcp-config': neither JSON text (it would start with '{{') nor a "
        f"readable file: {tmp_path / 'nope.json'}: No such file or directory"
    ) in " ".join(missing.output.split())


def test_the_readmes_flag_table_is_the_clis_own() -> None:
    readme = README.read_text()
    assert "`--record-max-bytes`" in readme and "`--wait-for-init`" in readme
    assert with_table(readme) == readme, (
        "README.md's table of serve flags is stale: run .venv/bin/python scripts/flag_table.py"
    )
