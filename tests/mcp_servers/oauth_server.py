"""An OAuth-protected MCP server for tests, on 127.0.0.1: `python -m ... PORT`.

It is its own authorization server: RFC 9728 and RFC 8414 metadata, dynamic client registration,
an /authorize endpoint that approves at once (302 to redirect_uri with code and state), a token
endpoint that checks PKCE and refreshes, and /mcp (the demo tools) that wants a bearer token.
POST /expire forgets every access token (the refresh tokens stay).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import sys
from typing import Any
from urllib.parse import urlencode

import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.mcp_servers.demo_server import server

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 0
BASE = f"http://127.0.0.1:{PORT}"
RESOURCE_METADATA = f"{BASE}/.well-known/oauth-protected-resource/mcp"

codes: dict[str, dict[str, str]] = {}
access_tokens: set[str] = set()
refresh_tokens: set[str] = set()


@server.custom_route("/.well-known/oauth-protected-resource/mcp", methods=["GET"])
async def resource_metadata(request: Request) -> Response:
    return JSONResponse(
        {"resource": f"{BASE}/mcp", "authorization_servers": [BASE], "scopes_supported": ["mcp"]}
    )


@server.custom_route("/.well-known/oauth-authorization-server", methods=["GET"])
async def server_metadata(request: Request) -> Response:
    return JSONResponse(
        {
            "issuer": BASE,
            "authorization_endpoint": f"{BASE}/authorize",
            "token_endpoint": f"{BASE}/token",
            "registration_endpoint": f"{BASE}/register",
            "code_challenge_methods_supported": ["S256"],
        }
    )


@server.custom_route("/register", methods=["POST"])
async def register(request: Request) -> Response:
    body = await request.json()
    return JSONResponse(
        {"client_id": "client-1", "redirect_uris": body["redirect_uris"]}, status_code=201
    )


@server.custom_route("/authorize", methods=["GET"])
async def authorize(request: Request) -> Response:
    query = request.query_params
    code = secrets.token_urlsafe(8)
    codes[code] = {
        "challenge": query["code_challenge"],
        "redirect_uri": query["redirect_uri"],
        "client_id": query["client_id"],
    }
    location = f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"
    return RedirectResponse(location, status_code=302)


def _tokens() -> dict[str, Any]:
    access, refresh = f"access-{secrets.token_hex(4)}", f"refresh-{secrets.token_hex(4)}"
    access_tokens.add(access)
    refresh_tokens.add(refresh)
    return {
        "access_token": access,
        "token_type": "bearer",
        "expires_in": 3600,
        "refresh_token": refresh,
    }


@server.custom_route("/token", methods=["POST"])
async def token(request: Request) -> Response:
    form = await request.form()
    if form.get("grant_type") == "refresh_token":
        if form.get("refresh_token") not in refresh_tokens:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        return JSONResponse(_tokens())
    grant = codes.pop(str(form.get("code")), None)
    verifier = str(form.get("code_verifier", ""))
    challenge = (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    )
    if grant is None or grant["challenge"] != challenge:
        return JSONResponse({"error": "invalid_grant"}, status_code=400)
    if grant["redirect_uri"] != form.get("redirect_uri"):
        return JSONResponse({"error": "invalid_grant"}, status_code=400)
    return JSONResponse(_tokens())


@server.custom_route("/expire", methods=["POST"])
async def expire(request: Request) -> Response:
    access_tokens.clear()
    return Response(status_code=204)


class RequireBearer:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            headers = dict(scope["headers"])
            auth = headers.get(b"authorization", b"").decode()
            if not auth.startswith("Bearer ") or auth[7:] not in access_tokens:
                challenge = f'Bearer resource_metadata="{RESOURCE_METADATA}"'
                response = JSONResponse(
                    {"error": "invalid_token"},
                    status_code=401,
                    headers={"www-authenticate": challenge},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


if __name__ == "__main__":
    app = RequireBearer(server.streamable_http_app(host="127.0.0.1"))
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
