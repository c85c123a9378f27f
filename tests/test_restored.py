"""After the VM is restored from a snapshot (SIGUSR2, sent by scripts/image/pod-daemon's
Resumed): the daemon's own randomness is seeded again (exec_daemon/kernel/reseed.py), telemetry
exported from then on carries a fresh `service.instance.id` (exec_daemon/telemetry/resource.py),
and every client connection, RPC, PTY, the desktop page's and the IDE's, is closed so that
clients reconnect (server.py's `Restored`).

One daemon serves the module: telemetry to a loopback OTLP collector, the desktop page bridged to
a loopback stand-in VNC server (it greets as one), the IDE on code-server when it is installed."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import re
import signal
import socketserver
import struct
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from exec_daemon.client import StreamEndedError
from exec_daemon.kernel.config import DEFAULT_IDE_FOLDER
from exec_daemon.kernel.reseed import reseed_process_randomness
from exec_daemon.rpc.ide import installed_versions
from exec_daemon.rpc.websocket_frames import FrameBoundaries
from proto.agent.v1.control_pb2 import WarmRemoteAccessServerRequest
from tests.daemon_process import RunningDaemon, free_port, running_daemon
from tests.guards_support import shell
from tests.polling import eventually, generous, wait_until
from tests.test_telemetry_otlp import FAST, Receiver, grpc_collector
from tests.test_tracing import attributes, loopback_grpc_flags

# Bounds a hang: closing takes a moment, a client's end of it a little more.
ENDED_WITHIN = 20
DRAW = re.compile(r"random reseeded \(a draw: ([0-9a-f]{16})\)")
RFB_GREETING = b"RFB 003.008\n"
IDE_VERSIONS = installed_versions(DEFAULT_IDE_FOLDER)

pytestmark = pytest.mark.timeout(120)


class VncGreeter(socketserver.ThreadingTCPServer):
    """A stand-in VNC server on loopback: greets each connection as RFB 3.8 and holds it."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), VncGreeting)


class VncGreeting(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(RFB_GREETING)
        while self.request.recv(4096):
            pass


@pytest.fixture(scope="module")
def vnc() -> Iterator[int]:
    with VncGreeter() as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield server.server_address[1]
        finally:
            server.shutdown()


@pytest.fixture(scope="module")
def otlp() -> Iterator[tuple[int, Receiver]]:
    with grpc_collector() as served:
        yield served


@pytest.fixture
def collector(otlp: tuple[int, Receiver]) -> Receiver:
    return otlp[1]


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, vnc: int, otlp: tuple[int, Receiver]
) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("restored")
    (root / "workspace").mkdir()
    ide_folder = root / "ide"
    ide_folder.mkdir(mode=0o700)
    for version in IDE_VERSIONS[:1]:
        (ide_folder / f"code-server-{version}").symlink_to(
            DEFAULT_IDE_FOLDER / f"code-server-{version}"
        )
    novnc_port, ide_port = free_port(), free_port()
    flags = loopback_grpc_flags(
        otlp[0],
        "--novnc-port", str(novnc_port), "--vnc-address", f"127.0.0.1:{vnc}",
        "--ide-port", str(ide_port), "--ide-folder", str(ide_folder),
    )  # fmt: skip
    with running_daemon(root / "workspace", root / "state", *flags, env=FAST) as running:
        running.novnc_port = novnc_port  # type: ignore[attr-defined]
        running.ide_port = ide_port  # type: ignore[attr-defined]
        yield running


def restore(daemon: RunningDaemon) -> None:
    """What pod-daemon's Resumed does to the daemon; returns once the daemon has closed the
    connections (its log says how many)."""
    before = daemon.log().count("closed ")
    daemon.process.send_signal(signal.SIGUSR2)
    wait_until(lambda: daemon.log().count("closed ") > before, what="the restore handled")


def draws_after_restores(reseed: bool) -> tuple[list[int], list[str]]:
    """Two "restores" of one memory image (the same `random` and temp-name state), each drawing
    what a span id and a temp file's name would."""
    snapshot = random.getstate()
    names = tempfile._get_candidate_names()  # type: ignore[attr-defined]
    names_snapshot = names.rng.getstate()
    ids, temp_names = [], []
    for _restore in range(2):
        random.setstate(snapshot)
        tempfile._name_sequence = names  # type: ignore[attr-defined]
        names.rng.setstate(names_snapshot)
        if reseed:
            reseed_process_randomness()
        ids.append(random.getrandbits(64))
        temp_names.append(next(tempfile._get_candidate_names()))  # type: ignore[attr-defined]
    return ids, temp_names


def test_two_restores_of_one_state_draw_apart_once_reseeded() -> None:
    ids, temp_names = draws_after_restores(reseed=False)
    # The control: the same memory draws the same ids and names.
    assert ids[0] == ids[1] and temp_names[0] == temp_names[1]
    ids, temp_names = draws_after_restores(reseed=True)
    assert ids[0] != ids[1] and temp_names[0] != temp_names[1]


async def test_a_restore_ends_held_connections_and_new_ones_work(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    async with daemon.client() as client, client.exec_stream() as stream:
        held = await stream.start(shell(f"touch {started}; sleep 60"))
        await asyncio.to_thread(wait_until, started.exists, what="the held call's shell")
        url = f"ws://127.0.0.1:{daemon.pty_port}/terminals/new?name=held&token={daemon.token}"
        async with websockets.connect(url) as terminal:
            attached = json.loads(await asyncio.wait_for(terminal.recv(), generous(20)))
            daemon.process.send_signal(signal.SIGUSR2)
            with pytest.raises(StreamEndedError, match="before call 1 answered"):
                await asyncio.wait_for(held.wait(), generous(ENDED_WITHIN))
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(terminal.recv(), generous(ENDED_WITHIN))
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
        assert "restored from a snapshot" in closed.value.rcvd.reason
        # The same client reconnects: a new stream and a call on it are answered.
        async with client.exec_stream() as again:
            outcome = await asyncio.wait_for(
                (await again.start(shell("echo after-restore"))).wait(), generous(30)
            )
        assert outcome.result is not None
        assert outcome.result.shell_tool_call.result.success.stdout.strip() == "after-restore"
    # The terminal lives on: attached to again by its id.
    url = f"ws://127.0.0.1:{daemon.pty_port}/terminals/{attached['id']}?token={daemon.token}"
    async with websockets.connect(url) as terminal:
        assert (
            json.loads(await asyncio.wait_for(terminal.recv(), generous(20)))["type"] == "attached"
        )
    log = await asyncio.to_thread(
        wait_until, lambda: re.search(r"closed \d+ RPC, 1 PTY, ", daemon.log())
    )
    assert log is not None and DRAW.search(daemon.log())


def instance_id_of_calls_span(collector: Receiver, agent_id: str) -> str | None:
    """The `service.instance.id` of the exported span of the call made for `agent_id`."""
    for request in collector.of("traces"):
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    if attributes(span.attributes).get("agent.id") == agent_id:
                        return str(attributes(resource.resource.attributes)["service.instance.id"])
    return None


def instance_ids_of(collector: Receiver, signal: str) -> set[str]:
    field = {"metrics": "resource_metrics", "logs": "resource_logs"}[signal]
    return {
        str(attributes(resource.resource.attributes)["service.instance.id"])
        for request in collector.of(signal)
        for resource in getattr(request, field)
    }


async def traced_call(daemon: RunningDaemon, collector: Receiver) -> str:
    """Runs a shell call; the instance id its exported span carries."""
    agent_id = f"agent-{uuid.uuid4()}"
    async with daemon.client() as client:
        assert (await client.run(shell("true"), agent_id=agent_id)).result is not None
    return await eventually(
        lambda: instance_id_of_calls_span(collector, agent_id), what="the call's span exported"
    )


async def test_telemetry_after_each_restore_carries_a_fresh_instance_id(
    daemon: RunningDaemon, collector: Receiver
) -> None:
    # The control: without a restore, the daemon's calls share one instance id.
    first = await traced_call(daemon, collector)
    assert await traced_call(daemon, collector) == first
    renewed = []
    for _restore in range(2):
        await asyncio.to_thread(restore, daemon)
        latest = await traced_call(daemon, collector)
        renewed.append(latest)
        # Metrics and logs exported after the restore carry it too.
        for signal_name in ("metrics", "logs"):
            await eventually(
                lambda: latest in instance_ids_of(collector, signal_name),  # noqa: B023
                what=f"{signal_name} with the new instance id",
            )
    assert len({first, *renewed}) == 3, (first, renewed)
    assert f"service.instance.id is now {renewed[-1]}" in daemon.log()


async def test_a_restore_closes_the_desktop_pages_connections(daemon: RunningDaemon) -> None:
    url = f"ws://127.0.0.1:{daemon.novnc_port}/websockify"  # type: ignore[attr-defined]
    bearer = {"Authorization": f"Bearer {daemon.token}"}
    async with websockets.connect(url, additional_headers=bearer) as page:
        assert await asyncio.wait_for(page.recv(), generous(20)) == RFB_GREETING
        await asyncio.to_thread(restore, daemon)
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(page.recv(), generous(ENDED_WITHIN))
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
    assert "restored from a snapshot" in closed.value.rcvd.reason
    # The page reconnects: the VNC server greets it again.
    async with websockets.connect(url, additional_headers=bearer) as page:
        assert await asyncio.wait_for(page.recv(), generous(20)) == RFB_GREETING


async def ide_websocket(daemon: RunningDaemon) -> Any:
    """A WebSocket to code-server through the daemon's proxy, as VS Code's window opens one."""
    url = (
        f"ws://127.0.0.1:{daemon.ide_port}/?reconnectionToken={uuid.uuid4()}"  # type: ignore[attr-defined]
        "&reconnection=false&skipWebSocketFrames=false"
    )
    bearer = {"Authorization": f"Bearer {daemon.token}"}
    return await websockets.connect(url, additional_headers=bearer, open_timeout=generous(30))


@pytest.mark.skipif(
    not IDE_VERSIONS,
    reason=f"code-server is not installed in {DEFAULT_IDE_FOLDER}: "
    "python -m exec_daemon.rpc.ide install 4.139.1",
)
async def test_a_restore_closes_the_ides_connections(daemon: RunningDaemon) -> None:
    async with daemon.client() as client:
        warmed = await client.control.warm_remote_access_server(
            WarmRemoteAccessServerRequest(), headers=client.headers
        )
    assert warmed.ready, warmed
    async with await ide_websocket(daemon) as window:
        # Open: code-server waits for VS Code's handshake, so nothing arrives meanwhile.
        await window.ping()
        await asyncio.to_thread(restore, daemon)
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(window.recv(), generous(ENDED_WITHIN))
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
    assert "restored from a snapshot" in closed.value.rcvd.reason
    assert re.search(r"closed \d+ RPC, \d+ PTY, \d+ desktop and 1 IDE connections", daemon.log())
    # The window reconnects: code-server answers the new WebSocket.
    async with await ide_websocket(daemon) as window:
        await asyncio.wait_for(window.ping(), generous(20))


def frame(payload: bytes, masked: bool = False) -> bytes:
    """A binary WebSocket frame (RFC 6455): the three length encodings, masked or not."""
    size = len(payload)
    mask_bit = 0x80 if masked else 0
    if size < 126:
        head = bytes([0x82, mask_bit | size])
    elif size < 1 << 16:
        head = bytes([0x82, mask_bit | 126]) + struct.pack("!H", size)
    else:
        head = bytes([0x82, mask_bit | 127]) + struct.pack("!Q", size)
    return head + (b"\0\0\0\0" if masked else b"") + payload


@pytest.mark.parametrize("chunk", [1, 3, 4096])
def test_frame_boundaries_are_found_however_the_stream_is_cut(chunk: int) -> None:
    frames = [
        frame(b"x" * size, masked)
        for size in (0, 5, 125, 126, 300, 70_000)
        for masked in (False, True)
    ]
    stream = b"".join(frames)
    ends = set(itertools.accumulate(len(each) for each in frames))
    boundaries = FrameBoundaries()
    fed = 0
    for at in range(0, len(stream), chunk):
        piece = stream[at : at + chunk]
        # Reading what bytes_to_boundary allows never passes a frame's end.
        assert fed in ends or fed + min(len(piece), boundaries.bytes_to_boundary()) <= min(
            end for end in ends if end > fed
        )
        boundaries.feed(piece)
        fed += len(piece)
        assert (boundaries.bytes_to_boundary() == 0) == (fed in ends or fed == 0), fed
