"""Every fenced code block of README.md runs against a real daemon, as a reader would run it.

A reader runs the blocks from the repository after `./scripts/serve`: on port 8080, with the
token in `.exec-daemon-token`. Here each block runs in a scratch directory that looks like the
repository to it (`.venv`, `node_modules` and `scripts` linked, the daemon's token in
`.exec-daemon-token`, `$TOKEN` set as the first shell block sets it), against a daemon of its own
whose address replaces `127.0.0.1:8080`. Blocks whose fence says `no-run` are not run, each for
the reason in NOT_RUN (a block marked `no-run` without one fails the test). The reference
generated from the SDK's docstrings (scripts/gen-sdk-docs) is built too."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.daemon_process import RunningDaemon
from tests.interop import daemon_for_module

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_PORT = "127.0.0.1:8080"

# First line of each `no-run` block -> why the suite does not run it.
NOT_RUN = {
    "./scripts/serve   # installs what it needs, then serves this directory on :8080; token in "
    ".exec-daemon-token": "starts the daemon in the foreground on fixed ports: the other blocks "
    "run against the daemon this test starts instead",
    "./scripts/serve   # installs what it needs, then serves the current directory on :8080 (RPC) "
    "and :8081 (PTY)": "serves in the foreground, and ./scripts/test runs the whole suite (this "
    "test included)",
    '.venv/bin/grpcurl -plaintext -H "$H" 127.0.0.1:8080 agent.v1.ControlService/WatchAgentContext'
    "   # until Ctrl-C": "a server stream that runs until interrupted; tests/test_agent_context.py "
    "watches it",
    "export EXEC_DAEMON_MODEL_API_KEY=sk-...      # or --model-api-key (visible in /proc: avoid)": (
        "starts a daemon against a paid model API; tests/test_model_tools.py uses scripted "
        "servers (tests/model_servers.py)"
    ),
    "S=/run/exec-daemon/<instance>/sockets/tmux/server.sock  # <state root>/sockets/tmux/ (GET "
    "/terminals says)": "needs a shared terminal named `watch` and the daemon's state root; "
    "tests/test_shared_terminals.py drives the same tmux commands",
    "docker build -t exec-daemon .                      # --build-arg BASE_IMAGE=... for another "
    "base": "builds the image (minutes, a container engine): scripts/test-image does it",
    "scripts/build-vm && cd build/vm": "builds and boots a VM under QEMU: scripts/test-vm does it",
}


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence
    language: str
    no_run: bool
    text: str

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0] if self.text else ""

    @property
    def id(self) -> str:
        return f"{self.language}-line{self.line}"


def readme_blocks() -> list[Block]:
    blocks = []
    lines = README.read_text().splitlines()
    opened: tuple[int, list[str]] | None = None
    body: list[str] = []
    for number, line in enumerate(lines, 1):
        fence = re.fullmatch(r"```(.*)", line)
        if fence is None:
            if opened is not None:
                body.append(line)
            continue
        if opened is None:
            opened, body = (number, fence.group(1).split()), []
        else:
            start, info = opened
            language = info[0] if info else ""
            blocks.append(Block(start, language, "no-run" in info[1:], "\n".join(body) + "\n"))
            opened = None
    assert opened is None, f"README.md: the fence on line {opened[0]} is never closed"
    return blocks


BLOCKS = readme_blocks()
RUN = [block for block in BLOCKS if not block.no_run]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    with daemon_for_module(tmp_path_factory) as running:
        subprocess.run(["git", "init", "-q", str(running.workspace)], check=True)
        yield running


@pytest.fixture
def reader_dir(daemon: RunningDaemon, tmp_path: Path) -> Path:
    """A directory that looks like the repository to the blocks, holding the daemon's token."""
    here = tmp_path / "repo"
    here.mkdir()
    for name in (".venv", "node_modules", "scripts"):
        (here / name).symlink_to(ROOT / name)
    token = here / ".exec-daemon-token"
    token.write_text(daemon.token + "\n")
    token.chmod(0o600)
    return here


# A languages.toml read as the daemon reads it: every server it names used by a language.
READS_HELIX_LANGUAGES = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from tools.helix_languages import parse_languages
languages = parse_languages(open("languages.toml").read())
assert languages.servers and languages.languages, "no server or language"
used = {{name for language in languages.languages for name in language.servers}}
assert set(languages.servers) <= used, f"servers no language uses: {{set(languages.servers) - used}}"
"""


def as_reader_runs_it(block: Block, daemon: RunningDaemon) -> str:
    return block.text.replace(README_PORT, f"127.0.0.1:{daemon.port}")


def run_block(block: Block, daemon: RunningDaemon, here: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TOKEN": daemon.token,
        "BUF_CACHE_DIR": str(here.parent / "buf-cache"),
        "HOME": str(here.parent),
    }
    env.pop("EXEC_DAEMON_AUTH_TOKEN", None)  # the clients must find the token file
    source = as_reader_runs_it(block, daemon)
    if block.language in ("sh", "bash"):
        command = ["bash", "-euo", "pipefail", "-c", source]
    elif block.language == "python":
        if importlib.util.find_spec("exec_daemon.sdk") is None:
            pytest.skip(
                "exec_daemon.sdk (issue 29 item 1, the Python SDK) is not in this tree yet: the "
                "README's Python block runs once it is"
            )
        (here / "readme_block.py").write_text(source)
        command = [str(ROOT / ".venv" / "bin" / "python"), "readme_block.py"]
    elif block.language == "ts":
        assert (ROOT / "node_modules" / "@exec-daemon" / "client").exists(), "run ./scripts/setup"
        subprocess.run([str(ROOT / "scripts" / "build-ts-client")], check=True, cwd=ROOT)
        (here / "readme_block.mts").write_text(source)
        command = ["node", "--experimental-strip-types", "--no-warnings", "readme_block.mts"]
    elif block.language == "toml":  # a .helix/languages.toml: the daemon must read it so
        (here / "languages.toml").write_text(source)
        command = [str(ROOT / ".venv" / "bin" / "python"), "-c", READS_HELIX_LANGUAGES]
    else:
        raise AssertionError(
            f"README.md line {block.line}: no way to run a {block.language!r} block"
        )
    return subprocess.run(command, cwd=here, env=env, capture_output=True, text=True, timeout=120)


def test_every_block_either_runs_or_says_why_not() -> None:
    assert RUN, "no runnable block found in README.md"
    skipped = {block.first_line for block in BLOCKS if block.no_run}
    assert skipped == set(NOT_RUN), (
        "each `no-run` block needs its reason in NOT_RUN (keyed by its first line), and each "
        f"reason a block: unexplained {skipped - set(NOT_RUN)}, stale {set(NOT_RUN) - skipped}"
    )


@pytest.mark.timeout(180)
@pytest.mark.parametrize("block", RUN, ids=[block.id for block in RUN])
def test_the_readme_block_runs(block: Block, daemon: RunningDaemon, reader_dir: Path) -> None:
    ran = run_block(block, daemon, reader_dir)
    assert ran.returncode == 0, (block.line, ran.stdout[-3000:], ran.stderr[-3000:])
    if block.language in ("python", "ts"):
        # The quick start: a command ran, a file was edited, the diff shows it.
        assert "hello from " in ran.stdout
        assert "+hello, world" in ran.stdout
        assert (daemon.workspace / "hello.txt").read_text() == "hello, world\n"


def test_the_sdk_reference_is_generated_from_docstrings(tmp_path: Path) -> None:
    subprocess.run(
        [str(ROOT / "scripts" / "gen-sdk-docs"), str(tmp_path / "docs")],
        check=True, cwd=ROOT, capture_output=True, timeout=120,
    )  # fmt: skip
    page = (tmp_path / "docs" / "exec_daemon" / "client.html").read_text()
    assert "The daemon ended the stream" in page  # a docstring of exec_daemon.client
    if importlib.util.find_spec("exec_daemon.sdk") is not None:
        assert (tmp_path / "docs" / "exec_daemon" / "sdk.html").exists()


def test_benchmarks_moved_to_their_own_page_and_linked() -> None:
    readme = README.read_text()
    assert "(docs/benchmarks.md)" in readme
    assert "| call (median) |" not in readme
    assert "### Cost curves" not in readme
    assert "| call (median) |" in (ROOT / "docs" / "benchmarks.md").read_text()


def test_the_quick_start_fits_in_one_screen() -> None:
    readme = README.read_text()
    start = readme.index("## Quick start")
    quick_start = readme[start : readme.index("\n## ", start)]
    assert len(quick_start.splitlines()) <= 40
    assert "```python" in quick_start and "```ts" in quick_start
