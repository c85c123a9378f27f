"""OAuth for HTTP MCP servers (`--mcp-oauth-server-urls`), with tokens kept in memory per server.

mcp_auth without a code probes the server: a 401 with OAuth metadata (RFC 9728 protected
resource metadata → RFC 8414 authorization server metadata) starts an authorization-code flow
with PKCE and dynamic client registration, and answers `authorization_required` with the URL a
person opens. The authorization server then redirects to `redirect_uri` with `code` and `state`;
mcp_auth with that code exchanges it for tokens. The SDK's discovery helpers and metadata models
are used; its interactive `OAuthClientProvider` is not, because here the code arrives in a later
tool call, not in the same process's callback.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import secrets
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import urlencode

import httpx
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
)
from mcp.shared.auth import OAuthMetadata, OAuthToken, ProtectedResourceMetadata
from mcp.shared.auth_utils import resource_url_from_server_url
from pydantic import BaseModel, ValidationError

from agent.v1.mcp_pb2 import McpAuthSuccess, McpOAuthStoredData
from exec_daemon import __version__
from exec_daemon.kernel.errors import CodedError, ErrorCode

log = logging.getLogger(__name__)

# Where Cursor's MCP OAuth flows come back to.
DEFAULT_REDIRECT_URI = "cursor://anysphere.cursor-mcp/oauth/callback"
HTTP_TIMEOUT = 15.0
AUTHORIZED = "authorized"
AUTHORIZATION_REQUIRED = "authorization_required"
NOT_REQUIRED = "not_required"

_Model = TypeVar("_Model", bound=BaseModel)


@dataclass
class _Pending:
    state: str
    code_verifier: str
    redirect_uri: str
    authorization_url: str


@dataclass
class _ServerAuth:
    # The MCP server URL this state belongs to: its tokens are sent nowhere else.
    url: str = ""
    client_id: str = ""
    client_secret: str = ""
    redirect_uris: list[str] = field(default_factory=list)
    access_token: str = ""
    refresh_token: str = ""
    token_endpoint: str = ""
    resource: str = ""
    pending: _Pending | None = None


def _same_url(first: str, second: str) -> bool:
    return first.rstrip("/") == second.rstrip("/")


def _pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _www_authenticate_field(header: str, name: str) -> str | None:
    match = re.search(rf'{name}="([^"]*)"', header) or re.search(rf"{name}=([^\s,]+)", header)
    return match.group(1) if match else None


class McpOAuth:
    """The OAuth state of every server (ephemeral: it lives as long as the daemon)."""

    def __init__(self) -> None:
        self._servers: dict[str, _ServerAuth] = {}
        self._http = httpx.AsyncClient(timeout=HTTP_TIMEOUT, follow_redirects=False)

    async def aclose(self) -> None:
        await self._http.aclose()

    def access_token(self, server: str, url: str) -> str | None:
        """The server's access token, for the URL it was obtained at only: an mcp.json entry of
        the same name at another URL (the workspace's, say) never receives it."""
        auth = self._servers.get(server)
        if auth is None or not auth.access_token or not _same_url(auth.url, url):
            return None
        return auth.access_token

    def _auth_for(self, server: str, url: str) -> _ServerAuth:
        """The server's state; a fresh one when its URL is not the one the state was made for."""
        auth = self._servers.get(server)
        if auth is None or not _same_url(auth.url, url):
            auth = self._servers[server] = _ServerAuth(url=url)
        return auth

    def stored(self) -> dict[str, McpOAuthStoredData]:
        return {
            name: McpOAuthStoredData(
                refresh_token=auth.refresh_token,
                client_id=auth.client_id,
                client_secret=auth.client_secret,
                redirect_uris=auth.redirect_uris,
                access_token=auth.access_token,
            )
            for name, auth in self._servers.items()
            if auth.access_token or auth.refresh_token
        }

    async def status(self, server: str, url: str, redirect_uri: str) -> McpAuthSuccess:
        """Authorized, not needed, or the URL where a person authorizes the daemon."""
        auth = self._auth_for(server, url)
        response = await self._probe(url, auth.access_token)
        if response.status_code != 401:
            status = AUTHORIZED if auth.access_token else NOT_REQUIRED
            return McpAuthSuccess(server=server, status=status)
        if auth.refresh_token and await self._refresh(server, auth):
            retry = await self._probe(url, auth.access_token)
            if retry.status_code != 401:
                return McpAuthSuccess(server=server, status=AUTHORIZED)
        auth.access_token = ""
        pending = await self._begin(
            server, url, auth, response, redirect_uri or DEFAULT_REDIRECT_URI
        )
        return McpAuthSuccess(
            server=server,
            status=AUTHORIZATION_REQUIRED,
            authorization_url=pending.authorization_url,
        )

    async def complete(self, server: str, url: str, code: str, state: str) -> McpAuthSuccess:
        auth = self._servers.get(server)
        pending = auth.pending if auth and _same_url(auth.url, url) else None
        if auth is None or pending is None:
            raise CodedError(
                ErrorCode.NO_PENDING_AUTHORIZATION,
                f"no authorization was started for MCP server '{server}': run mcp_auth without a "
                "code first",
            )
        if not secrets.compare_digest(state, pending.state):
            raise CodedError(
                ErrorCode.STATE_MISMATCH, "the state does not match the authorization started"
            )
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": pending.redirect_uri,
            "client_id": auth.client_id,
            "code_verifier": pending.code_verifier,
            "resource": auth.resource,
        }
        token = await self._token_request(server, auth, form)
        auth.pending = None
        self._store(auth, token)
        return McpAuthSuccess(server=server, status=AUTHORIZED)

    async def _probe(self, url: str, token: str) -> httpx.Response:
        headers = {"accept": "application/json, text/event-stream"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "exec-daemon", "version": __version__},
            },
        }
        try:
            response = await self._http.post(url, json=initialize, headers=headers)
        except httpx.HTTPError as exc:
            raise CodedError(
                ErrorCode.SERVER_UNREACHABLE, f"MCP server at {url} is unreachable: {exc!s}"
            ) from None
        session = response.headers.get("mcp-session-id")
        if session and response.status_code < 300:
            try:
                await self._http.delete(url, headers={**headers, "mcp-session-id": session})
            except httpx.HTTPError:
                log.debug("ending the probe session of %s failed", url)
        return response

    async def _get_json_model(self, urls: list[str], model: type[_Model]) -> _Model | None:
        for candidate in urls:
            try:
                response = await self._http.get(candidate)
            except httpx.HTTPError:
                continue
            if response.status_code != 200:
                continue
            try:
                return model.model_validate_json(response.content)
            except ValidationError:
                log.info("%s does not hold valid %s", candidate, model.__name__)
        return None

    async def _begin(
        self,
        server: str,
        url: str,
        auth: _ServerAuth,
        unauthorized: httpx.Response,
        redirect_uri: str,
    ) -> _Pending:
        header = unauthorized.headers.get("www-authenticate", "")
        resource_urls = build_protected_resource_metadata_discovery_urls(
            _www_authenticate_field(header, "resource_metadata"), url
        )
        resource_metadata = await self._get_json_model(resource_urls, ProtectedResourceMetadata)
        auth_server = str(resource_metadata.authorization_servers[0]) if resource_metadata else None
        metadata = await self._get_json_model(
            build_oauth_authorization_server_metadata_discovery_urls(auth_server, url),
            OAuthMetadata,
        )
        if metadata is None:
            raise CodedError(
                ErrorCode.NO_OAUTH_METADATA,
                f"MCP server '{server}' answered 401 but publishes no OAuth metadata",
            )
        auth.resource = (
            str(resource_metadata.resource)
            if resource_metadata
            else resource_url_from_server_url(url)
        )
        auth.token_endpoint = str(metadata.token_endpoint)
        if not auth.client_id or redirect_uri not in auth.redirect_uris:
            await self._register(server, auth, metadata, redirect_uri)
        verifier, challenge = _pkce_pair()
        state = secrets.token_urlsafe(24)
        scope = _www_authenticate_field(header, "scope") or " ".join(
            (resource_metadata.scopes_supported if resource_metadata else None)
            or metadata.scopes_supported
            or []
        )
        query = {
            "response_type": "code",
            "client_id": auth.client_id,
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": auth.resource,
        }
        if scope:
            query["scope"] = scope
        endpoint = str(metadata.authorization_endpoint)
        separator = "&" if "?" in endpoint else "?"
        auth.pending = _Pending(
            state=state,
            code_verifier=verifier,
            redirect_uri=redirect_uri,
            authorization_url=f"{endpoint}{separator}{urlencode(query)}",
        )
        return auth.pending

    async def _register(
        self, server: str, auth: _ServerAuth, metadata: OAuthMetadata, redirect_uri: str
    ) -> None:
        if metadata.registration_endpoint is None:
            raise CodedError(
                ErrorCode.REGISTRATION_UNSUPPORTED,
                f"the authorization server of MCP server '{server}' does not offer dynamic client "
                "registration",
            )
        body = {
            "client_name": "Cursor exec-daemon",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        try:
            response = await self._http.post(str(metadata.registration_endpoint), json=body)
            response.raise_for_status()
            registered = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            log.info("client registration for %s failed: %r", server, exc)
            raise CodedError(
                ErrorCode.REGISTRATION_FAILED,
                f"client registration with the authorization server of '{server}' failed",
            ) from None
        if not isinstance(registered, dict) or not isinstance(registered.get("client_id"), str):
            raise CodedError(
                ErrorCode.REGISTRATION_FAILED, "client registration returned no client_id"
            )
        auth.client_id = registered["client_id"]
        secret = registered.get("client_secret")
        auth.client_secret = secret if isinstance(secret, str) else ""
        auth.redirect_uris = [redirect_uri]

    async def _token_request(
        self, server: str, auth: _ServerAuth, form: dict[str, str]
    ) -> OAuthToken:
        if auth.client_secret:
            form = {**form, "client_secret": auth.client_secret}
        try:
            response = await self._http.post(auth.token_endpoint, data=form)
        except httpx.HTTPError as exc:
            raise CodedError(
                ErrorCode.TOKEN_REQUEST_FAILED, f"the token endpoint is unreachable: {exc!s}"
            ) from None
        if response.status_code != 200:
            raise CodedError(
                ErrorCode.TOKEN_REQUEST_FAILED,
                f"the token endpoint of '{server}' answered HTTP {response.status_code}: "
                f"{response.text[:300]}",
            )
        try:
            return OAuthToken.model_validate_json(response.content)
        except ValidationError:
            raise CodedError(
                ErrorCode.TOKEN_REQUEST_FAILED,
                f"the token endpoint of '{server}' sent no valid token",
            ) from None

    async def _refresh(self, server: str, auth: _ServerAuth) -> bool:
        form = {
            "grant_type": "refresh_token",
            "refresh_token": auth.refresh_token,
            "client_id": auth.client_id,
            "resource": auth.resource,
        }
        try:
            token = await self._token_request(server, auth, form)
        except CodedError as failure:
            log.info("refreshing the token of %s failed: %s", server, failure.message)
            auth.refresh_token = ""
            return False
        self._store(auth, token)
        return True

    @staticmethod
    def _store(auth: _ServerAuth, token: OAuthToken) -> None:
        auth.access_token = token.access_token
        if token.refresh_token:
            auth.refresh_token = token.refresh_token
