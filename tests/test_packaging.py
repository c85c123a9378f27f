"""A non-editable install works: the wheel built from the tracked tree (offline, no build
isolation) holds every package, the protos, the sandbox helper's source, the web terminal's
files and sem_search's static model, and the daemon installed from it serves RPCs and the web
terminal's page. Installed into an empty venv (not layered on the project's) from the package
registries alone, every dependency a binary wheel (`--only-binary :all:`), it serves from that
venv and sem_search ranks by meaning with the model the wheel carries."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import sysconfig
import time
import urllib.request
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon_process import RunningDaemon, running_daemon
from tests.source_tree import ROOT, copy_tracked_files
from tests.test_sem_search import CORPUS, QUERIES, paths, search, write_corpus
from tools.static_embeddings import STATIC_MODEL_FOLDER, VECTORS_FILE, StaticEmbedder

ROOTS = {"exec_daemon": ROOT / "exec_daemon", "tools": ROOT / "tools", "sandbox": ROOT / "sandbox"}
ROOTS["agent"] = ROOT / "proto" / "agent"
WEB_FILES = [
    "exec_daemon/web/index.html",
    "exec_daemon/web/terminal.js",
    "exec_daemon/web/vendor/@xterm/xterm/lib/xterm.mjs",
    "exec_daemon/web/vendor/@xterm/xterm/LICENSE",
]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    assert (STATIC_MODEL_FOLDER / VECTORS_FILE).is_file(), "scripts/setup derives the model"
    source = copy_tracked_files(work / "source", also=STATIC_MODEL_FOLDER.iterdir())
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index",
         "--no-build-isolation", "-q",
         "-w", str(work / "dist"), str(source)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    warnings = [line for line in build.stderr.splitlines() if "warning" in line.lower()]
    assert warnings == [], build.stderr
    (found,) = (work / "dist").glob("exec_daemon-*.whl")
    return found


def source_modules() -> set[str]:
    """Every Python module and package data file the tree's packages hold, as wheel paths."""
    names = set()
    for top, folder in ROOTS.items():
        for path in folder.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".md":
                names.add(f"{top}/{path.relative_to(folder).as_posix()}")
    return names


def test_the_wheel_holds_every_module_and_the_web_files(wheel: Path) -> None:
    contents = set(zipfile.ZipFile(wheel).namelist())
    missing = source_modules() - contents
    assert missing == set(), f"the wheel lacks {sorted(missing)}"
    assert "tools/shell/__init__.py" in contents
    assert {*WEB_FILES, "sandbox/helper.c", "agent/v1/shell.proto"} <= contents
    assert {f"tools/static_model/{VECTORS_FILE}", "tools/static_model/tokenizer.json"} <= contents
    assert not any(name.startswith(("tests/", "scripts/", "node_modules/")) for name in contents)


def layered_venv(folder: Path) -> Path:
    """A venv whose own site-packages come first, then the test venv's third-party packages
    (not its editable exec-daemon, whose .pth hook only runs in the venv it is installed in)."""
    venv.EnvBuilder(with_pip=False).create(folder)
    python = folder / "bin" / "python"
    own_site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(own_site) / "layered.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def http_get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read()


def test_the_installed_wheel_serves_rpcs_and_the_web_terminal(wheel: Path, tmp_path: Path) -> None:
    python = layered_venv(tmp_path / "venv")
    subprocess.run(
        # --ignore-installed: the layered venv sees the test venv's editable exec-daemon.
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         "--no-index", "--ignore-installed", str(wheel)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    where = subprocess.run(
        [python, "-c", "import exec_daemon, tools.shell; print(exec_daemon.__file__)"],
        capture_output=True, text=True, check=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"},
    ).stdout  # fmt: skip
    assert where.startswith(str(tmp_path / "venv")), where
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    command = [str(tmp_path / "venv" / "bin" / "exec-daemon")]
    # PYTHONPATH empty: the tree the tests run from must not be what answers.
    with running_daemon(
        workspace, tmp_path / "state", argv=command, env={"PYTHONPATH": ""}
    ) as daemon:
        assert_serves(daemon, command)


def assert_serves(daemon: RunningDaemon, command: list[str]) -> None:
    ping = subprocess.run(
        [*command, "ping", "--url", daemon.url, "--token", daemon.token],
        capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert ping.returncode == 0, ping.stderr
    assert isinstance(json.loads(ping.stdout), dict)
    page = f"http://127.0.0.1:{daemon.pty_port}"
    status, body = http_get(f"{page}/")
    assert status == 200 and b"/assets/terminal.js" in body
    status, body = http_get(f"{page}/assets/xterm.mjs")
    assert status == 200 and body == (ROOT / WEB_FILES[2]).read_bytes()
    # Reflection reads the commented descriptors from the installed package.
    described = subprocess.run(
        [Path(sys.executable).parent / "grpcurl", "-plaintext", "-H",
         f"authorization: Bearer {daemon.token}", f"127.0.0.1:{daemon.port}",
         "describe", "agent.v1.ShellArgs"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert "// Milliseconds" in described.stdout, described.stderr
    assert "Traceback" not in daemon.log()


# An empty venv, the package registries only.

PIP_SECONDS = 480


@pytest.fixture(scope="module")
def empty_venv_bin(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty venv with the wheel installed as a user would (`pip install <wheel>`, pip's
    cache reused; not compiled to bytecode, which halves the time); its bin folder. Every
    dependency must come as a binary wheel: an sdist (ripgrep's, which needs the crates
    registry) fails to build or shows in pip's report."""
    work = tmp_path_factory.mktemp("empty-venv")
    folder = work / "venv"
    venv.EnvBuilder(with_pip=False).create(folder)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(folder / "bin" / "python"), "install",
         "-q", "--no-compile", "--report", str(work / "report.json"), str(wheel)],
        capture_output=True, text=True, timeout=PIP_SECONDS,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    installed = json.loads((work / "report.json").read_text())["install"]
    sources = {item["metadata"]["name"]: item["download_info"]["url"] for item in installed}
    assert [name for name, url in sources.items() if not url.endswith(".whl")] == [], sources
    print(f"{wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB, installed with its dependencies "
          f"into an empty venv in {time.monotonic() - started:.1f} s")  # fmt: skip
    return folder / "bin"


@pytest.fixture(scope="module")
def installed_daemon(
    empty_venv_bin: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("installed")
    workspace = root / "workspace"
    workspace.mkdir()
    write_corpus(workspace, CORPUS)
    # Nothing of the checkout or the project's venv: the code, rg and the model are the venv's.
    env = {"PATH": f"{empty_venv_bin}:/usr/bin:/bin", "PYTHONPATH": "", "VIRTUAL_ENV": ""}
    command = [str(empty_venv_bin / "exec-daemon")]
    with running_daemon(workspace, root / "state", env=env, argv=command) as daemon:
        yield daemon


@pytest.mark.timeout(PIP_SECONDS + 120)
def test_the_wheel_installed_into_an_empty_venv_runs_from_it(
    empty_venv_bin: Path, installed_daemon: RunningDaemon
) -> None:
    site = next((empty_venv_bin.parent / "lib").glob("python3*/site-packages"))
    for package in ("exec_daemon", "tools", "sandbox", "agent"):
        assert (site / package).is_dir(), package
    assert (empty_venv_bin / "rg").is_file()  # PyPI ripgrep's wheel
    argv = Path(f"/proc/{installed_daemon.process.pid}/cmdline").read_bytes().split(b"\0")
    assert any(part.startswith(os.fsencode(empty_venv_bin)) for part in argv), argv


@pytest.mark.timeout(PIP_SECONDS + 120)
async def test_the_wheel_installed_into_an_empty_venv_searches_by_meaning(
    installed_daemon: RunningDaemon,
) -> None:
    async with installed_daemon.client() as client:
        deadline = time.monotonic() + 120
        while not (await search(client, "x")).success.index_complete:
            assert time.monotonic() < deadline, "the index was never completed"
            await asyncio.sleep(0.05)
        for query, expected in QUERIES:
            # No word of the query is in any file (tests/test_sem_search.py): only a ranking
            # by meaning finds it.
            result = await search(client, query, max_results=3)
            assert result.WhichOneof("result") == "success", result
            assert result.success.model == StaticEmbedder.name, result.success
            assert expected in paths(result), (query, paths(result))
        # By words too (the files are listed with the venv's rg).
        by_words = await search(client, "send_welcome_email", max_results=1)
        assert paths(by_words) == ["mail/notify.py"]
    assert "Traceback" not in installed_daemon.log()


def test_the_vendored_web_files_match_the_npm_packages() -> None:
    """After an npm upgrade (package.json), scripts/vendor-web must be run and its copies committed."""
    if not (ROOT / "node_modules" / "@xterm" / "xterm").is_dir():
        pytest.skip("npm packages not installed (scripts/setup)")
    check = subprocess.run(
        [sys.executable, ROOT / "scripts" / "vendor-web", "--check"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
