"""The language servers a workspace names in Helix's project file, `.helix/languages.toml`
(https://docs.helix-editor.com/languages.html), for read_lints (tools/lints.py).

What is read of it (the rest of Helix's keys are ignored):

    [language-server.toy-lint]        # a server: its name, then
    command = "toy-lint"              # the program: a name on the agent's PATH, or a path
    args = ["--stdio"]                #   (relative: to the workspace)
    config = { forbidden = ["TODO"] } # initializationOptions, and workspace/configuration answers
    environment = { TOY_LEVEL = "2" } # added to its environment

    [[language]]
    name = "toy"
    language-id = "toy"               # the LSP languageId (default: name)
    file-types = ["toy", "Toyfile", { glob = "toys/*.txt" }]
    language-servers = ["toy-lint"]   # or { name = "toy-lint", ... }

A `file-types` string matches a file's extension or its whole name; a glob matches the path
from the workspace or the file name. A language that covers a file replaces the built-in
server for it (ruff still runs beside for Python). A listed server the file does not define is
one of the built-in ones when named as Helix names them (pyright, typescript-language-server,
bash-language-server).
"""

from __future__ import annotations

import fnmatch
import json
import os
import stat
import tomllib
from dataclasses import dataclass
from typing import Any

from exec_daemon.kernel.paths import PathRefused, PathRules, open_checked

CONFIG_PATH = os.path.join(".helix", "languages.toml")
MAX_CONFIG_BYTES = 1024 * 1024


class BadConfig(Exception):
    """The file is not a languages.toml read_lints can use; the message says where."""


@dataclass(frozen=True)
class NamedServer:
    """One `[language-server.NAME]` of the file."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    # `config`, as JSON (frozen, comparable): a changed definition is a new server.
    config_json: str = "{}"
    environment: tuple[tuple[str, str], ...] = ()

    @property
    def config(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.config_json)
        return loaded


@dataclass(frozen=True)
class Language:
    """One `[[language]]` of the file."""

    name: str
    language_id: str
    extensions_or_names: frozenset[str]
    globs: tuple[str, ...]
    servers: tuple[str, ...]

    def covers(self, relative: str) -> bool:
        name = os.path.basename(relative)
        extension = os.path.splitext(name)[1].lstrip(".")
        if name in self.extensions_or_names or (
            extension and extension in self.extensions_or_names
        ):
            return True
        return any(
            fnmatch.fnmatchcase(relative, glob) or fnmatch.fnmatchcase(name, glob)
            for glob in self.globs
        )


@dataclass(frozen=True)
class WorkspaceLanguages:
    """What the workspace's `.helix/languages.toml` says (empty when there is none)."""

    servers: dict[str, NamedServer]
    languages: tuple[Language, ...]

    def language_of(self, relative: str) -> Language | None:
        """The first language that covers the file at `relative` (from the workspace)."""
        return next((language for language in self.languages if language.covers(relative)), None)

    def servers_by_file(self, workspace: str, files: list[str]) -> dict[str, tuple[str, ...]]:
        """{file: the servers its language lists} for the `files` (absolute) a language that
        lists servers covers."""
        found = {}
        for path in files:
            language = self.language_of(os.path.relpath(path, workspace))
            if language is not None and language.servers:
                found[path] = language.servers
        return found


NO_LANGUAGES = WorkspaceLanguages({}, ())


def parse_languages(text: str) -> WorkspaceLanguages:
    """The servers and languages of a languages.toml. Raises BadConfig."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadConfig(f"not TOML: {exc}") from None
    servers_table = document.get("language-server", {})
    if not isinstance(servers_table, dict):
        raise BadConfig("[language-server] is not a table")
    servers = {name: _server(name, entry) for name, entry in servers_table.items()}
    languages = document.get("language", [])
    if not isinstance(languages, list):
        raise BadConfig("language is not an array of tables ([[language]])")
    return WorkspaceLanguages(servers, tuple(_language(entry) for entry in languages))


def _server(name: str, entry: Any) -> NamedServer:
    where = f"[language-server.{name}]"
    if not isinstance(entry, dict):
        raise BadConfig(f"{where} is not a table")
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        raise BadConfig(f"{where} has no command")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise BadConfig(f"{where} args is not a list of strings")
    config = entry.get("config", {})
    if not isinstance(config, dict):
        raise BadConfig(f"{where} config is not a table")
    environment = entry.get("environment", {})
    if not isinstance(environment, dict) or not all(
        isinstance(value, str) for value in environment.values()
    ):
        raise BadConfig(f"{where} environment is not a table of strings")
    return NamedServer(
        name,
        command,
        tuple(args),
        json.dumps(config, sort_keys=True, default=str),
        tuple(sorted(environment.items())),
    )


def _language(entry: Any) -> Language:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise BadConfig("a [[language]] has no name")
    name = entry["name"]
    where = f"[[language]] {name}"
    names: set[str] = set()
    globs: list[str] = []
    for file_type in entry.get("file-types", []):
        if isinstance(file_type, str):
            names.add(file_type)
        elif isinstance(file_type, dict) and isinstance(file_type.get("glob"), str):
            globs.append(file_type["glob"])
        else:
            raise BadConfig(f"{where}: a file type is neither a string nor {{ glob = ... }}")
    servers: list[str] = []
    for server in entry.get("language-servers", []):
        named = server.get("name") if isinstance(server, dict) else server
        if not isinstance(named, str):
            raise BadConfig(f"{where}: a language server is neither a name nor {{ name = ... }}")
        servers.append(named)
    language_id = entry.get("language-id", name)
    if not isinstance(language_id, str):
        raise BadConfig(f"{where}: language-id is not a string")
    return Language(name, language_id, frozenset(names), tuple(globs), tuple(servers))


def read_languages(workspace: str, rules: PathRules) -> WorkspaceLanguages:
    """The workspace's `.helix/languages.toml`, NO_LANGUAGES when there is none; read as the
    agent's reads are (where it really is, under the agent's path rules). Raises BadConfig."""
    try:
        opened = open_checked(os.path.join(workspace, CONFIG_PATH), rules)
    except FileNotFoundError:
        return NO_LANGUAGES
    except PathRefused as refused:
        raise BadConfig(f"not read: {refused.reason}") from None
    except OSError as exc:
        raise BadConfig(f"cannot be read: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(opened.info.st_mode):
            raise BadConfig("not a file")
        with os.fdopen(os.dup(opened.fd), "rb") as file:
            data = file.read(MAX_CONFIG_BYTES + 1)
    finally:
        opened.close()
    if len(data) > MAX_CONFIG_BYTES:
        raise BadConfig(f"larger than {MAX_CONFIG_BYTES} bytes")
    return parse_languages(data.decode("utf-8", "replace"))
