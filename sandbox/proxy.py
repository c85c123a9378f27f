"""The network allowlist proxy: HTTP CONNECT and plain HTTP, one listener per confined command.

The listener is created by the helper inside the command's own network namespace (so
127.0.0.1:3128 there is the only way out) and handed to the daemon, which accepts on it here.
Every request is decided with that command's network policy:
- the host name is matched first: a deny entry refuses it (deny wins);
- the proxy resolves the name itself (the command has no DNS) and connects to the address it
  resolved (no second lookup to rebind); any resolved address in a deny CIDR refuses the host;
- private, loopback, link-local (cloud metadata), multicast and other non-global addresses are
  refused after resolution, except for networks the daemon's operator lists in
  EXEC_DAEMON_SANDBOX_PROXY_ALLOW_PRIVATE (e.g. "127.0.0.0/8", for tests), and for an explicit
  loopback entry with a port (`127.0.0.1:3000`, `[::1]:3000`, `localhost:3000`): that port of
  the host's loopback, a dev server the project runs;
- the daemon's own ports on loopback (RPC, PTY, desktop page, VNC, IDE: `own_ports`) are
  refused whatever allowed them: a sandboxed command must not reach the daemon around it;
- an address is used when the host name is allowed (exact host or `*.domain`), the address is
  in an allowed CIDR, or the policy allows by default.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from exec_daemon.kernel.addresses import (
    IPAddress,
    IPNetwork,
    non_public_reason,
    parse_networks,
    unmapped,
)
from sandbox.policy import NetworkPolicy

log = logging.getLogger(__name__)

ALLOW_PRIVATE_ENV = "EXEC_DAEMON_SANDBOX_PROXY_ALLOW_PRIVATE"
HEAD_LIMIT = 64 * 1024
HEAD_TIMEOUT_SECONDS = 30.0
CONNECT_TIMEOUT_SECONDS = 10.0
RELAY_CHUNK = 64 * 1024
_HOP_BY_HOP = {"proxy-connection", "proxy-authorization", "connection", "keep-alive"}


class Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def private_exceptions_from_env() -> tuple[IPNetwork, ...]:
    return parse_networks(os.environ.get(ALLOW_PRIVATE_ENV, "").split(","))


@dataclass(frozen=True)
class ProxyRules:
    policy: NetworkPolicy
    private_exceptions: tuple[IPNetwork, ...] = ()
    # The daemon's own listening ports -> what each is ("RPC", "PTY WebSocket", ...).
    own_ports: Mapping[int, str] = field(default_factory=dict)

    def refusal_of_address(self, address: IPAddress) -> str | None:
        return non_public_reason(address, self.private_exceptions)

    async def addresses_for(self, host: str, port: int) -> list[IPAddress]:
        """The addresses the command may reach for host:port; raises Refused with the reason."""
        name = host.strip("[]").lower().rstrip(".")
        policy = self.policy
        try:
            literal: IPAddress | None = ipaddress.ip_address(name)
        except ValueError:
            literal = None
        if literal is None:
            if any(pattern.matches_name(name, port) for pattern in policy.deny):
                raise Refused(403, f"{name} is denied by the sandbox network policy")
            name_allowed = policy.default_allow or any(
                p.matches_name(name, port) for p in policy.allow
            )
            if not name_allowed and not any(p.network is not None for p in policy.allow):
                # Not even resolved: a DNS query for any name would itself leak data.
                raise Refused(403, f"{name} is not in the sandbox network allowlist")
            addresses = await _resolve(name, port)
        else:
            name_allowed = policy.default_allow
            addresses = [literal]
        for address in addresses:
            if any(pattern.matches_address(address, port) for pattern in policy.deny):
                shown = name if literal is not None else f"{name} ({address})"
                raise Refused(403, f"{shown} is denied by the sandbox network policy")
        usable: list[IPAddress] = []
        refusals: list[str] = []
        for address in addresses:
            refusal = self.refusal_of_address(address)
            if refusal is not None and any(
                p.opens_loopback(name, address, port) for p in policy.allow
            ):
                usable.append(address)
            elif refusal is not None:
                refusals.append(refusal)
            elif name_allowed or any(p.matches_address(address, port) for p in policy.allow):
                usable.append(address)
        own = self.own_ports.get(port)
        if own is not None and any(unmapped(address).is_loopback for address in usable):
            raise Refused(
                403,
                f"{name}:{port} is the exec daemon's own {own} port: "
                "no sandboxed command reaches it, whatever the network policy allows",
            )
        if usable:
            return usable
        if refusals:
            raise Refused(403, f"{name}: " + "; ".join(refusals))
        raise Refused(403, f"{name} is not in the sandbox network allowlist")


async def _resolve(name: str, port: int) -> list[IPAddress]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise Refused(502, f"cannot resolve {name}: {exc.strerror}") from None
    addresses: dict[IPAddress, None] = {}
    for _family, _type, _proto, _canon, sockaddr in infos:
        addresses[ipaddress.ip_address(str(sockaddr[0]).split("%")[0])] = None
    return list(addresses)


@dataclass
class _Request:
    method: str
    host: str
    port: int
    version: str
    # For plain HTTP: the head to send upstream (origin-form request line, hop-by-hop removed).
    upstream_head: bytes = b""


def _parse_head(head: bytes) -> _Request:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise Refused(400, "malformed request line")
    method, target, version = parts
    if method.upper() == "CONNECT":
        host, _, port_text = target.rpartition(":")
        if not host or not port_text.isdigit():
            raise Refused(400, "CONNECT needs host:port")
        return _Request("CONNECT", host, int(port_text), version)
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise Refused(400, "only absolute http:// URLs are proxied (use CONNECT for https)")
    try:
        port = url.port or 80
    except ValueError:
        raise Refused(400, "bad port") from None
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    headers = [
        line
        for line in lines[1:]
        if line and line.split(":", 1)[0].strip().lower() not in _HOP_BY_HOP
    ]
    upstream = "\r\n".join([f"{method} {path} {version}", *headers, "Connection: close", "", ""])
    return _Request(method, url.hostname, port, version, upstream.encode("latin-1"))


async def _refuse(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    titles = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large"}
    body = f"exec-daemon sandbox: {reason}\n".encode()
    head = (
        f"HTTP/1.1 {status} {titles.get(status, 'Bad Gateway')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "X-Exec-Daemon-Sandbox: refused\r\n"
        "Connection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        writer.write(head.encode() + body)
        await writer.drain()


async def _open_upstream(
    addresses: Iterable[IPAddress], port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    last_error: OSError | None = None
    for address in addresses:
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(str(address), port), CONNECT_TIMEOUT_SECONDS
            )
        except (OSError, TimeoutError) as exc:
            last_error = exc if isinstance(exc, OSError) else OSError("timed out")
    raise Refused(502, f"cannot connect to port {port}: {last_error}")


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(RELAY_CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        pass


# Told each request's answer: (host, port, allowed, why refused); the session record's hook.
Egress = Callable[[str, int, bool, str], None]


class ProxyServer:
    """Serves one confined command's proxy listener until closed."""

    def __init__(
        self, listener: socket.socket, rules: ProxyRules, on_egress: Egress | None = None
    ) -> None:
        self.rules = rules
        self._on_egress = on_egress
        self._listener = listener
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._listener.setblocking(False)
        self._server = await asyncio.start_server(
            self._handle, sock=self._listener, limit=HEAD_LIMIT
        )

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        upstream_writer: asyncio.StreamWriter | None = None
        host, port = "", 0
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_SECONDS)
            except asyncio.LimitOverrunError:
                raise Refused(431, "request head too large") from None
            except (asyncio.IncompleteReadError, TimeoutError):
                return
            request = _parse_head(head)
            host, port = request.host, request.port
            addresses = await self.rules.addresses_for(request.host, request.port)
            upstream_reader, upstream_writer = await _open_upstream(addresses, request.port)
            log.debug("sandbox proxy: %s %s:%d allowed", request.method, request.host, request.port)
            if self._on_egress is not None:
                self._on_egress(host, port, True, "")
            if request.method == "CONNECT":
                writer.write(f"{request.version} 200 Connection established\r\n\r\n".encode())
                await writer.drain()
            else:
                upstream_writer.write(request.upstream_head)
            await asyncio.gather(_relay(reader, upstream_writer), _relay(upstream_reader, writer))
        except Refused as refused:
            log.info("sandbox proxy refused a request: %s", refused.reason)
            if self._on_egress is not None:
                self._on_egress(host, port, False, refused.reason)
            await _refuse(writer, refused.status, refused.reason)
        except OSError as exc:
            log.debug("sandbox proxy connection failed: %s", exc)
        finally:
            self._connections.discard(task)
            for stream in (writer, upstream_writer):
                if stream is not None:
                    stream.close()
