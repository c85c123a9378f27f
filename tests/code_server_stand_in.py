"""Stands in for code-server behind the IDE's proxy (exec_daemon/rpc/ide.py) when it is not
installed: serves `--socket=PATH` and answers every request with what reached it, as JSON
(method, target, cookies, whether its session cookie was HASHED_PASSWORD).

Run as `<install>/node/bin/node` by tests/test_browser_auth.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        writer.close()
        return
    method, target, _ = head.split("\r\n")[0].split(" ")
    headers = [line.partition(":") for line in head.split("\r\n")[1:] if line]
    cookie = next((value.strip() for key, _, value in headers if key.lower() == "cookie"), "")
    session = f"code-server-session={os.environ.get('HASHED_PASSWORD', '')}"
    body = json.dumps(
        {
            "method": method,
            "target": target,
            "cookie": cookie,
            "session": session in [part.strip() for part in cookie.split(";")],
        }
    ).encode()
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    writer.close()


async def main(socket_path: str) -> None:
    server = await asyncio.start_unix_server(answer, socket_path)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    socket_arg = next(arg for arg in sys.argv[1:] if arg.startswith("--socket="))
    asyncio.run(main(socket_arg.removeprefix("--socket=")))
