"""The web terminal in a real headless Chromium (Debian `chromium`, driven by npm `playwright-core`
from tests/web/web_terminal.mjs): type a command, see its output on the page, resize, reload."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_process import running_daemon

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "web" / "web_terminal.mjs"
CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        not (CHROMIUM.exists() and shutil.which("node"))
        or not (ROOT / "node_modules" / "playwright-core").is_dir()
        or not (ROOT / "node_modules" / "@xterm" / "xterm").is_dir(),
        reason="needs /usr/bin/chromium, node and the npm packages: run scripts/setup",
    ),
]


def terminals(pty_port: int, token: str) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{pty_port}/terminals", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        listing: list[dict[str, Any]] = json.loads(response.read())
        return listing


def test_a_person_uses_the_web_terminal(workspace: Path, tmp_path: Path) -> None:
    (workspace / ".cursor").mkdir()
    (workspace / ".cursor" / "environment.json").write_text(
        json.dumps(
            {
                "terminals": [
                    {
                        "name": "greeter",
                        "command": "echo greeting-from-environment-json; sleep 120",
                    }
                ]
            }
        )
    )
    screenshot = tmp_path / "web-terminal.png"
    with running_daemon(workspace, tmp_path / "state") as daemon:
        completed = subprocess.run(
            [
                "node",
                str(SCRIPT),
                f"http://127.0.0.1:{daemon.pty_port}",
                daemon.token,
                str(screenshot),
                "greeter",
            ],
            capture_output=True,
            text=True,
            timeout=100,
            cwd=ROOT,
            check=False,
        )
        lines = completed.stdout.strip().splitlines()
        assert completed.returncode == 0 and lines, (completed.stdout, completed.stderr[-3000:])
        seen = json.loads(lines[-1])
        listing = {t["id"]: t for t in terminals(daemon.pty_port, daemon.token)}

    assert seen["ok"], seen
    assert seen["tokenLeftTheAddressBar"]
    assert seen["reattachedTo"] == seen["terminalId"]
    assert seen["consoleErrors"] == []
    # The PTY took the size of the resized window.
    opened = listing[seen["terminalId"]]
    assert (opened["cols"], opened["rows"]) == (
        seen["sizeAfter"]["cols"],
        seen["sizeAfter"]["rows"],
    )
    assert seen["sizeAfter"]["cols"] < seen["sizeBefore"]["cols"]
    assert screenshot.read_bytes().startswith(b"\x89PNG") and screenshot.stat().st_size > 5000
