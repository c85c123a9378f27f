"""The PTY WebSocket server of a real daemon: protocol, auth, scrollback, backpressure."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.daemon_process import RunningDaemon, running_daemon
from tests.polling import WAIT_SECONDS, eventually
from tests.sandbox_harness import processes_with_argument

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    """One real daemon for the module: every test makes its own terminals."""
    root = tmp_path_factory.mktemp("pty-server")
    (root / "workspace").mkdir()
    with running_daemon(root / "workspace", root / "state") as running:
        yield running


def http_get(daemon: RunningDaemon, path: str, **headers: str) -> tuple[int, bytes, Any]:
    request = urllib.request.Request(f"http://127.0.0.1:{daemon.pty_port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers


def list_terminals(daemon: RunningDaemon) -> list[dict[str, Any]]:
    status, body, _ = http_get(daemon, "/terminals", Authorization=f"Bearer {daemon.token}")
    assert status == 200
    listing: list[dict[str, Any]] = json.loads(body)
    return listing


def ws_url(daemon: RunningDaemon, path: str, token: str | None = None) -> str:
    separator = "&" if "?" in path else "?"
    return f"ws://127.0.0.1:{daemon.pty_port}{path}{separator}token={token or daemon.token}"


@asynccontextmanager
async def connect(daemon: RunningDaemon, path: str, **kwargs: Any) -> AsyncIterator[Session]:
    async with websockets.connect(ws_url(daemon, path), **kwargs) as ws:
        session = Session(ws)
        session.attached = await session.control()
        assert session.attached["type"] == "attached"
        yield session


class Session:
    """A client attached to one terminal: output bytes and control messages read apart."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.output = bytearray()
        self.controls: list[dict[str, Any]] = []
        self.attached: dict[str, Any] = {}

    @property
    def id(self) -> str:
        return str(self.attached["id"])

    async def _next(self, timeout: float) -> None:
        message = await asyncio.wait_for(self.ws.recv(), timeout)
        if isinstance(message, bytes):
            self.output += message
        else:
            self.controls.append(json.loads(message))

    async def control(self, timeout: float = WAIT_SECONDS) -> dict[str, Any]:
        seen = len(self.controls)
        while len(self.controls) == seen:
            await self._next(timeout)
        return self.controls[seen]

    async def until(self, needle: bytes, timeout: float = WAIT_SECONDS) -> bytes:
        deadline = time.monotonic() + timeout
        searched = 0
        while self.output.find(needle, searched) < 0:
            # Only the new bytes (and a needle's overlap) need searching: floods stay linear.
            searched = max(0, len(self.output) - len(needle))
            await self._next(max(0.01, deadline - time.monotonic()))
        return bytes(self.output)

    async def until_closed(self, timeout: float = WAIT_SECONDS) -> tuple[int | None, str]:
        try:
            while True:
                await self._next(timeout)
        except ConnectionClosed as closed:
            assert closed.rcvd is not None
            return closed.rcvd.code, closed.rcvd.reason


async def test_new_terminal_echoes_input_and_reports_its_exit(daemon: RunningDaemon) -> None:
    async with connect(daemon, "/terminals/new?cols=100&rows=30&name=work") as session:
        attached = session.attached
        assert attached["offset"] == 0 and attached["truncated"] is False
        assert (attached["cols"], attached["rows"]) == (100, 30)
        await session.ws.send(b"echo out-$((6*7))\r")
        await session.until(b"out-42\r\n")
        [listed] = [t for t in list_terminals(daemon) if t["id"] == session.id]
        assert set(listed) >= {"id", "name", "pid", "cols", "rows", "exited", "exit_code"}
        assert (listed["name"], listed["exited"], listed["exit_code"]) == ("work", False, None)
        await session.ws.send(b"exit 7\r")
        code, reason = await session.until_closed()
        assert session.controls[-1] == {"type": "exit", "code": 7}
        assert (code, reason) == (1000, "terminal exited")
    [listed] = [t for t in list_terminals(daemon) if t["id"] == session.id]
    assert (listed["exited"], listed["exit_code"]) == (True, 7)


async def test_a_command_terminal_output_is_also_in_the_terminal_file(
    daemon: RunningDaemon,
) -> None:
    async with connect(daemon, "/terminals/new?command=echo+filed-$((2*3))") as session:
        await session.until_closed()
    [listed] = [t for t in list_terminals(daemon) if t["id"] == session.id]
    log_path = daemon.state_dir / "terminals" / f"terminal-{session.id}.log"
    assert listed["log_path"] == str(log_path)
    await eventually(lambda: b"filed-6\r\n" in log_path.read_bytes(), what="the terminal file")


async def test_token_is_required_in_a_header_or_the_query(daemon: RunningDaemon) -> None:
    assert http_get(daemon, "/terminals")[0] == 401
    assert http_get(daemon, "/terminals", Authorization="Bearer wrong")[0] == 401
    assert http_get(daemon, f"/terminals?token={daemon.token}")[0] == 200
    for url in (
        f"ws://127.0.0.1:{daemon.pty_port}/terminals/new",
        ws_url(daemon, "/terminals/new", token="wrong"),
        ws_url(daemon, "/terminals/new", token=daemon.token[:-1]),
    ):
        with pytest.raises(InvalidStatus) as refused:
            async with websockets.connect(url):
                pass
        assert refused.value.response.status_code == 401
    header = {"Authorization": f"Bearer {daemon.token}"}
    plain = f"ws://127.0.0.1:{daemon.pty_port}/terminals/new"
    async with websockets.connect(plain, additional_headers=header) as ws:
        assert json.loads(await ws.recv())["type"] == "attached"


async def test_a_page_from_another_origin_is_refused(daemon: RunningDaemon) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(
            ws_url(daemon, "/terminals/new"), origin="http://evil.example"
        ):
            pass
    assert refused.value.response.status_code == 403
    same = f"http://127.0.0.1:{daemon.pty_port}"
    async with websockets.connect(ws_url(daemon, "/terminals/new"), origin=same) as ws:  # type: ignore[arg-type]
        assert json.loads(await ws.recv())["type"] == "attached"


async def test_compression_is_off_even_when_the_client_offers_it(daemon: RunningDaemon) -> None:
    async with websockets.connect(ws_url(daemon, "/terminals/new"), compression="deflate") as ws:
        assert ws.response is not None
        assert "Sec-WebSocket-Extensions" not in ws.response.headers


async def test_unknown_terminal_and_bad_sizes_get_clear_close_codes(
    daemon: RunningDaemon,
) -> None:
    cases = {
        "/terminals/nope": (4404, "unknown terminal id 'nope'"),
        "/terminals/new?cols=0&rows=0": (4400, "terminal size must be"),
        "/terminals/new?cols=10000&rows=10000": (4400, "terminal size must be"),
        "/terminals/new?cols=wide": (4400, "cols must be an integer"),
        "/terminals/new?cwd=no/such/dir": (4400, "is not a directory"),
    }
    for path, (expected_code, expected_reason) in cases.items():
        async with websockets.connect(ws_url(daemon, path)) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
        assert closed.value.rcvd is not None, path
        assert closed.value.rcvd.code == expected_code, path
        assert expected_reason in closed.value.rcvd.reason, path
    assert http_get(daemon, f"/elsewhere?token={daemon.token}")[0] == 404


async def test_bad_control_frames_get_an_error_and_the_terminal_survives(
    daemon: RunningDaemon,
) -> None:
    async with connect(daemon, "/terminals/new?cols=80&rows=24") as session:
        bad = [
            ({"type": "resize", "cols": 0, "rows": 0}, "terminal size must be"),
            ({"type": "resize", "cols": 10000, "rows": 10000}, "terminal size must be"),
            ({"type": "resize", "cols": "80"}, "integer cols and rows"),
            ({"type": "signal", "signal": "SIGNOPE"}, "unknown signal"),
            ({"type": "launch-missiles"}, "unknown control message type"),
        ]
        for message, expected in bad:
            await session.ws.send(json.dumps(message))
            reply = await session.control()
            assert reply["type"] == "error" and expected in reply["message"], message
        # Text that is not a JSON control message is input, like a binary frame.
        await session.ws.send("echo text-$((1+1))\r")
        await session.until(b"text-2\r\n")
        await session.ws.send(json.dumps({"type": "resize", "cols": 120, "rows": 40}))
        await session.ws.send(b"stty size\r")
        await session.until(b"40 120\r\n")
        marker = f"30.{time.monotonic_ns() % 10**6:06d}"  # seconds, and unique
        await session.ws.send(f"sleep {marker}\r".encode())
        await eventually(lambda: processes_with_argument(marker), what="the sleep to run")
        await session.ws.send(json.dumps({"type": "signal", "signal": "SIGINT"}))
        await session.ws.send(b"echo after-$((3+3))\r")
        await session.until(b"after-6\r\n")


async def test_several_clients_share_output_and_any_may_type(daemon: RunningDaemon) -> None:
    async with connect(daemon, "/terminals/new") as first:
        async with connect(daemon, f"/terminals/{first.id}") as second:
            assert [t["clients"] for t in list_terminals(daemon) if t["id"] == first.id] == [2]
            await second.ws.send(b"echo from-second-$((5*5))\r")
            await first.until(b"from-second-25\r\n")
            await first.ws.send(b"echo from-first-$((4*4))\r")
            await second.until(b"from-first-16\r\n")
        # The second client leaving changes nothing for the first.
        await first.ws.send(b"echo alone-$((1+2))\r")
        await first.until(b"alone-3\r\n")


async def test_reattach_since_offset_has_no_gap_and_no_duplicate(daemon: RunningDaemon) -> None:
    async with connect(daemon, "/terminals/new") as first:
        await first.ws.send(b"seq 1 3000; echo mark-$((1+1))\r")
        await first.until(b"mark-2\r\n")
        seen = bytes(first.output)
        terminal_id = first.id
    # Output while nobody is attached is kept.
    async with connect(daemon, f"/terminals/{terminal_id}?since=0") as peek:
        await peek.ws.send(b"seq 5000 8000; echo done-$((2+2))\r")
        await peek.until(b"done-4\r\n")
        whole = bytes(peek.output)
    assert whole.startswith(seen)
    async with connect(daemon, f"/terminals/{terminal_id}?since={len(seen)}") as resumed:
        assert resumed.attached["offset"] == len(seen)
        assert resumed.attached["truncated"] is False
        await resumed.until(b"done-4\r\n")
        # Both saw the same bytes up to the marker (the next prompt may arrive in either).
        assert upto(seen + bytes(resumed.output), b"done-4\r\n") == upto(whole, b"done-4\r\n")


def upto(data: bytes, marker: bytes) -> bytes:
    return data[: data.index(marker) + len(marker)]


async def test_since_before_the_ring_says_truncated(daemon: RunningDaemon) -> None:
    size = 3 << 20
    command = f"head -c {size} /dev/zero | tr '\\0' z; sleep 30"
    async with connect(daemon, f"/terminals/new?command={quote(command)}") as first:
        while len(first.output) < size:
            await first._next(10)
        terminal_id = first.id
    async with connect(daemon, f"/terminals/{terminal_id}?since=0") as late:
        assert late.attached["truncated"] is True
        assert 0 < late.attached["offset"] < size
        while late.attached["offset"] + len(late.output) < size:
            await late._next(10)
        assert late.attached["offset"] + len(late.output) == size


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_a_client_that_never_reads_is_dropped_and_stalls_nobody(
    daemon: RunningDaemon,
) -> None:
    async with connect(daemon, "/terminals/new") as fast:
        # A raw socket that upgrades and then never reads a byte.
        stuck = socket.create_connection(("127.0.0.1", daemon.pty_port))
        stuck.sendall(
            (
                f"GET /terminals/{fast.id}?token={daemon.token} HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{daemon.pty_port}\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        try:
            await eventually(
                lambda: [t["clients"] for t in list_terminals(daemon) if t["id"] == fast.id] == [2],
                what="the stuck client to be attached",
            )
            rss_before = rss_kib(daemon.process.pid)
            size = 16 << 20
            started = time.monotonic()
            flood = f"head -c {size} /dev/zero | tr '\\0' '\\121'; echo end-$((9*9))\r"
            await fast.ws.send(flood.encode())
            await fast.until(b"end-81\r\n", timeout=60)
            elapsed = time.monotonic() - started
            assert fast.output.count(b"Q") == size
            growth_mib = (rss_kib(daemon.process.pid) - rss_before) / 1024
            assert growth_mib < 40, f"daemon memory grew by {growth_mib:.0f} MiB"
            # The stuck client was dropped; the terminal and the fast client carry on.
            assert [t["clients"] for t in list_terminals(daemon) if t["id"] == fast.id] == [1]
            await fast.ws.send(b"echo alive-$((2+5))\r")
            await fast.until(b"alive-7\r\n")
            assert elapsed < 45
            # What the stuck client finds when it finally reads: the output, then close 4408.
            stuck.settimeout(10)
            tail = b""
            # The close frame: code 4408 (0x1138) and its reason.
            while b"\x11\x38client too slow" not in tail:
                chunk = stuck.recv(1 << 20)
                assert chunk, f"closed without a 4408 close frame: {tail[-80:]!r}"
                tail = (tail + chunk)[-256:]
        finally:
            stuck.close()
    assert daemon.process.poll() is None


async def test_the_web_page_and_its_scripts_are_served(daemon: RunningDaemon) -> None:
    status, body, headers = http_get(daemon, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b"/assets/terminal.js" in body
    assert "script-src 'self';" in headers["Content-Security-Policy"]
    scripts = (
        "terminal.js",
        "xterm.mjs",
        "addon-fit.mjs",
        "addon-search.mjs",
        "addon-web-links.mjs",
    )
    for asset in (f"/assets/{name}" for name in scripts):
        status, body, headers = http_get(daemon, asset)
        assert status == 200, asset
        assert headers["Content-Type"].startswith("text/javascript"), asset
    status, body, headers = http_get(daemon, "/assets/xterm.css")
    assert status == 200 and headers["Content-Type"].startswith("text/css")


async def test_shutdown_ends_every_terminal_process(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with running_daemon(workspace, tmp_path / "state") as own:
        # A shell whose child ignores SIGHUP, like a careless dev server.
        command = "trap '' HUP; sleep 300 & echo child=$!; wait"
        async with connect(own, f"/terminals/new?command={quote(command)}") as session:
            output = await session.until(b"\r\n", timeout=10)
            child = int(output.split(b"child=")[1].split(b"\r")[0])
            # Blocking this loop: the client cannot answer the close, as if its network died.
            # stop() fails if the daemon is not gone within SHUTDOWN_SECONDS.
            assert own.stop() == 0
    assert process_state(child) in ("gone", "Z")


def process_state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return "gone"
    return stat.rsplit(")", 1)[1].split()[0]
