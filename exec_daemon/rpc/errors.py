"""Keeps exception text and tracebacks in the log: clients only see a ConnectError code."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext

log = logging.getLogger(__name__)

REQ = TypeVar("REQ")
RES = TypeVar("RES")


def _internal(ctx: RequestContext) -> ConnectError:
    method = ctx.method
    log.exception("%s/%s failed", method.service_name, method.name)
    return ConnectError(Code.INTERNAL, "internal error (details are in the daemon's log)")


async def _guard_stream(stream: AsyncIterator[Any], ctx: RequestContext) -> AsyncIterator[Any]:
    try:
        async for item in stream:
            yield item
    except (ConnectError, asyncio.CancelledError, GeneratorExit):
        raise
    except Exception:
        raise _internal(ctx) from None


class ErrorMappingInterceptor:
    """Turns any exception that is not a ConnectError into INTERNAL, logged with its traceback."""

    async def intercept_unary(
        self,
        call_next: Callable[[REQ, RequestContext], Awaitable[RES]],
        request: REQ,
        ctx: RequestContext,
    ) -> RES:
        try:
            return await call_next(request, ctx)
        except ConnectError:
            raise
        except Exception:
            raise _internal(ctx) from None

    def intercept_server_stream(
        self,
        call_next: Callable[[REQ, RequestContext], AsyncIterator[RES]],
        request: REQ,
        ctx: RequestContext,
    ) -> AsyncIterator[RES]:
        return _guard_stream(call_next(request, ctx), ctx)

    def intercept_bidi_stream(
        self,
        call_next: Callable[[AsyncIterator[REQ], RequestContext], AsyncIterator[RES]],
        request: AsyncIterator[REQ],
        ctx: RequestContext,
    ) -> AsyncIterator[RES]:
        return _guard_stream(call_next(request, ctx), ctx)
