"""The front door of the RPC port: bearer auth, routing by service, no response compression,
CORS for the origins the operator allows (exec_daemon/rpc/cors.py), health checks.

Health (exec_daemon/rpc/health.py) is answered without the token: HTTP GET /healthz and
/readyz, and grpc.health.v1.Health. The token may also come in a second header the operator
names (`--auth-header`: routers such as agent-sandbox's sandbox-router strip Authorization).
The daemon's phase (exec_daemon/kernel/lifecycle.py) decides the rest: before InitSandbox
(`--wait-for-init`) only InitSandbox and reflection are answered (with the pool's credential);
while draining new calls are refused (`unavailable`) and those in flight are counted.

A content type no protocol here speaks is answered 415 by the service, with a Connect error body
(`invalid_argument`, naming the types taken) added here.

Auth is checked from the headers alone, before any request body is read. On HTTP/1.1 the
rejected request's body is then drained (discarded, bounded) before the error is written,
because hypercorn closes a connection whose request is unfinished and the client would see EPIPE
instead of `unauthenticated` (design.md).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import struct
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import quote

from connectrpc.code import Code

from exec_daemon.kernel.lifecycle import Lifecycle, Phase
from exec_daemon.rpc.cors import Cors

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_GRPC_STATUS = {
    Code.UNAUTHENTICATED: 16,
    Code.UNIMPLEMENTED: 12,
    Code.FAILED_PRECONDITION: 9,
    Code.UNAVAILABLE: 14,
}
_HTTP_STATUS = {
    Code.UNAUTHENTICATED: 401,
    Code.UNIMPLEMENTED: 404,
    Code.FAILED_PRECONDITION: 400,
    Code.UNAVAILABLE: 503,
}
_ACCEPT_ENCODING_HEADERS = {b"accept-encoding", b"grpc-accept-encoding", b"connect-accept-encoding"}
DRAIN_SECONDS = 10.0
SPOKEN_CONTENT_TYPES = (
    "application/proto, application/json, application/connect+proto, application/connect+json, "
    "application/grpc[+proto], application/grpc-web[+proto]"
)
GRPC_NEEDS_HTTP2 = (
    "gRPC needs HTTP/2 (h2c with prior knowledge on this port); over HTTP/1.1 use Connect or "
    "gRPC-Web"
)


def _header(scope: Scope, name: bytes) -> bytes:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return b""


def _is_http1(scope: Scope) -> bool:
    return str(scope.get("http_version", "1.1")).startswith("1")


def is_grpc_over_http1(scope: Scope) -> bool:
    """gRPC proper (not gRPC-Web) on an HTTP/1.x connection: its trailers cannot be sent there."""
    content_type = _header(scope, b"content-type")
    return (
        _is_http1(scope)
        and content_type.startswith(b"application/grpc")
        and not content_type.startswith(b"application/grpc-web")
    )


def bearer_token_matches(scope: Scope, expected: bytes) -> bool:
    return _bearer_matches(_header(scope, b"authorization"), expected)


def _bearer_matches(given: bytes, expected: bytes) -> bool:
    scheme, _, token = given.partition(b" ")
    # Compare in constant time whatever the input, so timing says nothing about the token.
    return hmac.compare_digest(token.strip(), expected) & (scheme.lower() == b"bearer")


def token_matches(scope: Scope, expected: bytes, second_header: bytes | None) -> bool:
    """The token in Authorization (`Bearer <token>`) or in `second_header` (the token alone, or
    `Bearer <token>`). Both are always compared, in constant time."""
    matches = bearer_token_matches(scope, expected)
    if second_header is not None:
        given = _header(scope, second_header)
        alone = hmac.compare_digest(given.strip(), expected)
        matches = matches | alone | _bearer_matches(given, expected)
    return matches


async def send_error(scope: Scope, send: Send, code: Code, message: str) -> None:
    """Writes a call-level error in whichever protocol the request speaks."""
    content_type = _header(scope, b"content-type").decode("latin-1")
    headers: list[tuple[bytes, bytes]]
    if is_grpc_over_http1(scope):
        await _send_grpc_over_http1_error(send, code, message)
        return
    if content_type.startswith("application/grpc"):
        status_headers = [
            (b"grpc-status", str(_GRPC_STATUS[code]).encode()),
            (b"grpc-message", quote(message).encode()),
        ]
        headers = [(b"content-type", content_type.encode("latin-1"))]
        if content_type.startswith("application/grpc-web"):
            # gRPC-Web: a trailers-only response carries the status in the headers.
            await send(
                {"type": "http.response.start", "status": 200, "headers": headers + status_headers}
            )
            await send({"type": "http.response.body", "body": b""})
            return
        await send(
            {"type": "http.response.start", "status": 200, "headers": headers, "trailers": True}
        )
        await send({"type": "http.response.body", "body": b""})
        await send({"type": "http.response.trailers", "headers": status_headers})
        return
    error = {"code": code.value, "message": message}
    if content_type.startswith("application/connect+"):
        payload = json.dumps({"error": error}).encode()
        body = struct.pack(">BI", 0x02, len(payload)) + payload
        status = 200
        headers = [(b"content-type", content_type.encode("latin-1"))]
    else:
        body = json.dumps(error).encode()
        status = _HTTP_STATUS[code]
        headers = [(b"content-type", b"application/json")]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _explaining_415(scope: Scope, send: Send) -> Send:
    """`send`, with a Connect error body in place of the empty body of a 415 answer."""
    replaced = False

    async def sending(message: dict[str, Any]) -> None:
        nonlocal replaced
        if replaced:
            return  # the service's own (empty) body
        if message["type"] != "http.response.start" or message.get("status") != 415:
            await send(message)
            return
        replaced = True
        given = _header(scope, b"content-type").decode("latin-1")[:100]
        named = f"content type {given!r}" if given else "request without a content type"
        error = {
            "code": Code.INVALID_ARGUMENT.value,
            "message": f"unsupported {named}: use {SPOKEN_CONTENT_TYPES}",
        }
        body = json.dumps(error).encode()
        kept = [
            (name, value)
            for name, value in message.get("headers", [])
            if name.lower() not in (b"content-type", b"content-length")
        ]
        headers = [
            *kept,
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({**message, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return sending


async def _send_grpc_over_http1_error(send: Send, code: Code, message: str) -> None:
    """HTTP/1.1 has no trailers for hypercorn: the status goes in the headers (as in a gRPC
    trailers-only response) of a plain HTTP 505 whose body says the same in words."""
    body = f"{message}\n".encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"grpc-status", str(_GRPC_STATUS[code]).encode()),
        (b"grpc-message", quote(message).encode()),
    ]
    await send({"type": "http.response.start", "status": 505, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def drain_body(receive: Receive, limit: int) -> bool:
    """Reads and discards the rest of the request body; False if it was too big or too slow."""
    seen = 0
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return False
                seen += len(message.get("body", b""))
                if seen > limit:
                    return False
                if not message.get("more_body", False):
                    return True
    except TimeoutError:
        return False


# Before InitSandbox, with the pool's credential: the claim itself, and what describes it.
_UNCLAIMED_PATHS = (
    "/agent.v1.ControlService/InitSandbox",
    "/grpc.reflection.v1.ServerReflection/",
    "/grpc.reflection.v1alpha.ServerReflection/",
)
# Streams that mostly wait: their tool calls are counted by the dispatcher instead, so an idle
# ExecStream does not hold a drain up for its whole grace period. (ControlService.Exec is one
# call: counted whole, until its answer has been sent.)
_NOT_COUNTED = (
    "/agent.v1.ExecService/ExecStream",
    "/agent.v1.ControlService/WatchAgentContext",
)
# The daemon's own services: at shutdown each of their calls ends (streams are ended with
# "shutting down"), and the port stays open until it has sent its last answer. Reflection
# streams last as long as their client wants: not waited for.
_ANSWERED_BEFORE_STOP = "/agent.v1."
NOT_CLAIMED = "this daemon waits for InitSandbox (--wait-for-init): nothing else is answered yet"
DRAINING = "the daemon is draining (shutting down): no new calls"


class FrontDoor:
    def __init__(
        self,
        routes: Mapping[str, ASGIApp],
        auth_token: str,
        *,
        compress_responses: bool = False,
        drain_limit: int = 64 * 1024 * 1024,
        cors: Cors | None = None,
        lifecycle: Lifecycle | None = None,
        health: Mapping[str, ASGIApp] | None = None,
        auth_header: str | None = None,
    ) -> None:
        self._cors = cors or Cors()
        self._routes = dict(routes)
        self._token = auth_token.encode()
        self._compress_responses = compress_responses
        self._drain_limit = drain_limit
        self._lifecycle = lifecycle or Lifecycle()
        self._health = dict(health or {})
        self._second_header = auth_header.lower().encode() if auth_header else None

    def bind(self, routes: Mapping[str, ASGIApp], auth_token: str) -> None:
        """Serves `routes` behind `auth_token` from now on (the claim of a pool's daemon)."""
        self._routes = dict(routes)
        self._token = auth_token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if self._cors.is_preflight(scope):
            await self._cors.answer_preflight(scope, send)
            return
        send = self._cors.sending_cors_headers(scope, send)
        path = scope["path"]
        if path in ("/healthz", "/readyz"):
            await self._answer_probe(scope, receive, send, path == "/readyz")
            return
        if is_grpc_over_http1(scope):
            await self._refuse(scope, receive, send, Code.UNIMPLEMENTED, GRPC_NEEDS_HTTP2)
            return
        health = _prefixed(self._health, path)
        if health is not None:
            await health(scope, receive, send)
            return
        if not token_matches(scope, self._token, self._second_header):
            await self._refuse(
                scope, receive, send, Code.UNAUTHENTICATED, "missing or wrong bearer token"
            )
            return
        phase = self._lifecycle.phase
        if phase in (Phase.UNCLAIMED, Phase.STARTING) and not path.startswith(_UNCLAIMED_PATHS):
            await self._refuse(scope, receive, send, Code.FAILED_PRECONDITION, NOT_CLAIMED)
            return
        if phase in (Phase.DRAINING, Phase.STOPPED):
            await self._refuse(scope, receive, send, Code.UNAVAILABLE, DRAINING)
            return
        app = self._route(path)
        if app is None:
            await self._refuse(
                scope, receive, send, Code.UNIMPLEMENTED, f"no such method: {scope['path']}"
            )
            return
        if not self._compress_responses:
            scope = {
                **scope,
                "headers": [h for h in scope["headers"] if h[0] not in _ACCEPT_ENCODING_HEADERS],
            }
        send = _explaining_415(scope, send)
        if not path.startswith(_ANSWERED_BEFORE_STOP):
            await app(scope, receive, send)
            return
        with self._lifecycle.answers.counted():
            if path.startswith(_NOT_COUNTED):
                await app(scope, receive, send)
                return
            with self._lifecycle.calls.counted():
                await app(scope, receive, send)

    def _route(self, path: str) -> ASGIApp | None:
        return _prefixed(self._routes, path)

    async def _answer_probe(self, scope: Scope, receive: Receive, send: Send, ready: bool) -> None:
        """/healthz: 200 while the process answers at all. /readyz: 200 only while serving its
        agent; 503 while it waits for InitSandbox, starts, drains or stops. `/readyz?unclaimed=ok`
        also counts waiting for InitSandbox as ready: a warm pool's pod readiness (agent-sandbox
        deletes a pool's sandboxes that stay unready)."""
        if _is_http1(scope):
            await drain_body(receive, self._drain_limit)
        phase = self._lifecycle.phase
        ready_phases = {Phase.SERVING}
        if b"unclaimed=ok" in scope.get("query_string", b"").split(b"&"):
            ready_phases.add(Phase.UNCLAIMED)
        ok = not ready or phase in ready_phases
        body = f"{'ok' if ok else 'not ready'}: {phase.value}\n".encode()
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
        ]
        status = 200 if ok else 503
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, code: Code, message: str
    ) -> None:
        log.info("refused %s %s: %s", scope.get("method"), scope.get("path"), message)
        if _is_http1(scope):
            await drain_body(receive, self._drain_limit)
        await send_error(scope, send, code, message)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


def _prefixed(routes: Mapping[str, ASGIApp], path: str) -> ASGIApp | None:
    for prefix, app in routes.items():
        if path.startswith(prefix):
            return app
    return None
