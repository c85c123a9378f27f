"""exec_daemon/rpc/hypercorn_fixes.py's framing of a batch: the same bytes on the wire, and the
same flow-control windows after, as h2 framing it one `send_data` per frame; the same refusals."""

from __future__ import annotations

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import pytest

from exec_daemon.rpc import hypercorn_fixes
from exec_daemon.rpc.hypercorn_fixes import send_data_frames

STREAM = 1


def server_with_open_stream(max_frame_size: int = 16384) -> h2.connection.H2Connection:
    """A server side of h2 whose client opened stream 1 and allows frames of that size."""
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    client.initiate_connection()
    client.update_settings({h2.settings.SettingCodes.MAX_FRAME_SIZE: max_frame_size})
    client.send_headers(
        STREAM,
        [(":method", "POST"), (":path", "/x"), (":scheme", "http"), (":authority", "a")],
    )
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    server.initiate_connection()
    events = server.receive_data(client.data_to_send())
    assert any(isinstance(event, h2.events.RequestReceived) for event in events)
    server.send_headers(STREAM, [(":status", "200")])
    server.data_to_send()
    return server


@pytest.fixture(params=[True, False], ids=["own-framing", "h2-framing"])
def own_framing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both paths: ours (h2 4.x) and the frame-at-a-time one another h2 would get."""
    monkeypatch.setattr(hypercorn_fixes, "OWN_FRAMING", request.param)
    return bool(request.param)


@pytest.mark.parametrize("size", [1, 16383, 16384, 16385, 50_000, 65_000])
@pytest.mark.parametrize("max_frame_size", [16384, 20_000])
def test_a_batch_is_framed_as_h2_frames_it(
    size: int, max_frame_size: int, own_framing: bool
) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    by_h2, ours = server_with_open_stream(max_frame_size), server_with_open_stream(max_frame_size)
    for start in range(0, size, by_h2.max_outbound_frame_size):
        by_h2.send_data(STREAM, data[start : start + by_h2.max_outbound_frame_size])
    send_data_frames(ours, STREAM, data)
    assert ours.data_to_send() == by_h2.data_to_send()
    assert ours.local_flow_control_window(STREAM) == by_h2.local_flow_control_window(STREAM)
    assert ours.outbound_flow_control_window == by_h2.outbound_flow_control_window
    # And the stream goes on as h2 left it: more data, then its end.
    for connection in (ours, by_h2):
        send_data_frames(connection, STREAM, b"more")
        connection.end_stream(STREAM)
    assert ours.data_to_send() == by_h2.data_to_send()


def test_more_than_the_window_is_refused_and_nothing_is_sent(own_framing: bool) -> None:
    server = server_with_open_stream()
    window = server.local_flow_control_window(STREAM)
    with pytest.raises(h2.exceptions.FlowControlError):
        send_data_frames(server, STREAM, b"x" * (window + 1))
    assert server.data_to_send() == b""
    assert server.local_flow_control_window(STREAM) == window
    # Positive control: the window itself is sent.
    send_data_frames(server, STREAM, b"x" * window)
    assert server.local_flow_control_window(STREAM) == 0


def test_a_stream_the_server_ended_is_refused_as_h2_refuses_it() -> None:
    # Ours with a batch of several frames, h2 with one frame's data.
    for send, size in ((send_data_frames, 40_000), (h2.connection.H2Connection.send_data, 4000)):
        server = server_with_open_stream()
        server.end_stream(STREAM)
        server.data_to_send()
        with pytest.raises(h2.exceptions.ProtocolError, match="Invalid input"):
            send(server, STREAM, b"x" * size)
        assert server.data_to_send() == b""
