"""Which MCP servers the daemon knows: `--mcp-config`, the mcp.json files, OAuth and backend tools.

The shape is Cursor's mcp.json: `{"mcpServers": {"name": {"command", "args", "env", "cwd"} |
{"url", "headers"}}}`, read from `~/.cursor/mcp.json`, then `<workspace>/.cursor/mcp.json`, then
`--mcp-config` (a later source replaces a server of the same name; given as a path, its file is
read once when the daemon starts: exec_daemon/cli.py). Every source may carry comments (`//`,
`/* */`) and trailing commas, as environment.json may. Strings may use
`${env:NAME}`, `${workspaceFolder}` and `${userHome}`. Beyond Cursor's keys a server may set
`timeout` (seconds one MCP request may take, default 300) and `startupTimeout` (seconds to
start and finish the MCP handshake, default 30); `"disabled": true` skips it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.environment_file import strip_comments
from exec_daemon.kernel.paths import read_config_text

log = logging.getLogger(__name__)

DEFAULT_REQUEST_TIMEOUT = 300.0
DEFAULT_STARTUP_TIMEOUT = 30.0
_VARIABLE = re.compile(r"\$\{(env:[A-Za-z_][A-Za-z0-9_]*|workspaceFolder|userHome)\}")


@dataclass(frozen=True)
class ServerSpec:
    name: str
    # Where it was configured ("--mcp-config", a file path), for messages.
    source: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    # Why the entry cannot be used; calls to this server answer it.
    problem: str = ""

    @property
    def is_http(self) -> bool:
        return bool(self.url)


@dataclass(frozen=True)
class BackendTool:
    """A tool of an HTTP MCP server that the backend runs (from `--http-mcp-tools-file`)."""

    server: str
    name: str
    description: str = ""
    # Its input JSON Schema as JSON text, when the file gives one.
    input_schema: str = ""


@dataclass(frozen=True)
class McpSettings:
    servers: Mapping[str, ServerSpec]
    backend_tools: tuple[BackendTool, ...] = ()
    # Names and URLs of servers that authorize with OAuth (`--mcp-oauth-server-urls`).
    oauth_servers: Mapping[str, str] = field(default_factory=dict)
    oauth_urls: frozenset[str] = frozenset()
    # Sources that could not be read at all (bad JSON, wrong shape).
    problems: tuple[str, ...] = ()

    def uses_oauth(self, spec: ServerSpec) -> bool:
        return spec.name in self.oauth_servers or (
            spec.is_http and spec.url.rstrip("/") in self.oauth_urls
        )


class _Substitution:
    def __init__(self, env: Mapping[str, str], workspace: str, home: str) -> None:
        self._values = {"workspaceFolder": workspace, "userHome": home}
        self._env = env

    def __call__(self, text: str) -> str:
        return _VARIABLE.sub(self._replace, text)

    def _replace(self, match: re.Match[str]) -> str:
        key = match.group(1)
        if key.startswith("env:"):
            return self._env.get(key[4:], "")
        return self._values[key]


def workspace_mcp_json(config: DaemonConfig) -> Path:
    """The workspace's mcp.json: the repository's (and so possibly the agent's) choice of
    servers, not the operator's. ListMcpTools starts them only with consent
    (exec_daemon/rpc/agent_context.py) and their URLs reach public addresses only
    (tools/mcp_client.py)."""
    return config.workspace / ".cursor" / "mcp.json"


def from_workspace(spec: ServerSpec, config: DaemonConfig) -> bool:
    return spec.source == str(workspace_mcp_json(config))


def load_settings(config: DaemonConfig, env: Mapping[str, str]) -> McpSettings:
    home = Path(env.get("HOME") or Path.home())
    substitute = _Substitution(env, str(config.workspace), str(home))
    servers: dict[str, ServerSpec] = {}
    problems: list[str] = []
    sources: list[tuple[str, str]] = []
    for path in (home / ".cursor" / "mcp.json", workspace_mcp_json(config)):
        text = _read_optional(path, problems)
        if text is not None:
            sources.append((str(path), text))
    if config.mcp_config:
        sources.append(("--mcp-config", config.mcp_config))
    for source, text in sources:
        try:
            servers.update(parse_servers(text, source, substitute))
        except ValueError as exc:
            problems.append(f"{source}: {exc}")
            log.warning("MCP config %s ignored: %s", source, exc)
    oauth_servers, oauth_urls = _oauth_servers(config.mcp_oauth_server_urls, problems)
    backend_tools = _backend_tools(config.http_mcp_tools_file, problems)
    return McpSettings(
        servers=servers,
        backend_tools=tuple(backend_tools),
        oauth_servers=oauth_servers,
        oauth_urls=frozenset(oauth_urls),
        problems=tuple(problems),
    )


def _read_optional(path: Path, problems: list[str]) -> str | None:
    """The file's text; None when it is missing, or unreadable (said in `problems`)."""
    try:
        return read_config_text(path)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        problems.append(f"{path}: cannot be read ({why})")
        log.warning("cannot read %s: %s", path, why)
        return None


def _json_object(text: str) -> Any:
    """JSON with comments and trailing commas, as environment.json is read."""
    try:
        return json.loads(strip_comments(text))
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc.msg} at line {exc.lineno})") from None


def parse_servers(
    text: str, source: str, substitute: _Substitution | None = None
) -> dict[str, ServerSpec]:
    """The servers of one mcp.json text; an unusable entry becomes a spec with `problem` set."""
    document = _json_object(text)
    if not isinstance(document, dict):
        raise ValueError("expected a JSON object")
    entries = document.get("mcpServers", document)
    if not isinstance(entries, dict):
        raise ValueError('"mcpServers" must be an object')
    substitute = substitute or _Substitution({}, "", "")
    servers = {}
    for name, entry in entries.items():
        if isinstance(entry, dict) and (
            entry.get("disabled") is True or entry.get("enabled") is False
        ):
            continue
        servers[name] = _parse_server(name, entry, source, substitute)
    return servers


def _parse_server(name: str, entry: Any, source: str, substitute: _Substitution) -> ServerSpec:
    def broken(problem: str) -> ServerSpec:
        return ServerSpec(name=name, source=source, problem=f"{source}: {problem}")

    if not isinstance(entry, dict):
        return broken("the entry must be an object")
    command, url = entry.get("command"), entry.get("url") or entry.get("serverUrl")
    if entry.get("type") == "sse":
        return broken("SSE servers are not supported; use a streamable-HTTP URL")
    if bool(command) == bool(url):
        return broken('give either "command" (stdio) or "url" (streamable HTTP)')
    try:
        request_timeout = _seconds(entry, "timeout", DEFAULT_REQUEST_TIMEOUT)
        startup_timeout = _seconds(entry, "startupTimeout", DEFAULT_STARTUP_TIMEOUT)
        args = _strings(entry.get("args", []), "args")
        env = _string_map(entry.get("env", {}), "env")
        headers = _string_map(entry.get("headers", {}), "headers")
    except ValueError as exc:
        return broken(str(exc))
    if command is not None and not isinstance(command, str):
        return broken('"command" must be a string')
    if url is not None and not isinstance(url, str):
        return broken('"url" must be a string')
    if url and not re.match(r"^https?://", substitute(url)):
        return broken('"url" must be an http:// or https:// URL')
    cwd = entry.get("cwd", "")
    return ServerSpec(
        name=name,
        source=source,
        command=substitute(command or ""),
        args=tuple(substitute(arg) for arg in args),
        env={key: substitute(value) for key, value in env.items()},
        cwd=substitute(cwd) if isinstance(cwd, str) else "",
        url=substitute(url or ""),
        headers={key: substitute(value) for key, value in headers.items()},
        request_timeout=request_timeout,
        startup_timeout=startup_timeout,
    )


def _seconds(entry: dict[str, Any], key: str, default: float) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f'"{key}" must be a positive number of seconds')
    return float(value)


def _strings(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f'"{key}" must be a list of strings')
    return value


def _string_map(value: Any, key: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise ValueError(f'"{key}" must be an object of strings')
    return value


def _oauth_servers(text: str | None, problems: list[str]) -> tuple[dict[str, str], set[str]]:
    """`--mcp-oauth-server-urls`: a list of URLs, an object name → URL, or a list of {name, url}."""
    if not text:
        return {}, set()
    try:
        document = _json_object(text)
    except ValueError as exc:
        problems.append(f"--mcp-oauth-server-urls: {exc}")
        return {}, set()
    named: dict[str, str] = {}
    urls: set[str] = set()
    if not isinstance(document, dict | list):
        problems.append("--mcp-oauth-server-urls: expected a list of URLs or an object")
        return {}, set()
    items = document.items() if isinstance(document, dict) else enumerate(document)
    for key, value in items:
        if isinstance(value, str):
            if isinstance(key, str):
                named[key] = value
            urls.add(value.rstrip("/"))
        elif isinstance(value, dict) and isinstance(value.get("url"), str):
            if isinstance(value.get("name"), str):
                named[value["name"]] = value["url"]
            urls.add(value["url"].rstrip("/"))
    return named, urls


def _backend_tools(path: str | None, problems: list[str]) -> list[BackendTool]:
    """`--http-mcp-tools-file`: a JSON list of tool definitions, each naming its server.

    Accepted: `[{"name", "description", "serverName" | "server" | "providerIdentifier"}]`,
    `{"tools": [...]}`, or `{"<server>": [{"name", ...}]}`.
    """
    if not path:
        return []
    text = _read_optional(Path(path), problems)
    if text is None:
        problems.append(f"--http-mcp-tools-file: cannot read {path}")
        return []
    try:
        document = _json_object(text)
    except ValueError as exc:
        problems.append(f"--http-mcp-tools-file: {exc}")
        return []
    if isinstance(document, dict) and isinstance(document.get("tools"), list):
        document = document["tools"]
    grouped: list[tuple[str, Any]] = []
    if isinstance(document, list):
        grouped = [("", item) for item in document]
    elif isinstance(document, dict):
        grouped = [
            (server, item)
            for server, items in document.items()
            if isinstance(items, list)
            for item in items
        ]
    tools = []
    for server, item in grouped:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        owner = server or next(
            (
                item[key]
                for key in ("serverName", "server", "providerIdentifier", "provider_identifier")
                if isinstance(item.get(key), str)
            ),
            "",
        )
        description = item.get("description")
        schema = next(
            (
                item[key]
                for key in ("inputSchema", "input_schema")
                if isinstance(item.get(key), dict)
            ),
            None,
        )
        tools.append(
            BackendTool(
                server=owner,
                name=item["name"],
                description=description if isinstance(description, str) else "",
                input_schema=json.dumps(schema) if schema is not None else "",
            )
        )
    return tools
