"""A small real language server (pygls, over stdio) for the tests of the servers a workspace
names in .helix/languages.toml (tests/test_workspace_language_servers.py).

It reports, for every open document, each line holding one of the words its `config` forbids
(initializationOptions `{"forbidden": [...]}`, default ["TODO"]) as an error with code
`forbidden`. With `{"report_env": ["NAME", ...]}` it also reports on line 1, as information,
`NAME=<value>` or `NAME unset` for each, and with `{"write_to": "/path"}` it tries to write
that file when it starts and reports `write: ok` or `write: <errno name>` on line 1. With
`{"hold_mb": N}` it keeps N MB resident from its start (to pass a memory cap).
"""

from __future__ import annotations

import errno
import os
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

server = LanguageServer("toy-lint", "1")
options: dict[str, Any] = {}
held: list[bytes] = []


@server.feature(types.INITIALIZE)
def initialize(params: types.InitializeParams) -> None:
    options.update(params.initialization_options or {})
    # Bytes of a non-zero value: every page is written, so resident.
    held.append(b"\x01" * (int(options.get("hold_mb", 0)) << 20))
    target = options.get("write_to")
    if target:
        try:
            with open(target, "w") as file:
                file.write("escaped")
            options["write_outcome"] = "ok"
        except OSError as exc:
            options["write_outcome"] = errno.errorcode.get(exc.errno or 0, str(exc))


def _line_one(message: str) -> types.Diagnostic:
    return types.Diagnostic(
        range=types.Range(types.Position(0, 0), types.Position(0, 1)),
        message=message,
        severity=types.DiagnosticSeverity.Information,
        source="toy-lint",
        code="note",
    )


def _check(uri: str, version: int | None) -> None:
    document = server.workspace.get_text_document(uri)
    forbidden = options.get("forbidden", ["TODO"])
    diagnostics = (
        [_line_one(f"write: {options['write_outcome']}")] if "write_outcome" in options else []
    )
    for name in options.get("report_env", []):
        value = os.environ.get(name)
        diagnostics.append(_line_one(f"{name} unset" if value is None else f"{name}={value}"))
    for number, line in enumerate(document.lines):
        for word in forbidden:
            column = line.find(word)
            if column >= 0:
                diagnostics.append(
                    types.Diagnostic(
                        range=types.Range(
                            types.Position(number, column),
                            types.Position(number, column + len(word)),
                        ),
                        message=f"{word} is forbidden here",
                        severity=types.DiagnosticSeverity.Error,
                        source="toy-lint",
                        code="forbidden",
                    )
                )
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
    )


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(params: types.DidOpenTextDocumentParams) -> None:
    _check(params.text_document.uri, params.text_document.version)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(params: types.DidChangeTextDocumentParams) -> None:
    _check(params.text_document.uri, params.text_document.version)


if __name__ == "__main__":
    server.start_io()
