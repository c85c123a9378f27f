"""A small MCP server for tests: text, image, error, structured, slow and crashing tools; resources.

Run as `python -m tests.mcp_servers.demo_server` (stdio) or with
`--http PORT` (streamable HTTP on 127.0.0.1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

# A 1x1 transparent PNG.
PNG_PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)

server = MCPServer(name="demo", version="1.0", log_level="WARNING")


class Sum(BaseModel):
    total: int
    terms: list[int]


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return text


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> Sum:
    return Sum(total=a + b, terms=[a, b])


@server.tool(description="A 1x1 PNG.")
def pixel() -> Image:
    return Image(data=PNG_PIXEL, format="png")


@server.tool(description="Always fails.")
def fail(reason: str = "it broke") -> str:
    raise ToolError(reason)


@server.tool(description="Sleep, then answer.")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(description="Exit the server process in the middle of the call.")
def crash() -> str:
    os._exit(3)


@server.tool(description="The server's environment variable NAME.")
def env(name: str) -> str:
    return os.environ.get(name, "")


@server.tool(description="The server's process id.")
def pid() -> int:
    return os.getpid()


@server.tool(description="The server's working directory.")
def cwd() -> str:
    return os.getcwd()


@server.tool(description="The trace context the request carried: 'trace_id-span_id' (hex), or ''.")
def traceparent() -> str:
    # The SDK makes the request's `_meta` traceparent the current context while a tool runs.
    from opentelemetry.trace import get_current_span

    context = get_current_span().get_span_context()
    return f"{context.trace_id:032x}-{context.span_id:016x}" if context.is_valid else ""


@server.resource("demo://readme", name="readme", description="A text file.", mime_type="text/plain")
def readme() -> str:
    return "hello from the demo server\n"


@server.resource("demo://pixel.png", name="pixel", description="A PNG.", mime_type="image/png")
def pixel_resource() -> bytes:
    return PNG_PIXEL


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, help="serve streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--exit-at-start", default="", help="print this to stderr and exit 2")
    options = parser.parse_args()
    if options.exit_at_start:
        print(options.exit_at_start, file=sys.stderr, flush=True)
        sys.exit(2)
    if options.http:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
