"""The daemon's ports: bound before anything is announced or started, held until each server
listens on its own socket.

A check that binds and lets go leaves a window in which another process takes the port before
the server binds it (seconds at start; for a --wait-for-init daemon the PTY port is served only
once it is claimed, minutes later): the daemon then fails with a traceback after it logged that
it serves, or a client talks to whoever took the port. Bound here, the port is the daemon's from
its first log line. A bound socket that does not listen refuses connections, so no client finds
the port accepting before the daemon serves it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from collections.abc import Mapping


class PortUnavailable(Exception):
    """A port the daemon must listen on cannot be bound (in use, or not allowed)."""


class PortReservations:
    """Bound, not yet listening, sockets by the flag that named their port."""

    def __init__(self) -> None:
        self._sockets: dict[str, list[socket.socket]] = {}

    def take(self, flag: str) -> list[socket.socket]:
        """The sockets of `flag` (none when it was not reserved), now the caller's to serve."""
        return self._sockets.pop(flag, [])

    def add(self, flag: str, sock: socket.socket) -> None:
        self._sockets.setdefault(flag, []).append(sock)

    def close(self) -> None:
        for sockets in self._sockets.values():
            for sock in sockets:
                sock.close()
        self._sockets.clear()


def reserve_ports(host: str, ports: Mapping[str, int]) -> PortReservations:
    """Binds every port of `ports` (flag -> port) on every address of `host`. Raises
    PortUnavailable naming the flag; the same port given twice counts as in use."""
    reservations = PortReservations()
    try:
        seen: set[int] = set()
        for flag, port in ports.items():
            if port in seen:
                in_use = os.strerror(errno.EADDRINUSE)
                raise PortUnavailable(f"cannot listen on {host}:{port} ({flag}): {in_use}")
            seen.add(port)
            for sock in _bound_sockets(host, port, flag):
                reservations.add(flag, sock)
    except BaseException:
        reservations.close()
        raise
    return reservations


def _bound_sockets(host: str, port: int, flag: str) -> list[socket.socket]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise PortUnavailable(f"--host {host}: {exc.strerror}") from None
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _name, address in infos:
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            # As the servers themselves do: a port left in TIME_WAIT is free.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise PortUnavailable(
                    f"cannot listen on {host}:{port} ({flag}): {exc.strerror}"
                ) from None
    except BaseException:
        for sock in bound:
            with contextlib.suppress(OSError):
                sock.close()
        raise
    return bound


def serve_kwargs(host: str, port: int, sockets: list[socket.socket]) -> dict[str, object]:
    """What `loop.create_server` (and websockets' `serve`) gets to listen on the reserved
    socket: it takes one; a host with several addresses (`localhost`: ::1 and 127.0.0.1) lets
    go of its reservation and binds them all again at once, as before."""
    if len(sockets) == 1:
        return {"host": None, "port": None, "sock": sockets[0]}
    for sock in sockets:
        sock.close()
    return {"host": host, "port": port}


def hypercorn_binds(sockets: list[socket.socket]) -> list[str]:
    """hypercorn's `bind` for the reserved sockets: it adopts their descriptors."""
    return [f"fd://{sock.detach()}" for sock in sockets]
