"""tools/web.py on the real daemon, against an HTTP server on 127.0.0.1 (http.server in a thread)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from agent.v1 import web_pb2 as web
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon, free_port, running_daemon
from tests.loopback_http import serving_http
from tools.web import html_to_markdown

BIG_SIZE = 2 * 1024 * 1024
BINARY = bytes(range(256)) * 4
PAGE = """<!doctype html>
<html><head><title>The  Demo Page</title><style>body { color: red }</style>
<script>var secret = "from a script";</script></head>
<body>
<nav><a href="/home">Home</a> | <a href="/about">About nav link</a></nav>
<main>
<h1>Welcome</h1>
<p>Some <strong>bold</strong> text and a <a href="https://example.com/doc">link</a>.</p>
<ul><li>first item</li><li>second item</li></ul>
<pre><code>print("hi")</code></pre>
</main>
<footer>Copyright footer</footer>
</body></html>"""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle_one_request(self) -> None:
        # Clients that time out hang up on purpose; that is not the server's error.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            super().handle_one_request()

    def _send(self, status: int, body: bytes, content_type: str | None, **headers: str) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, status: int, location: str) -> None:
        self._send(status, b"", None, location=location)

    def do_GET(self) -> None:
        self._route()

    def do_POST(self) -> None:
        self._route()

    def do_PUT(self) -> None:
        self._route()

    def _route(self) -> None:
        path = self.path
        if path == "/text":
            self._send(200, b"hello", "text/plain; charset=utf-8", x_served_by="test")
        elif path == "/redirect":
            self._redirect(302, "/redirect2")
        elif path == "/redirect2":
            self._redirect(301, "/text")
        elif path == "/loop":
            self._redirect(302, "/loop")
        elif path.startswith("/redirect-to/"):
            # /redirect-to/<host>: the same path on another host of this server's port.
            host = path.removeprefix("/redirect-to/")
            self._redirect(302, f"http://{host}:{self.server.server_address[1]}/text")
        elif path == "/big":
            self._send(200, b"x" * BIG_SIZE, "application/octet-stream")
        elif path == "/binary":
            self._send(200, BINARY, "image/png")
        elif path == "/untyped-binary":
            self._send(200, BINARY, None)
        elif path == "/latin1":
            self._send(200, "café".encode("latin-1"), "text/plain; charset=iso-8859-1")
        elif path == "/missing":
            self._send(404, b"no such page", "text/plain")
        elif path == "/json":
            self._send(200, b'{"a": 1}', "application/json")
        elif path == "/page":
            self._send(200, PAGE.encode(), "text/html; charset=utf-8")
        elif path == "/slow":
            time.sleep(3)
            self._send(200, b"late", "text/plain")
        elif path == "/drip":
            self.send_response(200)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", "30")
            self.end_headers()
            for _ in range(30):
                self.wfile.write(b".")
                self.wfile.flush()
                time.sleep(0.1)
        elif path == "/echo":
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length).decode()
            echoed = {"method": self.command, "x_test": self.headers.get("x-test"), "body": body}
            self._send(200, json.dumps(echoed).encode(), "application/json")
        else:
            self._send(404, b"", "text/plain")


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serving_http(Handler) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="module")
def web_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("web")
    (root / "workspace").mkdir()
    # Only 127.0.0.1 itself: other loopback addresses and ::1 stay refused.
    allowed = ("--fetch-allow-private", "127.0.0.1/32")
    with running_daemon(root / "workspace", root / "state", *allowed) as daemon:
        yield daemon


@pytest.fixture
async def client(web_daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with web_daemon.client() as connected:
        yield connected


async def fetch(client: ExecDaemonClient, url: str, **fields: Any) -> web.FetchResult:
    call = ToolCall(fetch_tool_call=web.FetchToolCall(args=web.FetchArgs(url=url, **fields)))
    outcome = await client.run(call)
    assert outcome.error is None and outcome.result is not None, outcome.error
    return outcome.result.fetch_tool_call.result


async def web_fetch(client: ExecDaemonClient, url: str, **fields: Any) -> web.WebFetchResult:
    args = web.WebFetchArgs(url=url, **fields)
    outcome = await client.run(ToolCall(web_fetch_tool_call=web.WebFetchToolCall(args=args)))
    assert outcome.error is None and outcome.result is not None, outcome.error
    return outcome.result.web_fetch_tool_call.result


async def test_fetches_text(client: ExecDaemonClient, site: str) -> None:
    result = await fetch(client, f"{site}/text")
    success = result.success
    assert (success.status_code, success.text, success.body) == (200, "hello", b"")
    assert success.final_url == success.url == f"{site}/text"
    assert success.content_type == "text/plain; charset=utf-8"
    assert success.headers["x-served-by"] == "test"
    assert not success.truncated


async def test_follows_redirects_and_reports_the_final_url(
    client: ExecDaemonClient, site: str
) -> None:
    success = (await fetch(client, f"{site}/redirect")).success
    assert success.final_url == f"{site}/text"
    assert success.text == "hello"


async def test_redirect_loop_is_a_typed_error(client: ExecDaemonClient, site: str) -> None:
    result = await fetch(client, f"{site}/loop")
    assert result.error.code == "too_many_redirects"


async def test_big_body_is_cut_at_max_bytes(client: ExecDaemonClient, site: str) -> None:
    success = (await fetch(client, f"{site}/big", max_bytes=1000)).success
    assert success.truncated and success.body == b"x" * 1000
    success = (await fetch(client, f"{site}/big")).success
    assert not success.truncated and len(success.body) == BIG_SIZE


async def test_binary_body_comes_back_as_bytes(client: ExecDaemonClient, site: str) -> None:
    for path in ("/binary", "/untyped-binary"):
        success = (await fetch(client, f"{site}{path}")).success
        assert success.body == BINARY and success.text == ""


async def test_charset_is_honoured(client: ExecDaemonClient, site: str) -> None:
    assert (await fetch(client, f"{site}/latin1")).success.text == "café"


async def test_method_headers_and_body_are_sent(client: ExecDaemonClient, site: str) -> None:
    result = await fetch(
        client, f"{site}/echo", method="put", headers={"X-Test": "yes"}, body=b"payload"
    )
    assert json.loads(result.success.text) == {"method": "PUT", "x_test": "yes", "body": "payload"}


async def test_error_status_is_still_a_response(client: ExecDaemonClient, site: str) -> None:
    success = (await fetch(client, f"{site}/missing")).success
    assert (success.status_code, success.text) == (404, "no such page")


async def test_slow_server_times_out(client: ExecDaemonClient, site: str) -> None:
    result = await fetch(client, f"{site}/slow", timeout_ms=300)
    assert result.error.code == "timeout"  # not the page, which comes after 3 s


async def test_trickling_body_is_bounded_by_the_whole_timeout(
    client: ExecDaemonClient, site: str
) -> None:
    result = await fetch(client, f"{site}/drip", timeout_ms=800)
    assert result.error.code == "timeout"  # not the whole body, which takes longer


async def test_refused_port(client: ExecDaemonClient) -> None:
    result = await fetch(client, f"http://127.0.0.1:{free_port()}/")
    assert result.error.code == "connection_refused"


async def test_unresolvable_host(client: ExecDaemonClient) -> None:
    # A label over 63 characters fails in the local resolver, without a DNS query.
    result = await fetch(client, f"http://{'a' * 64}.invalid/")
    assert result.error.code == "dns_failure"


@pytest.mark.parametrize("url", ["", "not a url", "ftp://127.0.0.1/x", "http://", "http://[::1"])
async def test_invalid_urls(client: ExecDaemonClient, url: str) -> None:
    result = await fetch(client, url)
    assert result.error.code == "invalid_url", result


async def test_invalid_method(client: ExecDaemonClient, site: str) -> None:
    result = await fetch(client, f"{site}/text", method="GET /x")
    assert result.error.code == "invalid_argument"


async def test_web_fetch_returns_readable_markdown(client: ExecDaemonClient, site: str) -> None:
    success = (await web_fetch(client, f"{site}/page")).success
    assert success.title == "The Demo Page"
    assert success.status_code == 200 and success.final_url == f"{site}/page"
    markdown = success.markdown
    assert "# Welcome" in markdown
    assert "**bold**" in markdown
    assert "[link](https://example.com/doc)" in markdown
    assert "- first item" in markdown and "- second item" in markdown
    assert 'print("hi")' in markdown
    for chrome in ("from a script", "color: red", "About nav link", "Copyright footer"):
        assert chrome not in markdown


async def test_web_fetch_follows_redirects_and_keeps_plain_text(
    client: ExecDaemonClient, site: str
) -> None:
    success = (await web_fetch(client, f"{site}/redirect")).success
    assert success.final_url == f"{site}/text"
    assert success.markdown == "hello"


async def test_web_fetch_json_is_fenced(client: ExecDaemonClient, site: str) -> None:
    assert (await web_fetch(client, f"{site}/json")).success.markdown == '```json\n{"a": 1}\n```\n'


async def test_web_fetch_refuses_binary(client: ExecDaemonClient, site: str) -> None:
    result = await web_fetch(client, f"{site}/binary")
    assert result.error.code == "unsupported_content"
    assert "image/png" in result.error.message


async def test_web_fetch_errors_are_typed(client: ExecDaemonClient, site: str) -> None:
    assert (await web_fetch(client, "nope")).error.code == "invalid_url"
    assert (await web_fetch(client, f"{site}/slow", timeout_ms=300)).error.code == "timeout"


async def test_web_search_says_it_is_unavailable(client: ExecDaemonClient) -> None:
    args = web.WebSearchArgs(search_term="python asyncio")
    outcome = await client.run(ToolCall(web_search_tool_call=web.WebSearchToolCall(args=args)))
    assert outcome.result is not None
    result = outcome.result.web_search_tool_call.result
    assert result.error.code == "unavailable"
    assert "--web-search-endpoint" in result.error.message


def test_html_without_body_or_title() -> None:
    title, markdown = html_to_markdown("<h1>Only</h1><p>a fragment</p>")
    assert title == "Only"
    assert markdown == "# Only\n\na fragment\n"


# --- private addresses (--fetch-allow-private) ---------------------------------------------------


@pytest.fixture(scope="module")
def strict_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    """A daemon as deployed: no --fetch-allow-private."""
    root = tmp_path_factory.mktemp("web-strict")
    (root / "workspace").mkdir()
    with running_daemon(root / "workspace", root / "state") as daemon:
        yield daemon


def site_port(site: str) -> int:
    return int(site.rsplit(":", 1)[1])


# Every spelling names a server that answers (the test site's port) or a non-public network:
# only the address check stands between the agent and it.
PRIVATE_HOSTS = [
    "127.0.0.1", "localhost", "2130706433", "0x7f000001", "127.1", "0.0.0.0",
    "[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::]", "169.254.169.254", "10.0.0.1",
    "192.168.1.1", "172.16.0.1", "100.64.0.1", "[fe80::1]", "[fc00::1]",
]  # fmt: skip


@pytest.mark.parametrize("host", PRIVATE_HOSTS)
async def test_fetch_refuses_non_public_addresses(
    strict_daemon: RunningDaemon, site: str, host: str
) -> None:
    async with strict_daemon.client() as client:
        result = await fetch(client, f"http://{host}:{site_port(site)}/text")
    assert result.error.code == "private_address", result
    assert "--fetch-allow-private" in result.error.message


async def test_octal_spellings_are_not_urls(strict_daemon: RunningDaemon, site: str) -> None:
    async with strict_daemon.client() as client:
        result = await fetch(client, f"http://0177.0.0.1:{site_port(site)}/text")
    assert result.error.code == "invalid_url", result


async def test_web_fetch_refuses_non_public_addresses(
    strict_daemon: RunningDaemon, site: str
) -> None:
    async with strict_daemon.client() as client:
        result = await web_fetch(client, f"{site}/page")
        control = await fetch(client, f"http://{strict_daemon.workspace.name}.invalid/")
    assert result.error.code == "private_address", result
    # A name that does not resolve is still a DNS failure, not a refusal.
    assert control.error.code == "dns_failure", control


@pytest.mark.parametrize("host", ["127.0.0.2", "[::1]", "0x7f000002"])
async def test_a_redirect_to_an_address_not_allowed_is_refused(
    client: ExecDaemonClient, site: str, host: str
) -> None:
    """127.0.0.1 is allowed on this daemon: the first hop is fetched, the redirect is not."""
    result = await fetch(client, f"{site}/redirect-to/{host}")
    assert result.error.code == "private_address", result
    assert host.strip("[]") in result.error.message


async def test_the_daemons_own_ports_stay_refused_when_loopback_is_allowed(
    client: ExecDaemonClient, web_daemon: RunningDaemon
) -> None:
    for port in (web_daemon.port, web_daemon.pty_port):
        url = f"http://127.0.0.1:{port}/agent.v1.ControlService/Ping"
        result = await fetch(client, url, method="POST", body=b"{}")
        assert result.error.code == "private_address", result
        assert "the daemon's own port" in result.error.message
