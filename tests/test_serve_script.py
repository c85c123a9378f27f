"""`./scripts/serve` keeps the token it generates in `.exec-daemon-token` (mode 0600) and reuses
it at the next start (open pages keep working), passing it by file, never on the command line.
Run in a copy of the script beside stand-ins for `scripts/setup` and the venv's `exec-daemon`
(which records how it was called), so no set-up or daemon runs."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

from tests.source_tree import ROOT

FAKE_DAEMON = """#!/usr/bin/env bash
if [[ $1 == generate-token ]]; then echo "token-$RANDOM$RANDOM$RANDOM"; exit 0; fi
printf '%s\\n' "$@" > "$(dirname "$0")/../../serve-args"
"""


def serve_once(repo: Path, **env: str) -> tuple[list[str], str]:
    completed = subprocess.run(
        [str(repo / "scripts" / "serve"), "--port", "1234"],
        capture_output=True, text=True, timeout=30, check=True,
        env={"PATH": "/usr/bin:/bin", **env},
    )  # fmt: skip
    return (repo / "serve-args").read_text().splitlines(), completed.stderr


def fake_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / ".venv" / "bin").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "serve", repo / "scripts" / "serve")
    (repo / "scripts" / "setup").write_text("#!/usr/bin/env bash\nexit 0\n")
    (repo / ".venv" / "bin" / "exec-daemon").write_text(FAKE_DAEMON)
    for script in (repo / "scripts" / "setup", repo / ".venv" / "bin" / "exec-daemon"):
        script.chmod(0o755)
    return repo


def test_the_generated_token_is_kept_0600_and_reused(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path)
    first_args, first_said = serve_once(repo)
    token_file = repo / ".exec-daemon-token"
    token = token_file.read_text().strip()
    assert token.startswith("token-")
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert first_args == ["serve", "--auth-token-file", str(token_file), "--port", "1234"]
    assert "generated an auth token" in first_said and token in first_said
    # A restart: the same token, not a new one.
    second_args, second_said = serve_once(repo)
    assert token_file.read_text().strip() == token
    assert second_args == first_args
    assert "generated an auth token" not in second_said and token in second_said
    # A token file someone made readable is tightened again.
    token_file.chmod(0o644)
    serve_once(repo)
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600


def test_a_token_from_the_environment_is_used_and_no_file_is_made(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path)
    args, _said = serve_once(repo, EXEC_DAEMON_AUTH_TOKEN="from-env")
    assert args == ["serve", "--port", "1234"]
    assert "from-env" not in args
    assert not os.path.exists(repo / ".exec-daemon-token")
