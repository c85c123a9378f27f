"""Package managers in the sandbox (`--sandbox-enabled`): a real `npm install` and `pip install`
of local packages work confined, their caches are writable and shared by sandboxed commands,
and neither cache mode opens a way to what the daemon trusts (rc files, `.ssh`, cargo's config).
sandbox/caches.py; sandbox/README.md ("Build caches")."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.v1.shell_pb2 import SandboxPolicy, ShellResult
from exec_daemon.client import ExecDaemonClient
from tests import shell_calls
from tests.daemon_process import RunningDaemon, running_daemon
from tests.shell_calls import printed

pytestmark = pytest.mark.timeout(120)

RW = SandboxPolicy(type=SandboxPolicy.TYPE_WORKSPACE_READWRITE)
NPM = shutil.which("npm")

# The interpreter itself, not a version manager's shim (pyenv's rehashes its shims folder after
# a pip install, which a sandbox rightly cannot write).
PYTHON = sys.executable


def home_outside_the_temp_folders() -> Path:
    """Like a real home, read-only inside the sandbox but for what is granted (sandboxes may
    write the temp folders, so a home under /tmp would prove nothing)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to make a home outside the temp folders (/opt)")
    return Path(tempfile.mkdtemp(prefix="exec-daemon-caches-home-", dir="/opt"))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("build-caches")


@pytest.fixture(scope="module")
def module_home() -> Iterator[Path]:
    path = home_outside_the_temp_folders()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon(root: Path, module_home: Path) -> Iterator[RunningDaemon]:
    """A sandboxing daemon whose HOME (and so its agents' home) is a test folder."""
    home, workspace = module_home, root / "workspace"
    workspace.mkdir()
    (home / ".bashrc").write_text("# the user's\n")
    caches = ["--sandbox-build-cache-folder", str(root / "caches")]
    env = {"HOME": str(home), "XDG_CACHE_HOME": "", "npm_config_cache": "", "PIP_CACHE_DIR": ""}
    with running_daemon(workspace, root / "state", "--sandbox-enabled", *caches, env=env) as d:
        yield d


@pytest.fixture
async def client(daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with daemon.client() as connected:
        yield connected


async def shell(client: ExecDaemonClient, command: str, agent: str = "caches") -> ShellResult:
    return await shell_calls.shell(
        client, command, agent, requested_sandbox_policy=RW, timeout=90_000
    )


def succeeded(result: ShellResult) -> str:
    assert result.WhichOneof("result") == "success", printed(result)
    assert result.sandbox_policy.type == SandboxPolicy.TYPE_WORKSPACE_READWRITE
    return printed(result)


def local_npm_package(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps({"name": "greeter", "version": "1.0.0"}))
    (folder / "index.js").write_text("module.exports = () => 'hello from greeter';\n")
    return folder


def local_wheel(folder: Path) -> Path:
    """A minimal pure-Python wheel (no build step: installing it needs no network)."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / "greeter-1.0-py3-none-any.whl"
    files = {
        "greeter.py": b"def greet():\n    return 'hello from greeter'\n",
        "greeter-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: greeter\nVersion: 1.0\n",
        "greeter-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for name, data in files.items()
    ]
    files["greeter-1.0.dist-info/RECORD"] = (
        "\n".join([*record, "greeter-1.0.dist-info/RECORD,,"]) + "\n"
    ).encode()
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


@pytest.mark.skipif(NPM is None, reason="needs npm")
async def test_npm_install_of_a_local_package_works_sandboxed(
    client: ExecDaemonClient, daemon: RunningDaemon, root: Path
) -> None:
    package = local_npm_package(daemon.workspace / "greeter")
    app = daemon.workspace / "app"
    app.mkdir()
    (app / "package.json").write_text(json.dumps({"name": "app", "version": "1.0.0"}))
    packed = succeeded(await shell(client, f"cd {package} && npm pack --silent"))
    tarball = package / packed.strip().splitlines()[-1]
    installed = await shell(
        client,
        f"cd {app} && npm install --offline --no-audit --no-fund {tarball} && "
        "node -e \"console.log(require('greeter')())\"",
    )
    assert "hello from greeter" in succeeded(installed)
    # The cache is the sandboxes' own, and the next sandboxed command (another agent, another
    # sandbox) finds what the first one put there.
    listed = await shell(client, "echo $npm_config_cache; ls $npm_config_cache", agent="second")
    assert succeeded(listed).splitlines()[0] == str(root / "caches" / "npm")
    assert "_cacache" in succeeded(listed)


async def test_pip_install_of_a_local_package_works_sandboxed(
    client: ExecDaemonClient, daemon: RunningDaemon, root: Path
) -> None:
    wheel = local_wheel(daemon.workspace / "dist")
    target = daemon.workspace / "site"
    installed = await shell(
        client,
        f"{PYTHON} -m pip install --no-index --target {target} {wheel} && "
        f"PYTHONPATH={target} {PYTHON} -c 'import greeter; print(greeter.greet())' && "
        f"{PYTHON} -m pip cache dir",
    )
    text = succeeded(installed)
    assert "hello from greeter" in text
    assert str(root / "caches" / "pip") in text
    # pip found its cache writable (it says so, and turns caching off, when it is not).
    assert "not writable" not in text and "caching" not in text.lower()


async def test_every_tool_gets_a_cache_in_the_shared_folder(
    client: ExecDaemonClient, root: Path
) -> None:
    names = ("npm_config_cache", "PIP_CACHE_DIR", "UV_CACHE_DIR", "CARGO_HOME", "GOMODCACHE",
             "GOCACHE", "GRADLE_USER_HOME")  # fmt: skip
    script = "; ".join(f'echo "{name}=${name}"; mkdir -p "${name}/probe"' for name in names)
    seen = dict(line.split("=", 1) for line in succeeded(await shell(client, script)).split())
    for name in names:
        assert Path(seen[name]).parent in (root / "caches", root / "caches" / "go"), seen
        assert (Path(seen[name]) / "probe").is_dir()


async def test_a_sandboxed_command_cannot_swap_the_cache_folder_for_a_way_home(
    client: ExecDaemonClient, root: Path, module_home: Path
) -> None:
    """The cache folder is pinned while a sandbox runs: it cannot be renamed away and replaced
    by a symlink into home (which would make home writable to the next sandbox)."""
    home = module_home

    def swap(folder: Path) -> str:
        moved, link = (
            folder.with_name(f"{folder.name}.moved"),
            folder.with_name(f"{folder.name}-link"),
        )
        return f"mv {folder} {moved} 2>&1; ln -s {home} {link} && mv -T {link} {folder} 2>&1; "

    # The positive control: the same swap of a folder beside it, which nothing pins, works.
    decoy = root / "decoy"
    decoy.mkdir()
    await shell(client, swap(root / "caches") + swap(decoy) + f"echo owned >> {home / '.bashrc'}")
    try:
        assert decoy.readlink() == home
    finally:
        decoy.unlink(missing_ok=True)
    assert (root / "caches").is_dir() and not (root / "caches").is_symlink()
    assert (home / ".bashrc").read_text() == "# the user's\n"


async def test_a_cache_folder_replaced_from_outside_is_not_granted(
    tmp_path: Path, home: Path
) -> None:
    """Swapped between commands by something unconfined: the next sandbox gets no caches (a
    note says why) rather than write access to where the symlink leads."""
    workspace, caches = tmp_path / "workspace", tmp_path / "caches"
    workspace.mkdir()
    (home / ".bashrc").write_text("# the user's\n")
    args = ["--sandbox-enabled", "--sandbox-build-cache-folder", str(caches)]
    with running_daemon(workspace, tmp_path / "state", *args, env={"HOME": str(home)}) as own:
        async with own.client() as connected:
            assert succeeded(await shell(connected, "true")) is not None
            caches.rename(tmp_path / "caches.old")
            caches.symlink_to(home)
            # Another agent: a new sandbox (a session's lives on, its own mounts unchanged).
            result = await shell(
                connected, "echo owned >> $npm_config_cache/../.bashrc; env", agent="next"
            )
    notes = list(result.sandbox_policy.notes)
    assert any("build caches are off" in note for note in notes), notes
    assert "npm_config_cache" not in printed(result)
    assert (home / ".bashrc").read_text() == "# the user's\n"


@pytest.fixture
def home() -> Iterator[Path]:
    path = home_outside_the_temp_folders()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def shared_daemon(tmp_path: Path, home: Path, **env: str) -> Any:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / ".cursor").mkdir()
    (workspace / ".cursor" / "sandbox.json").write_text('{"enableSharedBuildCache": true}')
    args = ["--sandbox-enabled", "--sandbox-build-cache-folder", str(tmp_path / "caches")]
    env = {"HOME": str(home), "XDG_CACHE_HOME": "", "npm_config_cache": "", "GOPATH": "", **env}
    return running_daemon(workspace, tmp_path / "state", *args, env=env)


async def test_shared_caches_are_homes_own_cache_folders_only(tmp_path: Path, home: Path) -> None:
    (home / ".cargo").mkdir(parents=True)
    (home / ".cargo" / "config.toml").write_text("# the user's\n")
    script = (
        "touch ~/.npm/a ~/.cache/pip/a ~/.cargo/registry/a ~/go/pkg/mod/a ~/.gradle/caches/a && "
        "echo cache-ok; echo x >> ~/.cargo/config.toml; mkdir ~/.gradle/init.d; "
        "echo vars=${npm_config_cache:-unset}"
    )
    with shared_daemon(tmp_path, home) as own:
        async with own.client() as connected:
            result = await shell(connected, script)
    text = printed(result)
    assert "cache-ok" in text and "vars=unset" in text
    assert (home / ".npm" / "a").exists() and (home / ".cargo" / "registry" / "a").exists()
    assert (home / ".cargo" / "config.toml").read_text() == "# the user's\n"
    assert not (home / ".gradle" / "init.d").exists()


@pytest.mark.parametrize(
    ("link", "target"),
    [
        (".npm", "."),  # the cache folder is home itself
        (".cache", ".ssh"),  # a cache folder's parent leads into a protected folder
    ],
)
async def test_a_shared_cache_folder_leading_to_protected_files_is_refused(
    tmp_path: Path, home: Path, link: str, target: str
) -> None:
    (home / ".ssh").mkdir(parents=True)
    (home / ".bashrc").write_text("# the user's\n")
    (home / link).symlink_to(home / target if target != "." else home)
    script = (
        "echo owned >> ~/.npm/../.bashrc; echo owned > ~/.ssh/pip; "
        "echo owned > ~/.cache/pip/x; true"
    )
    with shared_daemon(tmp_path, home) as own:
        async with own.client() as connected:
            result = await shell(connected, script)
    notes = list(result.sandbox_policy.notes)
    assert any("is not writable here: it resolves to" in note for note in notes), notes
    assert (home / ".bashrc").read_text() == "# the user's\n"
    assert os.listdir(home / ".ssh") == []


async def test_shared_caches_do_not_follow_the_variables_the_agent_can_set(
    tmp_path: Path, home: Path
) -> None:
    """A cache variable naming a folder on PATH does not make it writable."""
    (home / ".local" / "bin").mkdir(parents=True)
    on_path = home / ".local" / "bin"
    env = {"npm_config_cache": str(on_path), "XDG_CACHE_HOME": str(on_path)}
    with shared_daemon(tmp_path, home, **env) as own:
        async with own.client() as connected:
            result = await shell(connected, f"touch {on_path}/git ~/.npm/ok; ls ~/.npm")
    assert "ok" in printed(result)
    assert not (on_path / "git").exists()


def test_enable_shared_build_cache_must_be_a_boolean() -> None:
    from sandbox.policy import SandboxRejected, parse_config

    assert parse_config('{"enableSharedBuildCache": true}', "x").shared_build_cache is True
    with pytest.raises(SandboxRejected, match="must be true or false"):
        parse_config('{"enableSharedBuildCache": "yes"}', "x")
