"""Connections of the RPC port end (exec_daemon/rpc/connection_timeouts.py): one the client
closed is closed by the daemon too (no CLOSE-WAIT socket, no fd held); one that never completes
a request is closed after --header-timeout-seconds; one that did stays open while idle, and a
long call is never cut."""

from __future__ import annotations

import http.client
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.v1.shell_pb2 import ShellArgs, ShellToolCall
from agent.v1.tool_call_pb2 import ToolCall
from tests.daemon_process import RunningDaemon, running_daemon
from tests.polling import eventually, wait_until

CLOSE_WAIT = "08"
LISTEN = "0A"
HEADER_TIMEOUT = 2
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
PING = (
    b"POST /agent.v1.ControlService/Ping HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 2\r\nAuthorization: Bearer %s\r\n\r\n{}"
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("connections")
    (root / "workspace").mkdir()
    with running_daemon(
        root / "workspace", root / "state", "--header-timeout-seconds", str(HEADER_TIMEOUT)
    ) as running:
        yield running


def connections(port: int) -> list[tuple[str, str]]:
    """(state, inode) of each connection on `port`, the daemon's side (not its listener)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] != LISTEN:
                found.append((fields[3], fields[9]))
    return found


def close_wait_sockets(port: int) -> int:
    """Sockets whose peer closed and that the daemon still holds open."""
    return sum(1 for state, _inode in connections(port) if state == CLOSE_WAIT)


def held_connections(daemon: RunningDaemon) -> int:
    """The daemon's fds that are connections of its RPC port."""
    inodes = {f"socket:[{inode}]" for _state, inode in connections(daemon.port)}
    held = 0
    fd_folder = Path(f"/proc/{daemon.process.pid}/fd")
    for fd in fd_folder.iterdir():
        try:
            held += os.readlink(fd) in inodes
        except OSError:
            pass  # closed meanwhile
    return held


def ping_bytes(daemon: RunningDaemon) -> bytes:
    return PING % daemon.token.encode()


def answered(sock: socket.socket) -> bytes:
    """The head of one HTTP/1.1 response, its body read whole (chunked or by length)."""
    sock.settimeout(15)
    response = http.client.HTTPResponse(sock)
    try:
        response.begin()
        response.read()
    except (http.client.HTTPException, OSError):
        return b""
    return f"HTTP/1.1 {response.status}".encode()


def closed_by_the_daemon(sock: socket.socket) -> bool:
    sock.settimeout(0.05)
    try:
        return sock.recv(4096) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


@pytest.mark.parametrize("sent", ["nothing", "half a head", "an h2 preface", "a whole request"])
def test_a_connection_the_client_closed_is_closed_by_the_daemon(
    daemon: RunningDaemon, sent: str
) -> None:
    for _ in range(10):
        with socket.create_connection(("127.0.0.1", daemon.port), timeout=15) as sock:
            if sent == "half a head":
                sock.sendall(b"POST /agent.v1.ControlService/Ping HTTP/1.1\r\nHost: x\r\n")
            elif sent == "an h2 preface":
                sock.sendall(H2_PREFACE)
            elif sent == "a whole request":
                assert answered_ok(daemon, sock)
    # The default bound (WAIT_SECONDS): what this rules out is a socket held until the idle
    # timer (600 s); 10 s was too short for ten closes at load 28.
    wait_until(lambda: close_wait_sockets(daemon.port) == 0, what="no CLOSE-WAIT socket left")
    wait_until(lambda: held_connections(daemon) == 0, what="no connection's fd held")


def answered_ok(daemon: RunningDaemon, sock: socket.socket) -> bool:
    sock.sendall(ping_bytes(daemon))
    return answered(sock).startswith(b"HTTP/1.1 200")


def test_a_connection_without_a_whole_request_is_closed_after_the_header_timeout(
    daemon: RunningDaemon,
) -> None:
    address = ("127.0.0.1", daemon.port)
    silent = socket.create_connection(address, timeout=15)
    half = socket.create_connection(address, timeout=15)
    half.sendall(b"POST /agent.v1.ControlService/Ping HTTP/1.1\r\nHost: x\r\n")
    preface = socket.create_connection(address, timeout=15)
    preface.sendall(H2_PREFACE)
    served = socket.create_connection(address, timeout=15)
    try:
        # Positive control: a connection that made a request is kept while idle.
        assert answered_ok(daemon, served)
        for sock in (silent, half, preface):
            wait_until(
                lambda s=sock: closed_by_the_daemon(s), 60, "the half-open connection closed"
            )  # type: ignore[misc]
        assert answered_ok(daemon, served), "the served connection was closed too"
    finally:
        for sock in (silent, half, preface, served):
            sock.close()


async def test_a_call_longer_than_the_header_timeout_is_not_cut(daemon: RunningDaemon) -> None:
    seconds = HEADER_TIMEOUT * 2
    call = ToolCall(
        shell_tool_call=ShellToolCall(args=ShellArgs(command=f"sleep {seconds}; echo done"))
    )
    async with daemon.client() as client:
        outcome = await client.run(call)
    assert outcome.result.shell_tool_call.result.success.stdout == "done\n"


async def test_a_closed_client_leaves_no_connection_open(daemon: RunningDaemon) -> None:
    """exec_daemon/client.py owns its transport: closing the client closes its pooled
    connections (connect's clients leave a given http_client open, and its pool would keep
    them until the object is collected)."""
    async with daemon.client() as client:
        await client.ping()
        assert held_connections(daemon) >= 1, "the ping's connection is pooled while open"
    await eventually(lambda: held_connections(daemon) == 0, what="no connection's fd held")
