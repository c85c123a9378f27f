"""CORS on the RPC port, so a web app on an origin the operator allows (`--cors-allowed-origins`)
can call the daemon with connect-web (Connect or gRPC-Web) from a browser.

A preflight (OPTIONS with Origin and Access-Control-Request-Method) carries no token by the
Fetch standard, so it is answered here, before auth: 204 with the CORS headers for an allowed
origin, 403 without them for any other (the browser then never sends the real request). The
real request still needs the bearer token; its response gets Access-Control-Allow-Origin and
the headers a browser client must read exposed. No origin is allowed by default, and only exact
origins are (no `*`: any page the operator's browser opens could then call the daemon with a
token it was given). The header lists are connect-es's (`cors` in @connectrpc/connect,
https://connectrpc.com/docs/cors), plus the daemon's own request headers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Send = Callable[[dict[str, Any]], Awaitable[None]]

ALLOWED_METHODS = ("POST", "GET")
ALLOWED_HEADERS = (
    # Connect
    "Content-Type",
    "Connect-Protocol-Version",
    "Connect-Timeout-Ms",
    "Connect-Content-Encoding",
    "Connect-Accept-Encoding",
    "Content-Encoding",
    "Accept-Encoding",
    # gRPC and gRPC-Web
    "Grpc-Message-Type",
    "X-Grpc-Web",
    "X-User-Agent",
    "Grpc-Timeout",
    # The daemon's: the bearer token, and the trace context spans continue.
    "Authorization",
    "Traceparent",
)
EXPOSED_HEADERS = (
    "Grpc-Status",
    "Grpc-Message",
    "Grpc-Status-Details-Bin",
    "Content-Encoding",
    "Connect-Content-Encoding",
)
# How long a browser may reuse a preflight's answer (connect-es's example: two hours).
MAX_AGE_SECONDS = 7200
_DEFAULT_PORTS = {"http": 80, "https": 443}


def parse_origin(text: str) -> str:
    """An origin as browsers send it in `Origin` (scheme://host[:port], lower case, no default
    port); ValueError saying what is wrong for anything else."""
    text = text.strip()
    if text == "*" or "*" in text:
        raise ValueError(f"{text!r}: give exact origins (a wildcard would let any page in)")
    parts = urlsplit(text)
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"{text!r} is not an origin like https://app.example.com[:port]")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ValueError(f"{text!r}: an origin has no path, query or user (scheme://host[:port])")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{text!r}: bad port") from None
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS[parts.scheme]:
        return f"{parts.scheme}://{host}"
    return f"{parts.scheme}://{host}:{port}"


def _header(scope: Scope, name: bytes) -> bytes:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return b""


class Cors:
    """The origins allowed to call from a browser, and the headers that lets them."""

    def __init__(self, allowed_origins: Iterable[str] = ()) -> None:
        self._allowed = frozenset(origin.encode("latin-1") for origin in allowed_origins)

    @staticmethod
    def is_preflight(scope: Scope) -> bool:
        return (
            scope.get("method") == "OPTIONS"
            and bool(_header(scope, b"origin"))
            and bool(_header(scope, b"access-control-request-method"))
        )

    async def answer_preflight(self, scope: Scope, send: Send) -> None:
        origin = _header(scope, b"origin")
        if origin not in self._allowed:
            log.info(
                "refused a CORS preflight from %s: not in --cors-allowed-origins",
                origin.decode("latin-1"),
            )
            body = b"this origin may not call the daemon (see --cors-allowed-origins)\n"
            await _respond(send, 403, [(b"content-type", b"text/plain; charset=utf-8")], body)
            return
        headers = [
            (b"access-control-allow-origin", origin),
            (b"access-control-allow-methods", ", ".join(ALLOWED_METHODS).encode()),
            (b"access-control-allow-headers", ", ".join(ALLOWED_HEADERS).encode()),
            (b"access-control-max-age", str(MAX_AGE_SECONDS).encode()),
            (b"vary", b"Origin, Access-Control-Request-Method, Access-Control-Request-Headers"),
        ]
        await _respond(send, 204, headers, b"")

    def sending_cors_headers(self, scope: Scope, send: Send) -> Send:
        """`send`, adding the CORS response headers when the request comes from an allowed
        origin (errors included: a browser client then reads `unauthenticated`, not a network
        error)."""
        origin = _header(scope, b"origin")
        if origin not in self._allowed:
            return send
        extra = [
            (b"access-control-allow-origin", origin),
            (b"access-control-expose-headers", ", ".join(EXPOSED_HEADERS).encode()),
            (b"vary", b"Origin"),
        ]

        async def send_with_cors(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        return send_with_cors


async def _respond(
    send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes
) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
