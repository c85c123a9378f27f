"""The fetch tools reach public addresses only: every connection the daemon's HTTP client opens
(the first request and each redirect) resolves its host here, refuses it when any address is
not public (`exec_daemon/kernel/addresses.py`) unless the operator allowed that network
(`--fetch-allow-private`), and connects to the address it checked, so a second DNS answer cannot
swap it. The daemon's own ports on this machine are refused even then: a request to them would
carry the agent's choice of RPC to the daemon itself.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from exec_daemon.kernel.addresses import IPAddress, IPNetwork, non_public_reason, parse_networks
from exec_daemon.kernel.config import DaemonConfig

ALLOW_FLAG = "--fetch-allow-private"


class AddressRefused(Exception):
    """A connection the fetch tools must not open; the message names the way to allow it."""


class HostUnresolvable(Exception):
    """The host name has no address (not an httpcore error: httpx lets it through as it is)."""


@dataclass(frozen=True)
class AddressRules:
    allowed_private: tuple[IPNetwork, ...] = ()
    own_ports: frozenset[int] = frozenset()

    @classmethod
    def of(cls, config: DaemonConfig) -> AddressRules:
        """The operator's: `--fetch-allow-private` networks allowed, the daemon's ports refused."""
        return cls(
            allowed_private=parse_networks(config.fetch_allow_private),
            own_ports=frozenset({config.port, config.pty_websocket_port}),
        )

    def refusal(self, host: str, address: IPAddress, port: int) -> str | None:
        if port in self.own_ports and _is_this_machine(address):
            return f"{host}:{port} is the daemon's own port"
        reason = non_public_reason(address, self.allowed_private)
        if reason is None:
            return None
        shown = host if host == str(address) else f"{host} ({address})"
        return f"{shown}: {reason}; the daemon's operator can allow it with {ALLOW_FLAG}"


def _is_this_machine(address: IPAddress) -> bool:
    """Loopback, unspecified, or an address of one of this machine's interfaces."""
    if address.is_loopback or address.is_unspecified:
        return True
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((str(address), 0))
        except OSError as exc:
            return exc.errno != errno.EADDRNOTAVAIL
    return True


async def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise HostUnresolvable(f"cannot resolve {host}: {exc.strerror}") from None
    except UnicodeError:
        # A label too long for IDNA never reaches the resolver.
        raise HostUnresolvable(f"cannot resolve {host}: not a valid host name") from None
    found: dict[IPAddress, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        found[ipaddress.ip_address(str(sockaddr[0]).split("%")[0])] = None
    return list(found)


class PublicOnlyBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to addresses the rules allow."""

    def __init__(
        self,
        rules: AddressRules,
        inner: Any = None,
        connect_errors: tuple[type[Exception], ...] = (
            httpcore.ConnectError,
            httpcore.ConnectTimeout,
        ),
    ) -> None:
        """`inner` and `connect_errors`: the backend that connects and what it raises when it
        cannot (httpcore's, or the same of httpcore2, the fork the MCP SDK's httpx2 uses)."""
        self._rules = rules
        self._inner = inner or httpcore.AnyIOBackend()
        self._connect_errors = connect_errors

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await _resolve(host, port)
        # Every address must pass: which one a connection gets is not the agent's choice.
        for address in addresses:
            if (refusal := self._rules.refusal(host, address, port)) is not None:
                raise AddressRefused(refusal)
        error: Exception = OSError(f"{host} has no address")
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except self._connect_errors as exc:
                error = exc
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AddressRefused(f"unix socket {path}: not fetched")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class PublicOnlyTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over `PublicOnlyBackend` (httpx has no public parameter for it): the
    connection pool is httpx's default one, on that backend."""

    def __init__(self, rules: AddressRules) -> None:
        super().__init__()
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=PublicOnlyBackend(rules),
        )
