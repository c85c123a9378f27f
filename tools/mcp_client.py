"""The MCP client side behind tools/mcp.py: `McpServers`, one connection per configured server.

`McpServers` (one per daemon, `daemon.service(McpServers)`) connects to the servers of the MCP
config lazily, on first use, with the official `mcp` SDK: stdio servers through its stdio
client, URL servers through its streamable-HTTP client. Each connection lives in its own task
(the SDK's task groups must be entered and left by one task); calls from tool handlers go
through its session.

Process ownership: the SDK's stdio client spawns the server itself (its own session/process
group) and, when the connection closes, closes stdin, waits 2 s, then SIGTERMs and SIGKILLs the
whole group, shielded from cancellation. That is the shutdown MCP servers expect, so stdio
servers are not started through the daemon's shell spawn path; `aclose()` closes every
connection at daemon shutdown. A server whose daemon is SIGKILLed sees EOF on stdin, which makes
MCP servers exit.

Every MCP request is bounded (the server's `timeout`, or the call's `timeout_ms`), so a stuck or
dead server answers a typed error, never a hang. A server that crashed is restarted on next use.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import os
import re
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, TextIO, TypeVar, cast

import httpcore2
import httpx2
import mcp_types
from google.protobuf.struct_pb2 import Struct
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agent.v1.mcp_pb2 import (
    ListMcpResourcesArgs,
    ListMcpResourcesResult,
    ListMcpResourcesSuccess,
    McpArgs,
    McpAudio,
    McpAuthArgs,
    McpAuthResult,
    McpContent,
    McpEmbeddedResource,
    McpImage,
    McpOAuthStoredData,
    McpResource,
    McpResourceLink,
    McpResult,
    McpServerFailure,
    McpSuccess,
    McpToolNotFound,
    ReadMcpResourceArgs,
    ReadMcpResourceResult,
    ReadMcpResourceSuccess,
)
from exec_daemon import __version__
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.secrets import without_secrets
from exec_daemon.kernel.state import Daemon
from exec_daemon.kernel.state_root import state_folder
from tools.mcp_config import McpSettings, ServerSpec, from_workspace, load_settings
from tools.mcp_oauth import McpOAuth
from tools.public_network import (
    AddressRefused,
    AddressRules,
    HostUnresolvable,
    PublicOnlyBackend,
)
from tools.workspace import atomic_write, resolve_path, write_rules

log = logging.getLogger(__name__)

# MCP servers' stderr logs, in the daemon's private state root.
MCP_LOG_FOLDER = "mcp"

T = TypeVar("T")

# Pages of tools/resources read from one server at most (a misbehaving server's cursor loop).
MAX_PAGES = 50
STDERR_TAIL_BYTES = 4000
# Extra time past the MCP request timeout before the daemon's own bound fires.
TIMEOUT_MARGIN = 2.0


@dataclass(frozen=True)
class ToolRef:
    server: str
    tool: str

    def label(self) -> str:
        return f"{self.server}-{self.tool}"


class McpConnection:
    """One MCP server: started on first use, restarted on next use after it died."""

    def __init__(self, spec: ServerSpec, servers: McpServers) -> None:
        self.spec = spec
        self._servers = servers
        self._lock = asyncio.Lock()
        self._client: Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._stderr_path = servers.log_folder / f"{_safe_file_name(spec.name)}.stderr.log"
        self._stderr_offset = 0
        # The SDK turns HTTP statuses into generic JSON-RPC errors; a 401 is noted here.
        self._unauthorized = False
        self.tools: list[mcp_types.Tool] | None = None

    async def client(self) -> Client:
        if self.spec.problem:
            raise CodedError(
                ErrorCode.INVALID_CONFIG, f"MCP server '{self.spec.name}': {self.spec.problem}"
            )
        async with self._lock:
            alive = self._runner is not None and not self._runner.done()
            if self._client is not None and alive and not self._closing.is_set():
                return self._client
            await self._stop_runner()
            self._client = await self._start()
            self.tools = None
            return self._client

    async def _start(self) -> Client:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Client] = loop.create_future()
        # A start given up on still fails its future later; nobody needs to hear of it.
        ready.add_done_callback(_retrieve_exception)
        self._closing = asyncio.Event()
        self._runner = asyncio.create_task(self._serve(ready), name=f"mcp:{self.spec.name}")
        try:
            return await asyncio.wait_for(asyncio.shield(ready), self.spec.startup_timeout)
        except asyncio.CancelledError:
            # The call was aborted mid-start: no half-started server is left behind.
            self._abandon_runner()
            raise
        except TimeoutError:
            self._abandon_runner()
            raise CodedError(
                ErrorCode.SERVER_START_FAILED,
                f"MCP server '{self.spec.name}' did not complete the MCP handshake within "
                f"{self.spec.startup_timeout:g} s{self._stderr_note()}",
            ) from None

    async def _serve(self, ready: asyncio.Future[Client]) -> None:
        try:
            async with self._transport() as transport:
                client = Client(
                    transport,
                    read_timeout_seconds=self.spec.request_timeout,
                    client_info=mcp_types.Implementation(name="exec-daemon", version=__version__),
                    cache=None,
                )
                async with client:
                    ready.set_result(client)
                    await self._closing.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            failure = self._start_failure(exc)
            if not ready.done():
                ready.set_exception(failure)
            else:
                log.info("MCP server %s connection ended: %r", self.spec.name, exc)
        finally:
            if not ready.done():
                ready.set_exception(
                    CodedError(
                        ErrorCode.SERVER_START_FAILED, f"MCP server '{self.spec.name}' stopped"
                    )
                )

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        if self.spec.is_http:
            async with self._http_transport() as streams:
                yield streams
            return
        state_folder(self._servers.daemon.config.state_root, MCP_LOG_FOLDER)
        with self._stderr_path.open("a", encoding="utf-8", errors="replace") as errlog:
            self._stderr_offset = errlog.tell()
            params = StdioServerParameters(
                command=self.spec.command,
                args=list(self.spec.args),
                # The SDK starts it in a session of its own and ends its group (mcp.os.posix).
                env=without_secrets({**self._servers.daemon.env.snapshot(), **self.spec.env}),
                cwd=self.spec.cwd or self._servers.daemon.workspace,
                encoding_error_handler="replace",
            )
            yield _stdio_transport(params, errlog)

    @asynccontextmanager
    async def _http_transport(self) -> AsyncIterator[Any]:
        headers = dict(self.spec.headers)
        token = self._servers.oauth.access_token(self.spec.name, self.spec.url)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        timeout = httpx2.Timeout(30.0, read=self.spec.request_timeout)
        self._unauthorized = False

        async def note_status(response: httpx2.Response) -> None:
            self._unauthorized = response.status_code == 401

        hooks = {"response": [note_status]}
        transport = self._public_only_transport()
        async with httpx2.AsyncClient(
            headers=headers, timeout=timeout, event_hooks=hooks, transport=transport
        ) as http:
            yield streamable_http_client(self.spec.url, http_client=http)

    def _public_only_transport(self) -> httpx2.AsyncHTTPTransport | None:
        """For a server of the workspace's mcp.json (the repository's or the agent's choice):
        connections checked as fetch's are (tools/public_network.py), so its URL cannot reach
        the daemon's own ports, cloud metadata or the machine's private services unless
        --fetch-allow-private allows that network. The operator's servers may be anywhere."""
        config = self._servers.daemon.config
        if not from_workspace(self.spec, config):
            return None
        backend = PublicOnlyBackend(
            AddressRules.of(config),
            httpcore2.AnyIOBackend(),
            (httpcore2.ConnectError, httpcore2.ConnectTimeout),
        )
        transport = httpx2.AsyncHTTPTransport()
        # httpx2 has no public parameter for the network backend (as httpx: public_network.py).
        transport._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            # The same interface as httpcore's (httpcore2 is its fork); the streams are httpcore2's.
            network_backend=cast("httpcore2.AsyncNetworkBackend", backend),
        )
        return transport

    def _start_failure(self, exc: BaseException) -> CodedError:
        leaves = _leaf_exceptions(exc)
        name, note = self.spec.name, self._stderr_note()
        if self._unauthorized:
            return self._servers.unauthorized(self.spec)
        for leaf in leaves:
            if isinstance(leaf, FileNotFoundError) and not self.spec.is_http:
                return CodedError(
                    ErrorCode.SERVER_START_FAILED,
                    f"MCP server '{name}' could not start: command not found: {self.spec.command}",
                )
            if isinstance(leaf, PermissionError) and not self.spec.is_http:
                return CodedError(
                    ErrorCode.SERVER_START_FAILED,
                    f"MCP server '{name}' could not start: permission denied running "
                    f"{self.spec.command}",
                )
            if isinstance(leaf, httpx2.HTTPStatusError) and leaf.response.status_code == 401:
                return self._servers.unauthorized(self.spec)
            if isinstance(leaf, AddressRefused | HostUnresolvable):
                code = ErrorCode.PRIVATE_ADDRESS
                if isinstance(leaf, HostUnresolvable):
                    code = ErrorCode.DNS_FAILURE
                return CodedError(code, f"MCP server '{name}' at {self.spec.url}: {leaf}")
            if isinstance(leaf, httpx2.TransportError):
                return CodedError(
                    ErrorCode.SERVER_UNREACHABLE,
                    f"MCP server '{name}' at {self.spec.url} is unreachable: {_describe(leaf)}",
                )
            if isinstance(leaf, MCPError):
                if leaf.code == mcp_types.CONNECTION_CLOSED and not self.spec.is_http:
                    return CodedError(
                        ErrorCode.SERVER_START_FAILED,
                        f"MCP server '{name}' exited during the MCP handshake{note}",
                    )
                return CodedError(
                    ErrorCode.SERVER_START_FAILED,
                    f"MCP server '{name}' failed the MCP handshake: {leaf.message}{note}",
                )
        log.warning("MCP server %s failed to start", name, exc_info=exc)
        return CodedError(
            ErrorCode.SERVER_START_FAILED, f"MCP server '{name}' could not start{note}"
        )

    def _stderr_note(self) -> str:
        tail = self.stderr_tail()
        return f"; its stderr ends with:\n{tail}" if tail else ""

    def stderr_tail(self) -> str:
        if self.spec.is_http:
            return ""
        try:
            with self._stderr_path.open("rb") as stderr:
                size = stderr.seek(0, os.SEEK_END)
                start = max(self._stderr_offset, size - STDERR_TAIL_BYTES)
                stderr.seek(start)
                return stderr.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def mark_dead(self) -> None:
        """The session is gone (crash, closed connection): the next use starts a new one."""
        self._closing.set()

    def _abandon_runner(self) -> None:
        """Stops a runner that never became ready, without waiting for the server to go."""
        runner, self._runner, self._client = self._runner, None, None
        if runner is not None:
            runner.cancel()
            self._servers.track_closing(runner)

    async def _stop_runner(self) -> None:
        runner, self._runner, self._client = self._runner, None, None
        if runner is None:
            return
        self._closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(runner), 5.0)
        except TimeoutError:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner
        except Exception:
            log.debug("MCP server %s runner ended with an error", self.spec.name, exc_info=True)

    async def aclose(self) -> None:
        async with self._lock:
            await self._stop_runner()

    async def request(
        self, what: str, send: Callable[[Client], Coroutine[Any, Any, T]], seconds: float
    ) -> T:
        """Runs one MCP request with a bound; maps the SDK's failures to CodedError."""
        client = await self.client()
        name = self.spec.name
        try:
            async with asyncio.timeout(seconds + TIMEOUT_MARGIN):
                return await send(client)
        except TimeoutError:
            raise _timeout(name, what, seconds) from None
        except MCPError as exc:
            if self._unauthorized:
                # Reconnect on next use, with whatever token mcp_auth stores by then.
                self.mark_dead()
                raise self._servers.unauthorized(self.spec) from None
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise _timeout(name, what, seconds) from None
            if exc.code == mcp_types.CONNECTION_CLOSED:
                self.mark_dead()
                kind = "closed the connection" if self.spec.is_http else "exited or crashed"
                raise CodedError(
                    ErrorCode.SERVER_CRASHED,
                    f"MCP server '{name}' {kind} during {what}{self._stderr_note()}",
                ) from None
            raise
        except httpx2.HTTPStatusError as exc:
            if exc.response.status_code == 401:
                raise self._servers.unauthorized(self.spec) from None
            raise CodedError(
                ErrorCode.SERVER_ERROR,
                f"MCP server '{name}' answered HTTP {exc.response.status_code}",
            ) from None
        except httpx2.TransportError as exc:
            raise CodedError(
                ErrorCode.SERVER_UNREACHABLE,
                f"MCP server '{name}' is unreachable: {_describe(exc)}",
            ) from None

    async def list_tools(self, *, refresh: bool = False) -> list[mcp_types.Tool]:
        if self.tools is not None and not refresh:
            return self.tools
        timeout = self.spec.request_timeout
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await self.request("tools/list", partial(_list_tools, cursor=cursor), timeout)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.tools = tools
        return tools


async def _list_tools(client: Client, cursor: str | None) -> mcp_types.ListToolsResult:
    return await client.list_tools(cursor=cursor)


async def _list_resources(client: Client, cursor: str | None) -> mcp_types.ListResourcesResult:
    return await client.list_resources(cursor=cursor)


def _timeout(name: str, what: str, timeout: float) -> CodedError:
    return CodedError(
        ErrorCode.TIMEOUT, f"MCP server '{name}' did not answer {what} within {timeout:g} s"
    )


def _stdio_transport(params: StdioServerParameters, errlog: TextIO) -> Any:
    from mcp.client.stdio import stdio_client

    return stdio_client(params, errlog=errlog)


def _retrieve_exception(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _leaf_exceptions(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaf_exceptions(inner)]
    return [exc]


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _safe_file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:100] or "server"


class McpServers:
    """The daemon's MCP servers (per-daemon service; `aclose()` ends every server process)."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.settings: McpSettings = load_settings(daemon.config, daemon.env.snapshot())
        self.log_folder = daemon.config.state_root / MCP_LOG_FOLDER
        self.oauth = McpOAuth()
        self._connections = {
            name: McpConnection(spec, self) for name, spec in self.settings.servers.items()
        }
        # Runners given up on (their server is still being stopped by the SDK).
        self._closing: set[asyncio.Task[None]] = set()

    def track_closing(self, runner: asyncio.Task[None]) -> None:
        self._closing.add(runner)
        runner.add_done_callback(self._closing.discard)

    def names(self) -> list[str]:
        return sorted(self._connections)

    def connection(self, server: str) -> McpConnection:
        found = self._connections.get(server)
        if found is None:
            raise CodedError(ErrorCode.UNKNOWN_SERVER, self.unknown_server_message(server))
        return found

    def unknown_server_message(self, server: str) -> str:
        configured = ", ".join(self.names()) or "none"
        message = f"no MCP server named '{server}' (configured: {configured})"
        backend = sorted({tool.server for tool in self.settings.backend_tools if tool.server})
        if server in backend:
            message = f"MCP server '{server}' is an HTTP server run by the backend, not in the VM"
        if self.settings.problems:
            message += "; config problems: " + "; ".join(self.settings.problems)
        return message

    def unauthorized(self, spec: ServerSpec) -> CodedError:
        if self.settings.uses_oauth(spec):
            return CodedError(
                ErrorCode.AUTHORIZATION_REQUIRED,
                f"MCP server '{spec.name}' needs authorization: run mcp_auth for it first",
            )
        return CodedError(
            ErrorCode.UNAUTHORIZED,
            f"MCP server '{spec.name}' answered 401 Unauthorized (check its headers)",
        )

    async def reload(self) -> tuple[list[str], list[str], list[str]]:
        """Reads the MCP config again (an mcp.json changed): servers whose entry is the same keep
        their connection; removed and changed ones are closed. Returns (added, removed, changed)."""
        settings = load_settings(self.daemon.config, self.daemon.env.snapshot())
        old, new = self.settings.servers, settings.servers
        added = sorted(set(new) - set(old))
        removed = sorted(set(old) - set(new))
        changed = sorted(name for name in set(old) & set(new) if old[name] != new[name])
        self.settings = settings
        for name in removed + changed:
            connection = self._connections.pop(name)
            await connection.aclose()
        for name in added + changed:
            self._connections[name] = McpConnection(new[name], self)
        return added, removed, changed

    async def restart(self, server: str) -> None:
        connection = self._connections.get(server)
        if connection is not None:
            await connection.aclose()

    async def aclose(self) -> None:
        await asyncio.gather(
            *(connection.aclose() for connection in self._connections.values()),
            return_exceptions=True,
        )
        if self._closing:
            await asyncio.wait(self._closing, timeout=5.0)
        await self.oauth.aclose()

    # --- Tool lookup -------------------------------------------------------------------------

    async def available_tools(self) -> tuple[list[str], list[McpServerFailure]]:
        """Every tool as "server-tool" (VM and backend servers), and the servers that failed."""
        labels: list[str] = []
        failures: list[McpServerFailure] = []
        results = await asyncio.gather(
            *(self._tools_of(name) for name in self.names()), return_exceptions=True
        )
        for name, result in zip(self.names(), results, strict=True):
            if isinstance(result, CodedError):
                failures.append(McpServerFailure(server=name, message=result.message))
            elif isinstance(result, BaseException):
                log.warning("listing the tools of MCP server %s failed", name, exc_info=result)
                failures.append(McpServerFailure(server=name, message="listing its tools failed"))
            else:
                labels.extend(f"{name}-{tool.name}" for tool in result)
        labels.extend(
            f"{tool.server}-{tool.name}" if tool.server else tool.name
            for tool in self.settings.backend_tools
        )
        return labels, failures

    async def _tools_of(self, server: str) -> list[mcp_types.Tool]:
        return await self.connection(server).list_tools()

    async def has_tool(self, ref: ToolRef) -> bool:
        connection = self.connection(ref.server)
        tools = await connection.list_tools()
        if any(tool.name == ref.tool for tool in tools):
            return True
        tools = await connection.list_tools(refresh=True)
        return any(tool.name == ref.tool for tool in tools)

    def backend_tool(self, server: str, tool: str) -> bool:
        return any(
            item.name == tool and (not server or item.server in ("", server))
            for item in self.settings.backend_tools
        )

    def candidates(self, args: McpArgs) -> list[ToolRef]:
        """Where the tool may live, most specific first (checked against the servers' lists)."""
        if args.provider_identifier:
            tool = args.tool_name or _strip_prefix(args.name, args.provider_identifier)
            return [ToolRef(args.provider_identifier, tool)]
        name = args.tool_name or args.name
        known = {*self._connections, *(tool.server for tool in self.settings.backend_tools)}
        return [
            ToolRef(server, name[len(server) + 1 :])
            for server in sorted(known, key=len, reverse=True)
            if server and name.startswith(f"{server}-") and len(name) > len(server) + 1
        ]


def _strip_prefix(name: str, server: str) -> str:
    prefix = f"{server}-"
    return name[len(prefix) :] if name.startswith(prefix) and len(name) > len(prefix) else name


# --- Result mapping ------------------------------------------------------------------------------


def _decode_base64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        log.warning("an MCP server sent invalid base64 data (%d chars)", len(data))
        return b""


def content_to_proto(block: Any) -> McpContent | None:
    if isinstance(block, mcp_types.TextContent):
        return McpContent(text=block.text)
    if isinstance(block, mcp_types.ImageContent):
        return McpContent(
            image=McpImage(data=_decode_base64(block.data), mime_type=block.mime_type)
        )
    if isinstance(block, mcp_types.AudioContent):
        return McpContent(
            audio=McpAudio(data=_decode_base64(block.data), mime_type=block.mime_type)
        )
    if isinstance(block, mcp_types.EmbeddedResource):
        return McpContent(resource=_embedded_resource(block.resource))
    if isinstance(block, mcp_types.ResourceLink):
        return McpContent(
            resource_link=McpResourceLink(
                uri=str(block.uri),
                name=block.name,
                description=block.description or "",
                mime_type=block.mime_type or "",
            )
        )
    log.info("MCP content of type %s is not passed on", getattr(block, "type", type(block)))
    return None


def _embedded_resource(resource: Any) -> McpEmbeddedResource:
    embedded = McpEmbeddedResource(uri=str(resource.uri), mime_type=resource.mime_type or "")
    if isinstance(resource, mcp_types.TextResourceContents):
        embedded.text = resource.text
    elif isinstance(resource, mcp_types.BlobResourceContents):
        embedded.blob = _decode_base64(resource.blob)
    return embedded


def call_result_to_proto(result: mcp_types.CallToolResult) -> McpSuccess:
    success = McpSuccess(is_error=bool(result.is_error))
    for block in result.content:
        converted = content_to_proto(block)
        if converted is not None:
            success.content.append(converted)
    structured = result.structured_content
    if isinstance(structured, dict):
        try:
            success.structured_content.update(structured)
        except (ValueError, TypeError):
            log.warning("structured content that protobuf Struct cannot hold was dropped")
    return success


def _error(result_cls: type[Any], failure: CodedError) -> Any:
    return result_cls(error={"code": failure.code, "message": failure.message})


# --- Handlers ------------------------------------------------------------------------------------


async def mcp_call(args: McpArgs, ctx: CallContext) -> McpResult:
    servers = ctx.daemon.service(McpServers)
    try:
        ref = await _resolve(servers, args)
        if ref is None:
            return await _tool_not_found(servers, args)
        connection = servers.connection(ref.server)
        timeout = args.timeout_ms / 1000 if args.timeout_ms else connection.spec.request_timeout
        arguments = _struct_to_dict(args.args)
        result = await connection.request(
            f"the call to tool '{ref.tool}'",
            lambda client: client.call_tool(ref.tool, arguments, read_timeout_seconds=timeout),
            timeout,
        )
    except CodedError as failure:
        return _error(McpResult, failure)
    except MCPError as exc:
        return McpResult(
            error={"code": "mcp_error", "message": f"the MCP server answered: {exc.message}"}
        )
    return McpResult(success=call_result_to_proto(result))


async def _resolve(servers: McpServers, args: McpArgs) -> ToolRef | None:
    if not (args.name or args.tool_name):
        raise CodedError(ErrorCode.INVALID_ARGUMENT, "name or tool_name is required")
    for ref in servers.candidates(args):
        if servers.backend_tool(ref.server, ref.tool):
            raise _backend_failure(ref)
        if ref.server not in servers.names():
            if args.provider_identifier:
                raise CodedError(
                    ErrorCode.UNKNOWN_SERVER, servers.unknown_server_message(ref.server)
                )
            continue
        if await servers.has_tool(ref):
            return ref
    if args.provider_identifier:
        return None
    bare = args.tool_name or args.name
    if servers.backend_tool("", bare):
        raise _backend_failure(ToolRef("", bare))
    return await _find_unique(servers, bare)


async def _find_unique(servers: McpServers, tool: str) -> ToolRef | None:
    found: list[ToolRef] = []
    for server in servers.names():
        try:
            if await servers.has_tool(ToolRef(server, tool)):
                found.append(ToolRef(server, tool))
        except CodedError as failure:
            log.info("MCP server %s skipped while looking for %s: %s", server, tool, failure)
    if len(found) > 1:
        labels = ", ".join(ref.label() for ref in found)
        raise CodedError(
            ErrorCode.AMBIGUOUS_TOOL, f"tool '{tool}' exists on several MCP servers: {labels}"
        )
    return found[0] if found else None


def _backend_failure(ref: ToolRef) -> CodedError:
    where = f" of HTTP MCP server '{ref.server}'" if ref.server else ""
    return CodedError(
        ErrorCode.BACKEND_TOOL,
        f"tool '{ref.tool}'{where} is run by the backend, not by the exec daemon in the VM",
    )


async def _tool_not_found(servers: McpServers, args: McpArgs) -> McpResult:
    available, failures = await servers.available_tools()
    name = args.tool_name or args.name
    where = f" on MCP server '{args.provider_identifier}'" if args.provider_identifier else ""
    reason = f"no MCP tool '{name}'{where}"
    if not servers.names() and not servers.settings.backend_tools:
        reason += "; no MCP servers are configured"
    if failures:
        reason += "; unreachable servers: " + "; ".join(
            f"{failure.server}: {failure.message}" for failure in failures
        )
    return McpResult(
        tool_not_found=McpToolNotFound(name=name, reason=reason, available_tools=available)
    )


def _struct_to_dict(struct: Struct) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    converted: dict[str, Any] = MessageToDict(struct)
    # JSON numbers arrive as floats; MCP servers validating integers want 3, not 3.0.
    return {key: _integral(value) for key, value in converted.items()}


def _integral(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, list):
        return [_integral(item) for item in value]
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    return value


async def list_mcp_resources(
    args: ListMcpResourcesArgs, ctx: CallContext
) -> ListMcpResourcesResult:
    servers = ctx.daemon.service(McpServers)
    try:
        names = [servers.connection(args.server).spec.name] if args.server else servers.names()
    except CodedError as failure:
        return _error(ListMcpResourcesResult, failure)
    success = ListMcpResourcesSuccess()
    results = await asyncio.gather(
        *(_resources_of(servers.connection(name)) for name in names), return_exceptions=True
    )
    for name, result in zip(names, results, strict=True):
        if isinstance(result, CodedError):
            success.failures.append(McpServerFailure(server=name, message=result.message))
        elif isinstance(result, MCPError):
            success.failures.append(McpServerFailure(server=name, message=result.message))
        elif isinstance(result, BaseException):
            log.warning("listing the resources of MCP server %s failed", name, exc_info=result)
            success.failures.append(
                McpServerFailure(server=name, message="listing its resources failed")
            )
        else:
            success.resources.extend(result)
    if args.server and success.failures and not success.resources:
        first = success.failures[0]
        return ListMcpResourcesResult(error={"code": "server_failed", "message": first.message})
    return ListMcpResourcesResult(success=success)


async def _resources_of(connection: McpConnection) -> list[McpResource]:
    client = await connection.client()
    if client.server_capabilities.resources is None:
        return []
    resources: list[McpResource] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await connection.request(
            "resources/list",
            partial(_list_resources, cursor=cursor),
            connection.spec.request_timeout,
        )
        resources.extend(
            McpResource(
                server=connection.spec.name,
                uri=str(item.uri),
                name=item.name,
                description=item.description or "",
                mime_type=item.mime_type or "",
            )
            for item in page.resources
        )
        cursor = page.next_cursor
        if not cursor:
            break
    return resources


def _resource_missing(exc: MCPError) -> bool:
    text = exc.message.lower()
    return exc.code == -32002 or (
        exc.code == mcp_types.INVALID_PARAMS and ("unknown resource" in text or "not found" in text)
    )


async def read_mcp_resource(args: ReadMcpResourceArgs, ctx: CallContext) -> ReadMcpResourceResult:
    if not args.server or not args.uri:
        return ReadMcpResourceResult(
            error={"code": "invalid_argument", "message": "server and uri are required"}
        )
    servers = ctx.daemon.service(McpServers)
    try:
        connection = servers.connection(args.server)
        result = await connection.request(
            f"reading {args.uri}",
            lambda client: client.read_resource(args.uri),
            connection.spec.request_timeout,
        )
    except CodedError as failure:
        return _error(ReadMcpResourceResult, failure)
    except MCPError as exc:
        if _resource_missing(exc):
            return ReadMcpResourceResult(
                not_found={"path": args.uri, "reason": f"MCP server '{args.server}': {exc.message}"}
            )
        return ReadMcpResourceResult(
            error={"code": "mcp_error", "message": f"the MCP server answered: {exc.message}"}
        )
    success = _resource_success(args.uri, result.contents)
    if args.download_path:
        target = resolve_path(ctx.daemon.workspace, args.download_path)
        data = success.blob if success.blob else success.text.encode("utf-8")
        try:
            await asyncio.to_thread(atomic_write, target, data, rules=write_rules(ctx))
        except CodedError as failure:
            typed = failure.code in ("permission_denied", "invalid_argument")
            code = failure.code if typed else "write_failed"
            return ReadMcpResourceResult(error={"code": code, "message": failure.message})
        success.ClearField("text")
        success.ClearField("blob")
        success.download_path = str(target)
    return ReadMcpResourceResult(success=success)


def _resource_success(uri: str, contents: list[Any]) -> ReadMcpResourceSuccess:
    success = ReadMcpResourceSuccess(uri=uri)
    texts: list[str] = []
    for item in contents:
        if not success.mime_type and item.mime_type:
            success.mime_type = item.mime_type
        if isinstance(item, mcp_types.TextResourceContents):
            texts.append(item.text)
        elif isinstance(item, mcp_types.BlobResourceContents) and not success.blob:
            success.blob = _decode_base64(item.blob)
    success.text = "".join(texts)
    success.size_bytes = len(success.blob) if success.blob else len(success.text.encode())
    return success


async def mcp_auth(args: McpAuthArgs, ctx: CallContext) -> McpAuthResult:
    servers = ctx.daemon.service(McpServers)
    try:
        spec = _oauth_target(servers, args.server)
        token_before = servers.oauth.access_token(spec.name, spec.url)
        if args.authorization_code:
            success = await servers.oauth.complete(
                spec.name, spec.url, args.authorization_code, args.state
            )
        else:
            success = await servers.oauth.status(spec.name, spec.url, args.redirect_uri)
        if servers.oauth.access_token(spec.name, spec.url) != token_before:
            # The open connection (if any) still sends the old token.
            await servers.restart(spec.name)
    except CodedError as failure:
        return _error(McpAuthResult, failure)
    return McpAuthResult(success=success)


def _oauth_target(servers: McpServers, server: str) -> ServerSpec:
    if not server:
        raise CodedError(ErrorCode.INVALID_ARGUMENT, "server is required")
    settings = servers.settings
    spec = settings.servers.get(server)
    if spec is None:
        url = settings.oauth_servers.get(server) or (
            server if server.rstrip("/") in settings.oauth_urls else ""
        )
        if not url:
            raise CodedError(ErrorCode.UNKNOWN_SERVER, servers.unknown_server_message(server))
        return ServerSpec(name=server, source="--mcp-oauth-server-urls", url=url)
    if not spec.is_http:
        raise CodedError(
            ErrorCode.NOT_OAUTH, f"MCP server '{server}' is a stdio server; OAuth is for URLs"
        )
    if not settings.uses_oauth(spec):
        raise CodedError(
            ErrorCode.NOT_OAUTH, f"MCP server '{server}' is not listed in --mcp-oauth-server-urls"
        )
    named = settings.oauth_servers.get(server)
    if named and named.rstrip("/") != spec.url.rstrip("/"):
        # An mcp.json entry (the workspace's, say) reusing the name at another URL: the operator
        # named this server's URL, and only that one is authorized.
        return ServerSpec(name=server, source="--mcp-oauth-server-urls", url=named)
    return spec


def refresh_tokens(daemon: Daemon) -> Mapping[str, McpOAuthStoredData]:
    """For ControlService.GetMcpRefreshTokens: the OAuth data kept for each server."""
    return daemon.service(McpServers).oauth.stored()
