"""The MCP tool catalogue behind ControlService.ListMcpTools: every configured server, its state
and its tools (with their input schemas), resources and prompts counts.

Each server is listed by a task of its own over the connection tool calls use (tools/mcp_client.py;
listing starts a stdio server or connects to a URL), bounded by the server's `startupTimeout`
plus LIST_SECONDS. An answer waits at most ANSWER_WAIT_SECONDS for the servers not listed yet:
one still starting then shows as `starting` (its listing goes on, and the next answer has it),
so one slow server never holds the others' answer longer than that.

The result is cached: a listed server is listed again only when its config entry changes (an
mcp.json edited: each answer compares the config files' stat with the last load, and the
context watcher reloads on change), or, after a failure, once RETRY_FAILED_SECONDS have passed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError

from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.state import Daemon
from tools.mcp_client import MAX_PAGES, McpConnection, McpServers
from tools.mcp_config import ServerSpec

log = logging.getLogger(__name__)

ANSWER_WAIT_SECONDS = 5.0
LIST_SECONDS = 30.0
RETRY_FAILED_SECONDS = 30.0

CONNECTED, FAILED, NEEDS_AUTH, STARTING, BACKEND = (
    "connected",
    "failed",
    "needs_auth",
    "starting",
    "backend",
)
_AUTH_CODES = (ErrorCode.AUTHORIZATION_REQUIRED, ErrorCode.UNAUTHORIZED)


@dataclass(frozen=True)
class ToolInfo:
    name: str
    description: str
    input_schema: str
    title: str = ""


@dataclass
class ServerReport:
    name: str
    state: str
    source: str
    transport: str
    error: str = ""
    tools: list[ToolInfo] = field(default_factory=list)
    resource_count: int = 0
    prompt_count: int = 0


@dataclass
class _Listing:
    spec: ServerSpec
    task: asyncio.Task[ServerReport]
    started: float


@dataclass(frozen=True)
class ConfigChange:
    added: list[str]
    removed: list[str]
    changed: list[str]


def _fingerprint(paths: list[Path]) -> tuple[tuple[int, int, int] | None, ...]:
    found: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            found.append(None)
        else:
            found.append((info.st_mtime_ns, info.st_size, info.st_ino))
    return tuple(found)


class McpCatalog:
    """Per-daemon service (`daemon.service(McpCatalog)`); `aclose()` ends running listings."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        self._servers = daemon.service(McpServers)
        self._listings: dict[str, _Listing] = {}
        self._config_lock = asyncio.Lock()
        self._seen: tuple[tuple[int, int, int] | None, ...] | None = None

    def config_files(self) -> list[Path]:
        """The files the MCP config comes from, besides --mcp-config's text."""
        config = self._daemon.config
        home = Path(self._daemon.env.get("HOME") or Path.home())
        files = [home / ".cursor" / "mcp.json", config.workspace / ".cursor" / "mcp.json"]
        if config.http_mcp_tools_file:
            files.append(Path(config.http_mcp_tools_file))
        return files

    async def refresh_config(self) -> ConfigChange:
        """Reloads the config when one of its files changed since the last load."""
        async with self._config_lock:
            now = _fingerprint(self.config_files())
            if now == self._seen:
                return ConfigChange([], [], [])
            self._seen = now
            added, removed, changed = await self._servers.reload()
            for name in removed + changed:
                listing = self._listings.pop(name, None)
                if listing is not None:
                    listing.task.cancel()
            return ConfigChange(added, removed, changed)

    async def servers(
        self, refusal: Callable[[ServerSpec], str | None] = lambda _spec: None
    ) -> tuple[list[ServerReport], list[str]]:
        """Every configured server's report, and the config sources that could not be read.
        A server `refusal` gives a reason for is not started (nor connected to): reported failed."""
        await self.refresh_config()
        refused: dict[str, ServerReport] = {}
        for name in self._servers.names():
            spec = self._servers.connection(name).spec
            if (why := refusal(spec)) is not None:
                refused[name] = _empty(spec, FAILED, why)
        names = [name for name in self._servers.names() if name not in refused]
        tasks = [self._listing(name).task for name in names]
        pending = [task for task in tasks if not task.done()]
        if pending:
            await asyncio.wait(pending, timeout=ANSWER_WAIT_SECONDS)
        reports = [self._report(name, task) for name, task in zip(names, tasks, strict=True)]
        reports.extend(refused.values())
        reports.extend(self._backend_reports())
        return reports, list(self._servers.settings.problems)

    def _listing(self, name: str) -> _Listing:
        connection = self._servers.connection(name)
        listing = self._listings.get(name)
        if listing is not None and listing.spec == connection.spec and not self._stale(listing):
            return listing
        if listing is not None:
            listing.task.cancel()
        task = asyncio.create_task(_list_server(connection), name=f"mcp-catalog:{name}")
        listing = self._listings[name] = _Listing(connection.spec, task, time.monotonic())
        return listing

    @staticmethod
    def _stale(listing: _Listing) -> bool:
        if not listing.task.done() or listing.task.cancelled():
            return listing.task.cancelled()
        failed = listing.task.result().state != CONNECTED
        return failed and time.monotonic() - listing.started > RETRY_FAILED_SECONDS

    def _report(self, name: str, task: asyncio.Task[ServerReport]) -> ServerReport:
        if task.done() and not task.cancelled():
            return task.result()
        spec = self._servers.connection(name).spec
        wait = spec.startup_timeout + LIST_SECONDS
        return _empty(
            spec,
            STARTING,
            f"not listed within {ANSWER_WAIT_SECONDS:g} s; still trying (for up to {wait:g} s)",
        )

    def _backend_reports(self) -> list[ServerReport]:
        by_server: dict[str, ServerReport] = {}
        for tool in self._servers.settings.backend_tools:
            report = by_server.setdefault(
                tool.server,
                ServerReport(tool.server, BACKEND, "--http-mcp-tools-file", "backend"),
            )
            report.tools.append(ToolInfo(tool.name, tool.description, tool.input_schema))
        return list(by_server.values())

    async def aclose(self) -> None:
        tasks = [listing.task for listing in self._listings.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)


def _empty(spec: ServerSpec, state: str, error: str) -> ServerReport:
    transport = "http" if spec.is_http else "stdio"
    return ServerReport(spec.name, state, spec.source, transport, error)


async def _list_server(connection: McpConnection) -> ServerReport:
    spec = connection.spec
    if spec.problem:
        return _empty(spec, FAILED, spec.problem)
    try:
        async with asyncio.timeout(spec.startup_timeout + LIST_SECONDS):
            tools = await connection.list_tools(refresh=True)
            client = await connection.client()
            capabilities = client.server_capabilities
            resources = await _count(connection, "resources/list", _resources_page)
            prompts = await _count(connection, "prompts/list", _prompts_page)
    except CodedError as failure:
        state = NEEDS_AUTH if failure.code in _AUTH_CODES else FAILED
        return _empty(spec, state, failure.message)
    except MCPError as exc:
        return _empty(spec, FAILED, f"the MCP server answered: {exc.message}")
    except TimeoutError:
        wait = spec.startup_timeout + LIST_SECONDS
        return _empty(spec, FAILED, f"its tools were not listed within {wait:g} s")
    report = _empty(spec, CONNECTED, "")
    report.tools = [_tool_info(tool) for tool in tools]
    report.resource_count = resources if capabilities.resources is not None else 0
    report.prompt_count = prompts if capabilities.prompts is not None else 0
    return report


def _tool_info(tool: mcp_types.Tool) -> ToolInfo:
    return ToolInfo(
        name=tool.name,
        description=tool.description or "",
        input_schema=json.dumps(tool.input_schema, sort_keys=True),
        title=tool.title or "",
    )


async def _resources_page(client: Client, cursor: str | None) -> tuple[int, str | None]:
    if client.server_capabilities.resources is None:
        return 0, None
    page = await client.list_resources(cursor=cursor)
    return len(page.resources), page.next_cursor


async def _prompts_page(client: Client, cursor: str | None) -> tuple[int, str | None]:
    if client.server_capabilities.prompts is None:
        return 0, None
    page = await client.list_prompts(cursor=cursor)
    return len(page.prompts), page.next_cursor


async def _count(
    connection: McpConnection,
    what: str,
    page: Callable[[Client, str | None], Awaitable[tuple[int, str | None]]],
) -> int:
    total = 0
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        current = cursor

        async def send(client: Client, current: str | None = current) -> Any:
            return await page(client, current)

        count, cursor = await connection.request(what, send, LIST_SECONDS)
        total += count
        if not cursor:
            break
    return total
