"""The desktop's and the IDE's sign-in cookies (exec_daemon/rpc/browser_auth.py) on the real
daemon: a browser (http.cookiejar, which keeps RFC 6265's rules: cookies ignore ports, honour
paths) signs in, then opens a page the agent serves on another loopback port. That page must
receive nothing it can turn into access; a cookie of one server is refused by another (and by
another daemon with the same token); an expired one is refused, a used one is renewed.

The IDE's code-server is stood in for by tests/code_server_stand_in.py (the proxy is real), so
these tests need no code-server install.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.cookiejar
import http.server
import json
import socket
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from proto.agent.v1.control_pb2 import WarmRemoteAccessServerRequest
from tests.daemon_process import RunningDaemon, free_port, running_daemon
from tests.polling import wait_until

ROOT = Path(__file__).resolve().parents[1]
STAND_IN = ROOT / "tests" / "code_server_stand_in.py"
VERSION = "1.0.0"

pytestmark = pytest.mark.timeout(120)


def stand_in_install(folder: Path) -> Path:
    """An IDE folder whose "code-server" is the stand-in."""
    folder.mkdir(mode=0o700)
    home = folder / f"code-server-{VERSION}"
    (home / "node" / "bin").mkdir(parents=True)
    (home / "code-server" / "out" / "node").mkdir(parents=True)
    (home / "code-server" / "out" / "node" / "entry.js").write_text("")
    node = home / "node" / "bin" / "node"
    node.write_text(f'#!/bin/sh\nexec {sys.executable} {STAND_IN} "$@"\n')
    node.chmod(0o755)
    (home / ".installed").write_text(VERSION)
    return folder


@dataclass
class Servers:
    daemon: RunningDaemon
    desktop: int
    ide: int

    def url(self, port: int, path: str) -> str:
        return f"http://127.0.0.1:{port}{path}"


@contextlib.contextmanager
def browser_servers(root: Path, *flags: str, token: str | None = None) -> Iterator[Servers]:
    workspace = root / "workspace"
    workspace.mkdir()
    desktop, ide = free_port(), free_port()
    with running_daemon(
        workspace,
        root / "state",
        "--novnc-port", str(desktop),
        "--vnc-address", f"127.0.0.1:{free_port()}",
        "--ide-port", str(ide),
        "--ide-folder", str(stand_in_install(root / "ide")),
        *flags,
        token=token,
    ) as daemon:  # fmt: skip
        servers = Servers(daemon, desktop, ide)
        _warm(servers)
        yield servers


def _warm(servers: Servers) -> None:
    async def warm() -> None:
        async with servers.daemon.client() as client:
            await client.control.warm_remote_access_server(
                WarmRemoteAccessServerRequest(), headers=client.headers
            )

    asyncio.run(warm())


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    with browser_servers(tmp_path_factory.mktemp("browser")) as running:
        yield running


# --- a browser, and a page of the agent's on another port ---------------------------------------


class NoFollow(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


@dataclass
class Answer:
    status: int
    headers: dict[str, list[str]]
    body: bytes
    url: str = ""


def _answer(opener: urllib.request.OpenerDirector, request: urllib.request.Request) -> Answer:
    try:
        with opener.open(request, timeout=15) as response:
            return Answer(
                response.status, _headers(response.headers), response.read(), response.url
            )
    except urllib.error.HTTPError as refused:
        return Answer(refused.code, _headers(refused.headers), refused.read(), refused.url)


def _headers(message: object) -> dict[str, list[str]]:
    headers: dict[str, list[str]] = {}
    for key, value in message.items():  # type: ignore[attr-defined]
        headers.setdefault(key.lower(), []).append(value)
    return headers


@dataclass
class Browser:
    """A person's browser: one cookie jar for every port of 127.0.0.1."""

    jar: http.cookiejar.CookieJar = field(default_factory=http.cookiejar.CookieJar)

    def open(self, url: str) -> Answer:
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        return _answer(opener, urllib.request.Request(url))

    def sign_in(self, servers: Servers, port: int, path: str = "/") -> Answer:
        """Opens `path?token=` on `port` as a person would; the answer of where it landed."""
        separator = "&" if "?" in path else "?"
        landed = self.open(servers.url(port, f"{path}{separator}token={servers.daemon.token}"))
        assert landed.status in (200, 204), (landed.status, landed.body[:300])
        assert servers.daemon.token not in landed.url and "/s/" in landed.url, landed.url
        return landed


def fetch(url: str, cookie: str = "", headers: dict[str, str] | None = None) -> Answer:
    """A request as an agent's script sends it (no jar, no redirects followed)."""
    sent = {**(headers or {}), **({"Cookie": cookie} if cookie else {})}
    return _answer(urllib.request.build_opener(NoFollow), urllib.request.Request(url, headers=sent))


@contextlib.contextmanager
def agents_page() -> Iterator[tuple[int, list[str]]]:
    """A plain HTTP server of the agent's on another loopback port; keeps every Cookie header
    a browser sends it."""
    received: list[str] = []

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            received.append(self.headers.get("Cookie", ""))
            body = b"<html>the agent's page</html>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def upgrade_status(port: int, path: str, cookie: str) -> int:
    """The status a WebSocket upgrade to `path` with `cookie` gets."""
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        f"Sec-WebSocket-Version: 13\r\nOrigin: http://127.0.0.1:{port}\r\nCookie: {cookie}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(request.encode())
        return int(sock.recv(4096).split(b" ")[1])


def scope_of(url: str) -> str:
    """The `/s/<scope>/` a sign-in landed under."""
    return "/s/" + url.split("/s/", 1)[1].split("/", 1)[0] + "/"


def jar_cookies(browser: Browser) -> list[http.cookiejar.Cookie]:
    return list(browser.jar)


def cookie_header(cookie: http.cookiejar.Cookie) -> str:
    return f"{cookie.name}={cookie.value}"


# --- what a page on another port gets -----------------------------------------------------------


@pytest.mark.parametrize("server", ["desktop", "ide"])
def test_a_page_on_another_port_gets_nothing_it_can_replay(servers: Servers, server: str) -> None:
    port = servers.desktop if server == "desktop" else servers.ide
    browser = Browser()
    landed = browser.sign_in(servers, port)
    # Positive control: the browser itself is signed in, under its scope, on this port.
    assert browser.open(landed.url).status == 200
    with agents_page() as (page_port, received):
        # The person opens the agent's dev server (its page may send the browser to any of its
        # own paths, but it does not know the scope).
        for path in ("/", "/s/", "/index.html", "/s/anything/"):
            assert browser.open(f"http://127.0.0.1:{page_port}{path}").status == 200
    assert received, "the agent's page was not opened"
    signed_in_names = [cookie.name for cookie in jar_cookies(browser)]
    assert signed_in_names, "the sign-in set no cookie"
    for header in received:
        assert not any(name in header for name in signed_in_names), header
        # Whatever it got, replayed at the server, at every path a browser uses: no access.
        for path in ("/", "/session", "/novnc/core/rfb.js", "/?folder=/"):
            assert fetch(servers.url(port, path), header).status == 401, (path, header)
    assert upgrade_status(servers.desktop, "/websockify", "; ".join(received)) == 401


def test_the_ide_never_gives_the_browser_code_servers_session(servers: Servers) -> None:
    browser = Browser()
    landed = browser.sign_in(servers, servers.ide, "/?folder=/work")
    names = [cookie.name for cookie in jar_cookies(browser)]
    assert names == [f"exec-daemon-ide-{servers.ide}"], names
    # code-server gets its session from the proxy, at the address without the scope, and never
    # the proxy's own cookie.
    upstream = json.loads(landed.body)
    assert upstream["session"] is True, upstream
    assert upstream["target"] == "/?folder=%2Fwork", upstream
    assert "exec-daemon-ide" not in upstream["cookie"], upstream


# --- a cookie of one server at another ----------------------------------------------------------


def test_a_cookie_of_one_server_is_refused_by_another(servers: Servers) -> None:
    desktop, ide = Browser(), Browser()
    desktop_scope = scope_of(desktop.sign_in(servers, servers.desktop).url)
    ide_scope = scope_of(ide.sign_in(servers, servers.ide).url)
    [desktop_cookie] = jar_cookies(desktop)
    [ide_cookie] = jar_cookies(ide)
    # Positive controls: each is good where it was given.
    assert (
        fetch(servers.url(servers.desktop, desktop_scope), cookie_header(desktop_cookie)).status
        == 200
    )
    assert fetch(servers.url(servers.ide, ide_scope), cookie_header(ide_cookie)).status == 200
    # Replayed at the other server, under its own scope, and renamed as the other's cookie.
    for cookie, scope, port, name in (
        (desktop_cookie, desktop_scope, servers.ide, ide_cookie.name),
        (ide_cookie, ide_scope, servers.desktop, desktop_cookie.name),
    ):
        for header in (cookie_header(cookie), f"{name}={cookie.value}"):
            assert fetch(servers.url(port, scope), header).status == 401, (port, header)
    # Under another scope of the same server (a second sign-in's path).
    other_scope = scope_of(Browser().sign_in(servers, servers.desktop).url)
    assert (
        fetch(servers.url(servers.desktop, other_scope), cookie_header(desktop_cookie)).status
        == 401
    )
    # The web terminal's server takes the token only.
    pty = servers.url(servers.daemon.pty_port, "/terminals")
    for cookie in (desktop_cookie, ide_cookie):
        assert fetch(pty, cookie_header(cookie)).status == 401
    assert fetch(pty, headers={"Authorization": f"Bearer {servers.daemon.token}"}).status == 200


def test_another_daemon_with_the_same_token_refuses_the_cookie(
    servers: Servers, tmp_path: Path
) -> None:
    browser = Browser()
    scope = scope_of(browser.sign_in(servers, servers.desktop).url)
    [cookie] = jar_cookies(browser)
    with browser_servers(tmp_path, token=servers.daemon.token) as other:
        renamed = f"exec-daemon-desktop-{other.desktop}={cookie.value}"
        for header in (cookie_header(cookie), renamed):
            assert fetch(other.url(other.desktop, scope), header).status == 401, header
        # Positive control: the same token signs a browser in there.
        assert (
            Browser().open(other.url(other.desktop, f"/?token={other.daemon.token}")).status == 200
        )


def test_a_forged_or_stretched_cookie_is_refused(servers: Servers) -> None:
    browser = Browser()
    scope = scope_of(browser.sign_in(servers, servers.desktop).url)
    [cookie] = jar_cookies(browser)
    expires, _, signature = cookie.value.partition(".")
    later = str(int(expires) + 86400)
    for value in (f"{later}.{signature}", f"{expires}.{'0' * len(signature)}", "", signature):
        header = f"{cookie.name}={value}"
        assert fetch(servers.url(servers.desktop, scope), header).status == 401, value
    # Given to 127.0.0.1:PORT: not good for another host name of the same server.
    other_host = {"Host": f"localhost:{servers.desktop}"}
    assert (
        fetch(servers.url(servers.desktop, scope), cookie_header(cookie), other_host).status == 401
    )
    assert fetch(servers.url(servers.desktop, scope), cookie_header(cookie)).status == 200


# --- short-lived, renewed while in use ----------------------------------------------------------

LIFETIME_SECONDS = 6


@pytest.mark.parametrize("server", ["desktop", "ide"])
def test_an_expired_cookie_is_refused_and_use_renews_it(tmp_path: Path, server: str) -> None:
    with browser_servers(tmp_path, "--browser-session-seconds", str(LIFETIME_SECONDS)) as running:
        port = running.desktop if server == "desktop" else running.ide
        browser = Browser()
        landed = browser.sign_in(running, port)
        [first] = jar_cookies(browser)
        address = landed.url.split("?")[0]
        assert f"Max-Age={LIFETIME_SECONDS}" in "".join(
            fetch(running.url(port, f"/?token={running.daemon.token}")).headers["set-cookie"]
        )
        renewed: list[str] = []

        def first_refused() -> bool:
            # The person keeps using the page: each answer is good, and renews the cookie in
            # its second half.
            kept = browser.open(address)
            assert kept.status == 200, (kept.status, kept.body[:200])
            renewed.extend(kept.headers.get("set-cookie", []))
            return fetch(address, cookie_header(first)).status == 401

        wait_until(first_refused, 60, "the first cookie to expire")
        assert renewed, "no answer renewed the cookie"
        assert all("HttpOnly" in c and "SameSite=Strict" in c for c in renewed), renewed
        [current] = jar_cookies(browser)
        assert current.value != first.value
        assert fetch(address, cookie_header(current)).status == 200
