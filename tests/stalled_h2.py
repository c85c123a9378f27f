"""An HTTP/2 client that stops reading, written by hand with the `h2` library over a raw socket.

It keeps draining its socket (so TCP never pushes back) but grants no flow-control window
(no WINDOW_UPDATE): the server may send it the first 65,535 bytes and then must wait. That is
what a stalled or hostile client looks like to the daemon, and the daemon's memory must not
pay for it. `resume()` starts granting window again; `close()` drops the connection.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import h2.config
import h2.connection
import h2.events

from agent.v1.control_pb2 import ExecRequest
from agent.v1.exec_pb2 import ExecClientMessage, ExecServerMessage, ExecStreamElement
from agent.v1.shell_pb2 import ShellArgs, ShellToolCall
from agent.v1.tool_call_pb2 import ToolCall
from tests.interop import CONNECT_END_STREAM_FLAG, frame, unframe
from tests.sandbox_harness import processes_with_argument

EXEC_STREAM = "/agent.v1.ExecService/ExecStream"
CONTROL_EXEC = "/agent.v1.ControlService/Exec"


def shell_call(command: str, timeout_ms: int = 600_000) -> ToolCall:
    return ToolCall(
        shell_tool_call=ShellToolCall(args=ShellArgs(command=command, timeout=timeout_ms))
    )


def exec_body(path: str, tool_call: ToolCall) -> bytes:
    """The Connect request body of one call: an ExecStream element, or an ExecRequest."""
    if path == EXEC_STREAM:
        element = ExecStreamElement(
            exec_client_message=ExecClientMessage(id=1, tool_call=tool_call)
        )
        return frame(element.SerializeToString())
    return frame(ExecRequest(tool_call=tool_call).SerializeToString())


def bytes_written(marker: str) -> int | None:
    """What the command's first process (`yes <marker>`) has written so far, None once gone."""
    for pid in processes_with_argument(marker):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/io").read_text().splitlines():
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    return None


class OutputHeld:
    """Whether the command printing `marker` is held: it wrote nothing more over `polls` polls in
    a row (each call of `poll` is one)."""

    def __init__(self, marker: str, polls: int) -> None:
        self.marker, self.polls = marker, polls
        self._seen: list[int | None] = []

    def poll(self) -> bool:
        self._seen.append(bytes_written(self.marker))
        del self._seen[: -self.polls - 1]
        seen = self._seen
        return len(seen) > self.polls and seen[0] is not None and len(set(seen)) == 1


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


class StalledH2Call:
    """One Connect call over h2c (prior knowledge) whose client stops granting window."""

    def __init__(self, port: int, token: str, path: str, body: bytes) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self._sock.settimeout(0.1)
        self._h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self._lock = threading.Lock()
        self._granting = False
        # Window of what arrived while not granting, given back by resume().
        self._withheld = 0
        self._stop = False
        self.received = 0
        self.body = bytearray()
        self.ended = threading.Event()
        self._h2.initiate_connection()
        self._stream = self._h2.get_next_available_stream_id()
        headers = [
            (":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", f"127.0.0.1:{port}"), ("content-type", "application/connect+proto"),
            ("connect-protocol-version", "1"), ("authorization", f"Bearer {token}"),
        ]  # fmt: skip
        self._h2.send_headers(self._stream, headers)
        self._h2.send_data(self._stream, body, end_stream=True)
        self._sock.sendall(self._h2.data_to_send())
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._stop:
            try:
                data = self._sock.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            with self._lock:
                for event in self._h2.receive_data(data):
                    self._on_event(event)
                self._send_pending()
        self.ended.set()

    def _on_event(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.DataReceived):
            self.received += len(event.data)
            self.body += event.data
            if self._granting:
                self._h2.acknowledge_received_data(event.flow_controlled_length, self._stream)
            else:
                self._withheld += event.flow_controlled_length
        elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
            self.ended.set()

    def _send_pending(self) -> None:
        data = self._h2.data_to_send()
        if data:
            self._sock.sendall(data)

    def resume(self) -> None:
        """Grants back the window withheld so far, and every window from now on."""
        with self._lock:
            self._granting = True
            if self._withheld:
                self._h2.acknowledge_received_data(self._withheld, self._stream)
                self._withheld = 0
            self._send_pending()

    def reset(self) -> None:
        """Cancels the call (RST_STREAM), keeping the connection open."""
        with self._lock:
            self._h2.reset_stream(self._stream)
            self._send_pending()

    def messages(self) -> Iterator[ExecServerMessage]:
        for flags, payload in unframe(bytes(self.body)):
            if not flags & CONNECT_END_STREAM_FLAG:
                yield ExecServerMessage.FromString(payload)

    def close(self) -> None:
        self._stop = True
        self._sock.close()
        self._reader.join(5)
