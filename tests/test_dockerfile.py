"""The VM image's Dockerfile, checked statically (no Docker engine here to build it).

It must install every Debian package scripts/setup installs, run scripts/setup on the repo at
/exec-daemon so the entry point exists, expose the CLI's default ports, run as a non-root user
and health-check with `exec-daemon ping`.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import click

from exec_daemon.cli import ping, serve
from exec_daemon.kernel.config import DEFAULT_PORT, DEFAULT_PTY_WEBSOCKET_PORT

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile"
ENTRYPOINT = "/exec-daemon/.venv/bin/exec-daemon"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order; continuation lines joined, comment lines dropped."""
    found: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        keyword, _, arguments = pending.strip().partition(" ")
        found.append((keyword.upper(), arguments.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    return found


def arguments_of(keyword: str) -> list[str]:
    return [arguments for name, arguments in instructions() if name == keyword]


def exec_form(keyword: str) -> list[str]:
    (arguments,) = arguments_of(keyword)
    parsed = json.loads(arguments)
    assert isinstance(parsed, list), f"{keyword} must be in exec (JSON) form"
    return parsed


def shell_commands() -> list[list[str]]:
    """Every command of every RUN, split on && and ;, as words."""
    commands = []
    for run in arguments_of("RUN"):
        for part in re.split(r"&&|;", run):
            words = shlex.split(part)
            if words:
                commands.append(words)
    return commands


def setup_apt_packages() -> set[str]:
    setup = (REPO / "scripts" / "setup").read_text()
    block = setup[setup.index("declare -A APT_PACKAGES=(") : setup.index("\n)\n")]
    packages = set(re.findall(r"^\s*\[[^\]]+\]=(\S+)", block, re.MULTILINE))
    assert {"git", "nodejs", "gcc", "libseccomp-dev"} <= packages, "cannot read APT_PACKAGES"
    # Installed by setup when `python3 -m venv` cannot work.
    assert "python3-venv" in setup
    return packages | {"python3-venv"}


def image_apt_packages() -> set[str]:
    packages: set[str] = set()
    for words in shell_commands():
        if words[:2] == ["apt-get", "install"]:
            packages |= {word for word in words[2:] if not word.startswith("-")}
    return packages


def test_the_image_installs_every_debian_package_of_scripts_setup() -> None:
    missing = setup_apt_packages() - image_apt_packages()
    assert not missing, f"add {sorted(missing)} to the Dockerfile's apt-get install"


def test_the_image_is_debian_bookworm() -> None:
    (base,) = arguments_of("FROM")
    assert "bookworm" in base
    # python3-tk in setup is Debian's (/usr/lib/python3.11/tkinter): the venv must use that Python.
    assert "python3" in image_apt_packages()


def test_scripts_setup_builds_the_entry_point_at_exec_daemon() -> None:
    order = instructions()
    copy = order.index(("COPY", ". /exec-daemon"))
    workdir = order.index(("WORKDIR", "/exec-daemon"), copy)
    setup_run = next(
        index
        for index, (name, arguments) in enumerate(order)
        if name == "RUN" and arguments.startswith("./scripts/setup")
    )
    assert copy < workdir < setup_run
    # scripts/setup makes .venv in the repo, and the project's console script is exec-daemon.
    assert "python3 -m venv .venv" in (REPO / "scripts" / "setup").read_text()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["exec-daemon"] == "exec_daemon.cli:main"
    assert exec_form("ENTRYPOINT") == [ENTRYPOINT]
    assert ENTRYPOINT.removeprefix("/exec-daemon/") == ".venv/bin/exec-daemon"


def test_a_local_venv_and_node_modules_are_not_copied_in() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".venv/", "node_modules/"} <= set(ignored)


def parse_command_line(command: click.Command, args: list[str]) -> dict[str, object]:
    with command.make_context(command.name or "", args) as context:
        return dict(context.params)


def test_cmd_serves_workspace_on_the_exposed_ports() -> None:
    cmd = exec_form("CMD")
    assert cmd[0] == "serve"
    params = parse_command_line(serve, [*cmd[1:], "--auth-token", "t"])
    assert str(params["workspace"]) == "/workspace"
    exposed = {int(port) for ports in arguments_of("EXPOSE") for port in ports.split()}
    assert exposed == {params["port"], params["pty_websocket_port"]}
    assert exposed == {DEFAULT_PORT, DEFAULT_PTY_WEBSOCKET_PORT}
    assert any(words[:3] == ["mkdir", "-p", "/workspace"] for words in shell_commands())


def test_runs_as_the_non_root_user_that_owns_the_workspace() -> None:
    (user,) = arguments_of("USER")
    assert user not in ("root", "0")
    commands = shell_commands()
    assert any(words[0] == "useradd" and words[-1] == user for words in commands)
    assert any(
        words[:2] == ["chown", f"{user}:{user}"] and "/workspace" in words for words in commands
    )


def test_healthcheck_pings_the_daemon_with_the_cli() -> None:
    (healthcheck,) = arguments_of("HEALTHCHECK")
    command = json.loads(healthcheck[healthcheck.index("CMD") + len("CMD") :])
    assert command[:2] == [ENTRYPOINT, "ping"]
    # The token comes from EXEC_DAEMON_AUTH_TOKEN, as for serve; the default URL is the RPC port.
    params = parse_command_line(ping, [*command[2:], "--token", "t"])
    assert params["url"] == f"http://127.0.0.1:{DEFAULT_PORT}"
    timeout = re.search(r"--timeout=(\d+)s", healthcheck)
    assert timeout is not None and float(params["timeout"]) < int(timeout.group(1))  # type: ignore[arg-type]
