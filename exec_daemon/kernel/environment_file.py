"""`<workspace>/.cursor/environment.json`: the VM set-up a repository asks for (read and written).

The file is JSON with comments (`//`, `/* */`) and trailing commas allowed. Keys follow Cursor's
published schema; an unknown key is an error that names it, so a typo is not silently ignored.
exec_daemon/terminals/environment.py runs it; `setup_vm_environment_tool_call` (tools/vm_setup.py)
stores the agent's install script in it (`store_install_command`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exec_daemon.kernel.paths import OnlyPath, PathRefused, read_config_text, write_checked

ENVIRONMENT_FILE = Path(".cursor/environment.json")

TOP_LEVEL_KEYS: dict[str, type] = {
    "name": str,
    "user": str,
    "install": str,
    "start": str,
    "repositoryDependencies": list,
    "ports": list,
    "terminals": list,
    "build": dict,
    "snapshot": str,
    "agentCanUpdateSnapshot": bool,
}
TERMINAL_KEYS: dict[str, type] = {"command": str, "name": str, "description": str}
PORT_KEYS: dict[str, type] = {"port": int, "name": str}
BUILD_KEYS: dict[str, type] = {"dockerfile": str, "context": str}


class EnvironmentConfigError(ValueError):
    """The file cannot be used; the message says where and why."""


@dataclass(frozen=True)
class TerminalConfig:
    command: str
    name: str = ""
    description: str = ""


@dataclass(frozen=True)
class EnvironmentConfig:
    path: Path
    data: dict[str, Any]
    install: str | None
    start: str | None
    terminals: tuple[TerminalConfig, ...]
    user: str | None = None


def strip_comments(text: str) -> str:
    """JSON with comments and trailing commas -> plain JSON (line numbers are kept)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append(text[i : end + 1])
            i = end + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise EnvironmentConfigError("a /* comment is never closed")
            out.append("\n" * text.count("\n", i, end))
            i = end + 2
        elif char in "]}":
            _drop_trailing_comma(out)
            out.append(char)
            i += 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _drop_trailing_comma(out: list[str]) -> None:
    for index in range(len(out) - 1, -1, -1):
        piece = out[index]
        if piece.strip() == "":
            continue
        stripped = piece.rstrip()
        if stripped.endswith(",") and not piece.startswith('"'):
            out[index] = stripped[:-1] + piece[len(stripped) :]
        return


def _check_type(value: Any, expected: type, where: str) -> None:
    # bool is an int in Python; the schema keeps them apart.
    ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
    if not ok:
        raise EnvironmentConfigError(
            f"{where}: must be {_type_name(expected)}, got {_type_name(type(value))}"
        )


def _type_name(kind: type) -> str:
    return {
        str: "a string",
        int: "an integer",
        bool: "true or false",
        list: "an array",
        dict: "an object",
        float: "a number",
        type(None): "null",
    }.get(kind, kind.__name__)


def _check_object(value: Any, keys: dict[str, type], where: str, required: str = "") -> None:
    _check_type(value, dict, where)
    unknown = sorted(set(value) - set(keys))
    if unknown:
        raise EnvironmentConfigError(
            f"{where}: unknown key {unknown[0]!r} (known keys: {', '.join(keys)})"
        )
    if required and required not in value:
        raise EnvironmentConfigError(f"{where}: {required!r} is required")
    for key, expected in keys.items():
        if key in value:
            _check_type(value[key], expected, f"{where}.{key}")


def _terminal(value: Any, where: str) -> TerminalConfig:
    _check_object(value, TERMINAL_KEYS, where, required="command")
    return TerminalConfig(value["command"], value.get("name", ""), value.get("description", ""))


def validate(data: Any) -> tuple[TerminalConfig, ...]:
    """Checks the parsed file against the schema; returns its terminals, flattened."""
    where = "top level"
    _check_type(data, dict, where)
    unknown = sorted(set(data) - set(TOP_LEVEL_KEYS))
    if unknown:
        raise EnvironmentConfigError(
            f"unknown key {unknown[0]!r} at the top level (known keys: {', '.join(TOP_LEVEL_KEYS)})"
        )
    for key, expected in TOP_LEVEL_KEYS.items():
        if key in data:
            _check_type(data[key], expected, key)
    for index, dependency in enumerate(data.get("repositoryDependencies", []), 1):
        _check_type(dependency, str, f"repositoryDependencies[{index}]")
    for index, port in enumerate(data.get("ports", []), 1):
        _check_object(port, PORT_KEYS, f"ports[{index}]", required="port")
        if not 1 <= port["port"] <= 65535:
            raise EnvironmentConfigError(f"ports[{index}].port: must be 1..65535")
    if "build" in data:
        _check_object(data["build"], BUILD_KEYS, "build", required="dockerfile")
    terminals: list[TerminalConfig] = []
    for index, entry in enumerate(data.get("terminals", []), 1):
        # An entry may be a group of terminals (panes of one window); each runs on its own.
        group = entry if isinstance(entry, list) else [entry]
        for sub, item in enumerate(group, 1):
            label = f"terminals[{index}]" + (f"[{sub}]" if isinstance(entry, list) else "")
            terminals.append(_terminal(item, label))
    return tuple(terminals)


def parse_environment(text: str, path: Path) -> EnvironmentConfig:
    try:
        data = json.loads(strip_comments(text))
    except json.JSONDecodeError as exc:
        raise EnvironmentConfigError(
            f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except EnvironmentConfigError as exc:
        raise EnvironmentConfigError(f"{path}: {exc}") from None
    try:
        terminals = validate(data)
    except EnvironmentConfigError as exc:
        raise EnvironmentConfigError(f"{path}: {exc}") from None
    return EnvironmentConfig(
        path=path,
        data=data,
        install=data.get("install") or None,
        start=data.get("start") or None,
        terminals=terminals,
        user=data.get("user") or None,
    )


def load_environment(workspace: Path) -> EnvironmentConfig | None:
    """The workspace's environment.json, or None when it has none (blocking: file I/O)."""
    path = workspace / ENVIRONMENT_FILE
    try:
        text = read_config_text(path)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise EnvironmentConfigError(f"{path}: cannot be read: {exc}") from None
    return parse_environment(text, path)


def store_install_command(workspace: Path, command: str) -> Path:
    """Sets `install` in the workspace's environment.json, keeping its other keys.

    The file is replaced atomically. Comments in it are not kept (it is rewritten as JSON).
    Refuses to touch a file that is not a JSON object, so a person's work is never clobbered.
    """
    path = workspace / ENVIRONMENT_FILE
    data: dict[str, Any] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        pass
    else:
        try:
            parsed = json.loads(strip_comments(text))
        except json.JSONDecodeError as exc:
            raise EnvironmentConfigError(
                f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); fix it first"
            ) from None
        if not isinstance(parsed, dict):
            raise EnvironmentConfigError(f"{path}: is not a JSON object; fix it first")
        data = parsed
    data["install"] = command
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    expected = Path(os.path.realpath(workspace)) / ENVIRONMENT_FILE
    try:
        write_checked(path, [text.encode("utf-8")], OnlyPath(expected))
    except PathRefused as refused:
        raise EnvironmentConfigError(refused.reason) from None
    return path
