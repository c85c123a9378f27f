"""The web terminal in a real headless Chromium (Debian `chromium`, driven by npm `playwright-core`
from tests/web/web_terminal.mjs): type a command, see its output on the page, resize, reload."""

from __future__ import annotations

import contextlib
import json
import secrets
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
    pytest.mark.timeout(240),
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


# Like `npm run watch`: prints as time passes and reacts to what is typed.
WATCH = (
    "echo watching-for-changes; (i=0; while true; do i=$((i+1)); echo tick-$i; sleep 0.3; done) & "
    'while read -r line; do echo "rebuilt after $line"; done'
)


def test_a_person_uses_the_web_terminal(workspace: Path, tmp_path: Path) -> None:
    (workspace / ".cursor").mkdir()
    (workspace / ".cursor" / "environment.json").write_text(
        json.dumps({"terminals": [{"name": "watch", "command": WATCH}]})
    )
    shots = tmp_path / "screenshots"
    shots.mkdir()
    token = secrets.token_hex(32)
    with contextlib.ExitStack() as stack:
        daemon = stack.enter_context(running_daemon(workspace, tmp_path / "state", token=token))
        browser = subprocess.Popen(
            [
                "node",
                str(SCRIPT),
                f"http://127.0.0.1:{daemon.pty_port}",
                token,
                str(shots),
                "watch",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        stack.callback(browser.kill)
        assert browser.stdout is not None and browser.stdin is not None
        seen: dict[str, Any] = {}
        for line in browser.stdout:
            message = json.loads(line)
            if message.get("restart"):
                # The daemon restarts on the same ports with the same token (as scripts/serve does).
                ports = (daemon.port, daemon.pty_port)
                assert daemon.stop() == 0
                stack.enter_context(
                    running_daemon(workspace, tmp_path / "state2", token=token, ports=ports)
                )
                browser.stdin.write("restarted\n")
                browser.stdin.flush()
            else:
                seen = message
        browser.wait(30)
        assert seen.get("ok"), (
            json.dumps(seen),
            browser.stderr.read()[-3000:] if browser.stderr else "",
        )

    assert seen["tokenLeftTheAddressBar"] and seen["tokenStoredIn"] == "localStorage"
    assert seen["firstLoadOpenedAShell"]
    assert "osc-title-42" in seen["titleFromOsc"]
    assert seen["renamedInListing"] == "my build"
    assert seen["copiedOnSelect"] == "hello-from-the-page-42"
    assert seen["selectionClearedByCopy"]
    assert seen["linkOpened"].endswith("/terminals?from=link")
    assert (seen["findSelected"], seen["findCount"]) == ("needle-9", "1 of 1")
    after = seen["afterReload"]
    assert after["fontSize"] == 16 and seen["lightThemeKept"]
    assert not seen["secondTabAskedForToken"]
    sizes = seen["sizes"]
    assert sizes["small"]["cols"] < sizes["big"]["cols"]
    assert sizes["bigWhileSmallAttached"]["cols"] == sizes["small"]["cols"]
    assert sizes["bigAfterSmallLeft"]["cols"] == sizes["big"]["cols"]
    assert "rebuilt after from-the-person" in seen["agentScreen"]
    assert seen["inputPausedOffline"] and not seen["offlineTypingReachedTheProgram"]
    offline = seen["ticksAfterReconnect"]["tickOffline"]
    # Every tick once, none missing across the drop (the replay resumed at the right byte).
    ticks = [tick for tick in seen["ticksAfterReconnect"]["ticks"] if tick >= offline - 3]
    assert ticks == list(range(offline - 3, ticks[-1] + 1)), ticks
    assert ticks[-1] >= offline + 4
    closed = seen["closedTab"]
    assert not closed["stillListed"] and closed["nowShowing"] not in (None, closed["doomed"])
    assert "is gone (the daemon restarted?); opened a new shell" in seen["afterRestart"]["status"]
    assert seen["consoleErrors"] == []
    for name in ("find", "light-theme", "two-viewers-big", "shared-terminal", "offline"):
        assert (shots / f"{name}.png").stat().st_size > 5000, name
