"""grpc.health.v1.Health (agent/v1/health.proto, a copy of gRPC's): the daemon's readiness for
Kubernetes' gRPC probes, grpc_health_probe and grpcurl, answered without the token.

SERVING while the daemon serves its agent; NOT_SERVING while it waits for InitSandbox, starts,
drains or stops (exec_daemon/kernel/lifecycle.py). The HTTP probes (/healthz, /readyz) are the
front door's (exec_daemon/rpc/asgi.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.interceptor import Interceptor
from connectrpc.request import RequestContext

from agent.v1.health_connect import Health, HealthASGIApplication
from agent.v1.health_pb2 import (
    HealthCheckRequest,
    HealthCheckResponse,
    HealthListRequest,
    HealthListResponse,
)
from exec_daemon.kernel.lifecycle import Lifecycle, Phase

# "" is the daemon as a whole (the gRPC convention).
SERVICES = ("", "agent.v1.ControlService", "agent.v1.ExecService")
HEALTH_PATH = "/grpc.health.v1.Health/"


def serving_status(phase: Phase) -> HealthCheckResponse.ServingStatus.ValueType:
    return (
        HealthCheckResponse.SERVING if phase is Phase.SERVING else HealthCheckResponse.NOT_SERVING
    )


class HealthService(Health):
    def __init__(self, lifecycle: Lifecycle) -> None:
        self._lifecycle = lifecycle

    async def check(
        self,
        request: HealthCheckRequest,
        ctx: RequestContext[HealthCheckRequest, HealthCheckResponse],
    ) -> HealthCheckResponse:
        if request.service not in SERVICES:
            raise ConnectError(Code.NOT_FOUND, f"unknown service: {request.service!r}")
        return HealthCheckResponse(status=serving_status(self._lifecycle.phase))

    async def list(
        self,
        request: HealthListRequest,
        ctx: RequestContext[HealthListRequest, HealthListResponse],
    ) -> HealthListResponse:
        status = serving_status(self._lifecycle.phase)
        return HealthListResponse(
            statuses={name: HealthCheckResponse(status=status) for name in SERVICES}
        )

    async def watch(
        self,
        request: HealthCheckRequest,
        ctx: RequestContext[HealthCheckRequest, HealthCheckResponse],
    ) -> AsyncIterator[HealthCheckResponse]:
        if request.service not in SERVICES:
            yield HealthCheckResponse(status=HealthCheckResponse.SERVICE_UNKNOWN)
            return
        sent: HealthCheckResponse.ServingStatus.ValueType | None = None
        async for phase in self._lifecycle.phases():
            status = serving_status(phase)
            if status != sent:
                sent = status
                yield HealthCheckResponse(status=status)


def health_apps(lifecycle: Lifecycle, interceptors: Iterable[Interceptor]) -> dict[str, object]:
    """The health service's ASGI app by its path prefix (the front door serves it tokenless)."""
    return {
        HEALTH_PATH: HealthASGIApplication(
            HealthService(lifecycle), interceptors=list(interceptors), read_max_bytes=4096
        )
    }
