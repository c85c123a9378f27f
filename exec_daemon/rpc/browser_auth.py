"""The daemon's token as the servers of its browser pages take it (exec_daemon/rpc/pty_server.py,
desktop_server.py, ide.py).

A client sends `Authorization: Bearer <token>`; the web terminal's page sends the token with each
request (the header, or `?token=` for a WebSocket). The desktop and the IDE sign a browser in: it
opens `/?token=<token>` and is redirected to the same address without the token
(`sign_in_redirect`), given a cookie whose value is derived from the token (`derived_cookie`: it
proves the token was given without being it), HttpOnly and SameSite=Strict, so the token stays
out of the address bar, the history and the page's scripts. Every comparison is constant-time.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
from http.cookies import CookieError, SimpleCookie
from urllib.parse import urlencode

COOKIE_ATTRIBUTES = "Path=/; HttpOnly; SameSite=Strict"


def secret_matches(given: str, expected: str) -> bool:
    """`given` is the token (or a cookie derived from it) `expected`, compared in constant time."""
    return bool(given) and hmac.compare_digest(given.encode(), expected.encode())


def bearer_token(authorization: str) -> str:
    """The token of an `Authorization: Bearer <token>` header's value ("" for another scheme)."""
    scheme, _, credentials = authorization.partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else ""


def derived_cookie(token: str, purpose: str) -> str:
    """A cookie's value for `purpose` (one per server): derived from the token, not the token."""
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def cookies(header: str) -> dict[str, str]:
    """The cookies of a `Cookie` header by name (none if it is malformed)."""
    jar: SimpleCookie = SimpleCookie()
    with contextlib.suppress(CookieError):
        jar.load(header)
    return {name: morsel.value for name, morsel in jar.items()}


def sign_in_redirect(
    path: str, query: list[tuple[str, str]], setting: dict[str, str]
) -> list[tuple[str, str]]:
    """The headers of the 303 that signs a browser in: back to `path` with `query` less its
    `token`, setting the cookies `setting` (name: value)."""
    rest = urlencode([(key, value) for key, value in query if key != "token"])
    return [
        ("Location", (path or "/") + (f"?{rest}" if rest else "")),
        *(
            ("Set-Cookie", f"{name}={value}; {COOKIE_ATTRIBUTES}")
            for name, value in setting.items()
        ),
        ("Referrer-Policy", "no-referrer"),
    ]
