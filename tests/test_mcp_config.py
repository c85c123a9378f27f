"""tools/mcp_config.py: the MCP config sources, their precedence, and what bad entries become."""

from __future__ import annotations

import json
from pathlib import Path

from exec_daemon.kernel.config import DaemonConfig
from tools.mcp_config import load_settings, parse_servers


def settings_for(tmp_path: Path, **options: str):  # type: ignore[no-untyped-def]
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    config = DaemonConfig(auth_token="t", workspace=workspace, **options)  # type: ignore[arg-type]
    return load_settings(config, {"HOME": str(tmp_path / "home"), "TOKEN": "s3cret"})


def test_sources_in_order_of_precedence(tmp_path: Path) -> None:
    home = tmp_path / "home" / ".cursor"
    home.mkdir(parents=True)
    (home / "mcp.json").write_text(
        json.dumps({"mcpServers": {"a": {"command": "home-a"}, "b": {"command": "home-b"}}})
    )
    (tmp_path / "workspace" / ".cursor").mkdir(parents=True)
    (tmp_path / "workspace" / ".cursor" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"b": {"command": "workspace-b"}, "c": {"command": "ws-c"}}})
    )
    cli = json.dumps({"mcpServers": {"c": {"command": "cli-c"}}})
    servers = settings_for(tmp_path, mcp_config=cli).servers
    assert {name: spec.command for name, spec in servers.items()} == {
        "a": "home-a",
        "b": "workspace-b",
        "c": "cli-c",
    }


def test_variables_are_substituted(tmp_path: Path) -> None:
    entry = {
        "url": "https://mcp.example/${workspaceFolder}",
        "headers": {"Authorization": "Bearer ${env:TOKEN}", "X-Missing": "${env:NOPE}"},
    }
    spec = settings_for(tmp_path, mcp_config=json.dumps({"mcpServers": {"x": entry}})).servers["x"]
    assert spec.url == f"https://mcp.example/{tmp_path / 'workspace'}"
    assert spec.headers == {"Authorization": "Bearer s3cret", "X-Missing": ""}


def test_bad_entries_are_kept_with_their_problem() -> None:
    servers = parse_servers(
        json.dumps(
            {
                "mcpServers": {
                    "both": {"command": "x", "url": "http://h/"},
                    "neither": {"args": []},
                    "args": {"command": "x", "args": "not a list"},
                    "timeout": {"command": "x", "timeout": -1},
                    "scheme": {"url": "file:///etc/passwd"},
                    "sse": {"type": "sse", "url": "http://h/sse"},
                    "off": {"command": "x", "disabled": True},
                    "ok": {"command": "x", "timeout": 2.5},
                }
            }
        ),
        "test",
    )
    assert "off" not in servers
    assert servers["ok"].problem == "" and servers["ok"].request_timeout == 2.5
    problems = {name: spec.problem for name, spec in servers.items() if name != "ok"}
    assert all(problem.startswith("test: ") for problem in problems.values())
    assert "either" in problems["both"] and "either" in problems["neither"]
    assert "args" in problems["args"] and "timeout" in problems["timeout"]
    assert "http" in problems["scheme"] and "SSE" in problems["sse"]


def test_unreadable_sources_are_reported_not_fatal(tmp_path: Path) -> None:
    settings = settings_for(
        tmp_path,
        mcp_config="{not json",
        mcp_oauth_server_urls="42",
        http_mcp_tools_file=str(tmp_path / "missing.json"),
    )
    assert settings.servers == {}
    assert len(settings.problems) == 3
    assert settings.problems[0].startswith("--mcp-config: invalid JSON")


def test_oauth_servers_and_backend_tools_shapes(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"linear": [{"name": "search"}], "github": [{"nope": 1}]}))
    settings = settings_for(
        tmp_path,
        mcp_config=json.dumps({"remote": {"url": "https://mcp.example/mcp/"}}),
        mcp_oauth_server_urls=json.dumps(["https://mcp.example/mcp"]),
        http_mcp_tools_file=str(tools),
    )
    assert settings.uses_oauth(settings.servers["remote"])
    assert [(tool.server, tool.name) for tool in settings.backend_tools] == [("linear", "search")]
    named = settings_for(tmp_path, mcp_oauth_server_urls=json.dumps({"notion": "https://n/mcp"}))
    assert dict(named.oauth_servers) == {"notion": "https://n/mcp"}


def test_mcp_json_with_comments_and_trailing_commas_is_read(tmp_path: Path) -> None:
    cursor = tmp_path / "workspace" / ".cursor"
    cursor.mkdir(parents=True)
    (cursor / "mcp.json").write_text(
        '{\n  // the docs server\n  "mcpServers": {\n    "docs": {"command": "docs-mcp", /* stdio */'
        ' "args": ["--a", "//not-a-comment"],},\n  },\n}\n'
    )
    settings = settings_for(tmp_path)
    assert settings.problems == ()
    assert settings.servers["docs"].args == ("--a", "//not-a-comment")
