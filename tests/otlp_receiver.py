"""A plaintext gRPC server on a free loopback port, for the OTLP receivers of the telemetry tests."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent import futures

import grpc


@contextlib.contextmanager
def serving_grpc(add_services: Callable[[grpc.Server], None], workers: int = 4) -> Iterator[int]:
    """Serve what `add_services` registers on 127.0.0.1; yields the port, stops the server on exit."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    add_services(server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(grace=None)
