"""The daemon's token as the servers of its browser pages take it (exec_daemon/rpc/pty_server.py,
desktop_server.py, ide.py).

A client sends `Authorization: Bearer <token>`; the web terminal's page sends the token with each
request (the header, or `?token=` for a WebSocket). The desktop and the IDE sign a browser in: it
opens `/?token=<token>` and is redirected (`sign_in_redirect`) to the same address under a path
of its own, `/s/<scope>/...` (`scope`: random per sign-in), given a cookie (`SignInCookies`)
that is:

- sent only under that path (`Path=/s/<scope>/`): a browser sends cookies to every port of the
  host, so a page the agent serves on another port would otherwise receive it; it does not know
  the scope, so the browser never sends it there;
- named after the server's port and signed (HMAC-SHA256, a key random at each daemon start,
  never the token) over that name, the scope, the `Host` it was given to and its expiry: a cookie
  of one server (or of an earlier daemon) is refused by another, and a copy cannot be stretched;
- short-lived (`--browser-session-seconds`, an hour by default) and refreshed while in use: a
  request in its second half gets a new one;
- HttpOnly (no script reads it) and SameSite=Strict (no other site's page makes the browser send
  it).

So the token stays out of the address bar, the history and the page's scripts. Every comparison
is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from urllib.parse import urlencode

SCOPE_PREFIX = "/s/"
SCOPED_PATH = re.compile(r"^/s/([A-Za-z0-9_-]{16,64})(/.*)?$")


def secret_matches(given: str, expected: str) -> bool:
    """`given` is the token `expected`, compared in constant time."""
    return bool(given) and hmac.compare_digest(given.encode(), expected.encode())


def bearer_token(authorization: str) -> str:
    """The token of an `Authorization: Bearer <token>` header's value ("" for another scheme)."""
    scheme, _, credentials = authorization.partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else ""


def cookie_values(header: str, name: str) -> list[str]:
    """Every value a `Cookie` header gives `name` (a browser sends one per matching path)."""
    values = []
    for pair in header.split(";"):
        key, equals, value = pair.strip().partition("=")
        if equals and key == name:
            values.append(value.strip().strip('"'))
    return values


def other_cookies(header: str, names: tuple[str, ...]) -> dict[str, str]:
    """The cookies of a `Cookie` header but `names`, by name."""
    kept = {}
    for pair in header.split(";"):
        key, equals, value = pair.strip().partition("=")
        if equals and key and key not in names:
            kept[key] = value.strip()
    return kept


def scoped(path: str) -> tuple[str, str]:
    """`/s/<scope>/rest` as (scope, `/rest`); any other path as ("", path)."""
    match = SCOPED_PATH.match(path)
    if match is None:
        return "", path
    return match.group(1), match.group(2) or "/"


class BrowserSessionKey:
    """The daemon's key for sign-in cookies (a daemon service): random at each start, kept only
    in memory, so a cookie outlives neither the daemon nor a restart."""

    def __init__(self, daemon: object) -> None:
        self.key = secrets.token_bytes(32)


@dataclass(frozen=True)
class Session:
    """A request's valid cookie: `refresh` is the Set-Cookie value to answer with ("" when the
    cookie is young enough)."""

    refresh: str


class SignInCookies:
    """The sign-in cookies of one server: `server` (what it is) on `port`."""

    def __init__(self, key: bytes, server: str, port: int, lifetime: float) -> None:
        self._key = key
        self.name = f"exec-daemon-{server}-{port}"
        self._lifetime = max(1, int(lifetime))

    def _signature(self, scope: str, host: str, expires: int) -> str:
        message = f"{self.name}\n{scope}\n{host.lower()}\n{expires}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def set_cookie(self, scope: str, host: str, now: float | None = None) -> str:
        """A Set-Cookie value for `scope`, given to a browser that asked for `host`."""
        expires = int(time.time() if now is None else now) + self._lifetime
        value = f"{expires}.{self._signature(scope, host, expires)}"
        return (
            f"{self.name}={value}; Path={SCOPE_PREFIX}{scope}/; Max-Age={self._lifetime}; "
            "HttpOnly; SameSite=Strict"
        )

    def session(self, cookie_header: str, scope: str, host: str) -> Session | None:
        """The session a request under `scope` to `host` has, None without a valid cookie: one
        signed by this server for that scope and host, not expired."""
        if not scope:
            return None
        now = time.time()
        for value in cookie_values(cookie_header, self.name):
            expires_text, _, signature = value.partition(".")
            if not expires_text.isdigit() or int(expires_text) <= now:
                continue
            expires = int(expires_text)
            if hmac.compare_digest(
                signature.encode(), self._signature(scope, host, expires).encode()
            ):
                young = expires - now > self._lifetime / 2
                return Session("" if young else self.set_cookie(scope, host, now))
        return None


def new_scope() -> str:
    return secrets.token_urlsafe(18)


def sign_in_redirect(
    path: str, query: list[tuple[str, str]], scope: str, set_cookies: list[str]
) -> list[tuple[str, str]]:
    """The headers of the 303 that signs a browser in: to `path` under `scope`, with `query`
    less its `token`, setting `set_cookies`."""
    rest = urlencode([(key, value) for key, value in query if key != "token"])
    location = f"{SCOPE_PREFIX}{scope}{path if path.startswith('/') else '/' + path}"
    return [
        ("Location", location + (f"?{rest}" if rest else "")),
        *(("Set-Cookie", cookie) for cookie in set_cookies),
        ("Referrer-Policy", "no-referrer"),
    ]
