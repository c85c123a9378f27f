"""The VM's PID 1 (scripts/image/pod-daemon), run here as a child subreaper on loopback with
real services (shell scripts): phases, the token, restarts, reaping, pod management behind the
token, the snapshot calls (without freezing this machine's filesystems)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_process import free_port
from tests.polling import wait_until

ROOT = Path(__file__).resolve().parents[1]
POD_DAEMON = ROOT / "scripts" / "image" / "pod-daemon"
TOKEN = "pod-test-token-0123456789abcdef"


@dataclass
class Pod:
    process: subprocess.Popen[bytes]
    port: int
    folder: Path

    def call(self, method: str, body: dict[str, Any] | None = None, token: str = TOKEN) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/agent.v1.PodService/{method}",
            data=json.dumps(body or {}).encode(),
            headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def answers(self) -> bool:
        try:
            self.call("Health")
        except urllib.error.HTTPError:
            raise  # it answered: a refusal is for the test to see
        except urllib.error.URLError:
            return False  # not listening yet
        return True

    def service(self, name: str) -> dict[str, Any]:
        services = self.call("ListServices")["services"]
        return next(s for s in services if s["name"] == name)

    def log(self) -> str:
        return (self.folder / "pod.log").read_text(errors="replace")


def services(folder: Path) -> list[dict[str, Any]]:
    ready = folder / "first.ready"
    return [
        {
            "name": "first",
            "phase": 1,
            # Ready only after a while: the next phase must wait for it.
            "argv": ["sh", "-c", f"sleep 0.3; touch {ready}; exec sleep 600"],
            "ready": {"path": str(ready)},
        },
        {
            "name": "second",
            "phase": 2,
            "token": True,
            "argv": [
                "sh",
                "-c",
                f"test -e {ready} && echo after > {folder}/order;"
                f' echo "$EXEC_DAEMON_AUTH_TOKEN" > {folder}/second.token;'
                # Told of a restore as the exec daemon is.
                f" trap 'echo resumed >> {folder}/second.resumed' USR2;"
                " while :; do sleep 0.1; done",
            ],
            "on_resumed": "SIGUSR2",
        },
        {
            "name": "traced",
            "phase": 2,
            "telemetry": True,
            # What it is given when the VM's telemetry is on: flags after its argv, the token.
            "argv": ["sh", "-c", f'echo "$*" > {folder}/traced.args;'
                     f' echo "$EXEC_DAEMON_TRACE_AUTH_TOKEN" > {folder}/traced.token;'
                     " exec sleep 600", "traced"],
        },
        {
            "name": "orphans",
            "phase": 2,
            # Leaves a child behind that writes who its parent became, then exits: an orphan,
            # reparented to the pod daemon and reaped there.
            "argv": ["sh", "-c", f'echo "$EXEC_DAEMON_AUTH_TOKEN" > {folder}/orphans.token;'
                     f" ((sleep 0.3; exec awk '{{print $4}}' /proc/self/stat > {folder}/orphan.parent) &);"
                     " exec sleep 600"],
        },
    ]  # fmt: skip


@contextlib.contextmanager
def running_pod(folder: Path, secrets: str = TOKEN, cmdline: str = "") -> Iterator[Pod]:
    """The pod daemon with the token file holding `secrets`, and `cmdline` as the kernel's."""
    (folder / "services.json").write_text(json.dumps({"services": services(folder)}))
    token_file = folder / "token"
    token_file.write_text(secrets)
    (folder / "cmdline").write_text(cmdline)
    port = free_port()
    with open(folder / "pod.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, str(POD_DAEMON), "--services", str(folder / "services.json"),
             "--image-config", "", "--token-file", str(token_file), "--host", "127.0.0.1",
             "--port", str(port), "--logs", str(folder / "logs"), "--no-freeze",
             "--kernel-cmdline", str(folder / "cmdline")],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    running = Pod(process, port, folder)
    try:
        wait_until(lambda: "phase 2" in running.log(), 30, "phase 2")
        # Its port is served once its modules are loaded, while the services start: a client
        # polls Health (its log line comes just before the port is bound).
        wait_until(running.answers, 30, "pod management answering Health")
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def pod(tmp_path: Path) -> Iterator[Pod]:
    with running_pod(tmp_path) as running:
        yield running


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def zombies(pid: int) -> list[int]:
    return [c for c in children(pid) if Path(f"/proc/{c}/stat").read_text().split()[2] == "Z"]


def test_phases_token_and_health(pod: Pod) -> None:
    assert (pod.folder / "order").read_text().strip() == "after"
    # The token reached the service that asks for it, and only that one; its file is gone.
    wait_until(lambda: (pod.folder / "second.token").exists(), 10, "the second service")
    assert (pod.folder / "second.token").read_text().strip() == TOKEN
    assert (pod.folder / "orphans.token").read_text().strip() == ""
    assert not (pod.folder / "token").exists()
    health = pod.call("Health")
    assert health["healthy"] is True
    assert {s["name"]: s["state"] for s in health["services"]} == {
        "first": "SERVICE_STATE_RUNNING",
        "second": "SERVICE_STATE_RUNNING",
        "orphans": "SERVICE_STATE_RUNNING",
        "traced": "SERVICE_STATE_RUNNING",
    }
    # No telemetry asked for: the service runs as its argv says, without a trace token.
    wait_until(lambda: (pod.folder / "traced.token").exists(), 10, "the traced service")
    assert (pod.folder / "traced.args").read_text().strip() == ""
    assert (pod.folder / "traced.token").read_text().strip() == ""


def test_telemetry_reaches_the_exec_daemon_from_the_command_line_and_the_drive(
    tmp_path: Path,
) -> None:
    endpoint = "http://10.0.2.2:4317"
    with running_pod(
        tmp_path, f"{TOKEN}\ntrace-token-42\n", f"quiet exec_daemon.trace={endpoint}"
    ) as pod:
        wait_until(lambda: (pod.folder / "traced.token").exists(), 10, "the traced service")
        assert (pod.folder / "traced.args").read_text().split() == [
            "--ghost-mode", "false", "--trace-endpoint", endpoint,
        ]  # fmt: skip
        assert (pod.folder / "traced.token").read_text().strip() == "trace-token-42"
        # The daemon's token is the first line only; the services without `telemetry` get no
        # trace token.
        assert (pod.folder / "second.token").read_text().strip() == TOKEN
        assert pod.call("Health")["healthy"] is True


def test_a_wrong_token_is_refused(pod: Pod) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        pod.call("Health", token="not-the-token")
    assert refused.value.code == 401
    assert pod.call("Health")["healthy"] is True  # the same call with the token


def test_a_service_that_dies_is_started_again(pod: Pod) -> None:
    before = pod.service("first")
    os.kill(before["pid"], signal.SIGKILL)
    after = wait_until(
        lambda: (s := pod.service("first")).get("pid", 0) not in (0, before["pid"]) and s, 30
    )
    assert after["restarts"] == 1
    assert after["lastExit"] == "signal 9"


def test_restart_one_service(pod: Pod) -> None:
    before = pod.service("second")
    restarted = pod.call("RestartService", {"name": "second"})["service"]
    assert restarted["pid"] not in (0, before["pid"])
    assert restarted["state"] == "SERVICE_STATE_RUNNING"
    assert pod.service("first")["pid"] == pod.service("first")["pid"]
    with pytest.raises(urllib.error.HTTPError) as unknown:
        pod.call("RestartService", {"name": "nope"})
    assert json.loads(unknown.value.read())["code"] == "not_found"


def test_orphans_are_reaped(pod: Pod) -> None:
    # The orphan became the pod daemon's child and ended: no zombie stays.
    written = pod.folder / "orphan.parent"
    parent = wait_until(lambda: written.exists() and written.read_text().strip(), 30, "the orphan")
    assert int(parent) == pod.process.pid
    wait_until(lambda: len(children(pod.process.pid)) == 4, 30, "only the four services")
    assert zombies(pod.process.pid) == []


def test_snapshot_calls(pod: Pod) -> None:
    prepared = pod.call("PrepareSnapshot", {"thawAfterMs": 60_000})
    assert prepared.get("frozen", []) == []  # --no-freeze: synced only
    with pytest.raises(urllib.error.HTTPError) as twice:
        pod.call("PrepareSnapshot")
    assert json.loads(twice.value.read())["code"] == "failed_precondition"
    with pytest.raises(urllib.error.HTTPError) as short:
        pod.call("Resumed", {"entropy": base64.b64encode(b"x" * 8).decode()})
    assert json.loads(short.value.read())["code"] == "invalid_argument"
    first = pod.service("first")
    resumed = pod.call("Resumed", {"entropy": base64.b64encode(os.urandom(64)).decode()})
    assert resumed["reseeded"] is (os.geteuid() == 0)
    # The service that asks to be told of a restore is signalled; the others are not (`first`
    # would have died of SIGUSR2).
    assert resumed["told"] == ["second"]
    told = pod.folder / "second.resumed"
    wait_until(lambda: told.exists() and told.read_text() == "resumed\n", 30, "second told")
    assert pod.service("first")["pid"] == first["pid"]
    assert pod.service("first").get("restarts", 0) == 0
    health = pod.call("Health")
    assert health["resumes"] == 1
    assert health.get("frozen", False) is False
    pod.call("PrepareSnapshot")  # allowed again once resumed


def test_sigterm_stops_every_service(pod: Pod) -> None:
    pids = [s["pid"] for s in pod.call("ListServices")["services"]]
    pod.process.send_signal(signal.SIGTERM)
    assert pod.process.wait(30) == 0
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


def test_no_token_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "services.json").write_text(json.dumps({"services": services(tmp_path)}))
    result = subprocess.run(
        [sys.executable, str(POD_DAEMON), "--services", str(tmp_path / "services.json"),
         "--image-config", "", "--token-file", str(tmp_path / "missing"),
         "--port", str(free_port()), "--logs", str(tmp_path / "logs"), "--no-freeze"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "cannot read the token from" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "order").exists()  # no service started
