"""Loopback servers speaking the protocols the model-backed tools use, scripted per test.

- `ScriptedModel`: an OpenAI-compatible API. POST /v1/chat/completions answers each request with
  the next scripted turn as a streamed (SSE) completion: tool calls, or a final text. POST
  /v1/images/generations answers a PNG (base64, as the images API does), and so does POST
  /v1/images/edits (multipart: its fields are kept, each file as (name, content type, bytes)
  under "image[]").
- `searxng`: a SearXNG-shaped JSON search API (GET /search?q=...&format=json).
Every request's JSON body is kept, for the test to see what the daemon sent.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.loopback_http import serving_http


@dataclass(frozen=True)
class ToolCalls:
    """A turn asking for tool calls: (tool name, arguments) each."""

    calls: tuple[tuple[str, dict[str, Any]], ...]


@dataclass(frozen=True)
class Final:
    """A turn answering with text, sent in several chunks."""

    text: str


@dataclass(frozen=True)
class Stall:
    """A turn that starts streaming, then sends nothing until `release` is set (bounded) and
    sets `gone` when the client went away."""

    release: threading.Event = field(default_factory=threading.Event)
    gone: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)


Turn = ToolCalls | Final | Stall
STALL_SECONDS = 20.0


def tiny_png(width: int = 2, height: int = 2) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@dataclass
class ScriptedModel:
    turns: list[Turn] = field(default_factory=list)
    # When the script is used up: repeat its last turn (a model that loops) instead of failing.
    repeat_last: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    # The path of each request, beside its body in `requests`.
    paths: list[str] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)
    image: bytes = field(default_factory=tiny_png)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_turn(self) -> Turn | None:
        with self._lock:
            if self.turns and (len(self.turns) > 1 or not self.repeat_last):
                return self.turns.pop(0)
            return self.turns[0] if self.turns else None

    def chat_requests(self) -> list[dict[str, Any]]:
        return [body for body in self.requests if "messages" in body]


def _sse_chunks(turn: Turn) -> Iterator[dict[str, Any]]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    assert not isinstance(turn, Stall)
    if isinstance(turn, Final):
        words = turn.text.split(" ")
        for index, word in enumerate(words):
            text = word if index == len(words) - 1 else word + " "
            yield {**base, "choices": [{"index": 0, "delta": {"content": text}}]}
        finish = "stop"
    else:
        for index, (name, arguments) in enumerate(turn.calls):
            text = json.dumps(arguments)
            half = len(text) // 2
            # The arguments arrive in two pieces, as real providers stream them.
            yield {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": f"call_{uuid.uuid4().hex[:8]}",
                                    "type": "function",
                                    "function": {"name": name, "arguments": text[:half]},
                                }
                            ]
                        },
                    }
                ],
            }
            yield {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [{"index": index, "function": {"arguments": text[half:]}}]
                        },
                    }
                ],
            }
        finish = "tool_calls"
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    yield {**base, "choices": [], "usage": usage}


def model_handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            content_type = self.headers.get("content-type", "")
            if content_type.startswith("multipart/form-data"):
                body = multipart_fields(content_type, raw)
            else:
                body = json.loads(raw or b"{}")
            model.requests.append(body)
            model.paths.append(self.path)
            model.authorizations.append(self.headers.get("authorization", ""))
            if self.path.endswith(("/images/generations", "/images/edits")):
                self._json({"created": 0, "data": [{"b64_json": _b64(model.image)}]})
            elif self.path.endswith("/chat/completions"):
                self._stream(model.next_turn())
            else:
                self._json({"error": {"message": f"no route {self.path}"}}, 404)

        def _stream(self, turn: Turn | None) -> None:
            if turn is None:
                self._json({"error": {"message": "the script has no more turns"}}, 500)
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            if isinstance(turn, Stall):
                self._stall(turn)
                return
            for chunk in _sse_chunks(turn):
                self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")

        def _stall(self, stall: Stall) -> None:
            self._chunk(b": thinking\n\n")
            stall.started.set()
            deadline = time.monotonic() + STALL_SECONDS
            while not stall.release.wait(0.05) and time.monotonic() < deadline:
                try:
                    # A comment line: ignored by SSE clients, fails once the client is gone.
                    self._chunk(b": still thinking\n\n")
                except OSError:
                    stall.gone.set()
                    return

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _json(self, value: Any, status: int = 200) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def multipart_fields(content_type: str, raw: bytes) -> dict[str, Any]:
    """A multipart/form-data body: text fields as strings, files as lists of (file name,
    content type, bytes) under their field name."""
    parsed = BytesParser(policy=policy.HTTP).parsebytes(
        f"content-type: {content_type}\r\n\r\n".encode() + raw
    )
    fields: dict[str, Any] = {}
    for part in parsed.iter_parts():
        assert isinstance(part, EmailMessage)
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True)
        assert isinstance(name, str) and isinstance(data, bytes)
        filename = part.get_filename()
        if filename is None:
            fields[name] = data.decode()
        else:
            fields.setdefault(name, []).append((filename, part.get_content_type(), data))
    return fields


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def serving_model(model: ScriptedModel) -> Any:
    """A context manager serving `model`; yields the server (`server.server_address[1]`)."""
    return serving_http(model_handler(model))


@contextlib.contextmanager
def served_model() -> Iterator[tuple[ScriptedModel, str]]:
    """A new ScriptedModel served on loopback, and the base URL a daemon's --model-endpoint
    takes (`http://127.0.0.1:<port>/v1`)."""
    model = ScriptedModel()
    with serving_model(model) as server:
        yield model, url_of(server, "/v1")


@dataclass
class SearchEngine:
    results: list[dict[str, str]]
    queries: list[dict[str, list[str]]] = field(default_factory=list)


def search_handler(engine: SearchEngine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = parse_qs(url.query)
            engine.queries.append(query)
            if url.path != "/search" or query.get("format") != ["json"]:
                self.send_error(404)
                return
            data = json.dumps(
                {"query": query.get("q", [""])[0], "results": engine.results}
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def serving_search(engine: SearchEngine) -> Any:
    return serving_http(search_handler(engine))


def url_of(server: ThreadingHTTPServer, path: str = "") -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"
