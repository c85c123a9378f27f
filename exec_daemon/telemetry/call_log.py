"""Each tool call in the daemon's log (logger `exec_daemon.tool_calls`).

At `--log-level debug`, a record when a call starts and one when it ends: the variant, the call
and agent ids, the outcome (the result's case, an error's code, `aborted`) and the duration. A
call that fails (an error result, an error raised, a crash) is logged at warning whatever the
level. The middleware runs inside the tracing one (exec_daemon/server.py), so with telemetry on
every record carries the call's trace and span ids (exec_daemon/telemetry/logs.py): in
`--log-format json` lines and in the exported OTLP logs. Below debug, a call that succeeds costs
a clock read and a level check.
"""

from __future__ import annotations

import asyncio
import logging
import time

from google.protobuf.message import Message

from exec_daemon.kernel.context import Invocation, Middleware, Next
from exec_daemon.kernel.errors import CodedError

log = logging.getLogger("exec_daemon.tool_calls")


def _result_outcome(result: Message) -> tuple[str, bool]:
    """A result's outcome as logged, and whether it is a failure."""
    case = result.WhichOneof("result") if "result" in result.DESCRIPTOR.oneofs_by_name else None
    if case != "error":
        return case or "success", False
    code = getattr(result.error, "code", "")  # type: ignore[attr-defined]
    return f"error {code}" if code else "error", True


def call_logging() -> Middleware:
    async def log_call(inv: Invocation, call_next: Next) -> Message:
        ctx = inv.ctx
        debug = log.isEnabledFor(logging.DEBUG)
        if debug:
            log.debug(
                "tool call %s started (call %d, agent %r)", inv.tool, ctx.call_id, ctx.agent_id
            )
        started = time.perf_counter()
        outcome, failed = "internal", True
        try:
            result = await call_next(inv)
        except CodedError as exc:
            outcome = f"{exc.code.value}: {exc.message[:200]}"
            raise
        except asyncio.CancelledError:
            outcome, failed = "aborted", False
            raise
        except Exception as exc:
            outcome = f"internal ({type(exc).__qualname__})"
            raise
        else:
            outcome, failed = _result_outcome(result)
            return result
        finally:
            milliseconds = (time.perf_counter() - started) * 1000
            if failed or debug:
                log.log(
                    logging.WARNING if failed else logging.DEBUG,
                    "tool call %s %s: %s (call %d, agent %r, %.1f ms)",
                    inv.tool,
                    "failed" if failed else "ended",
                    outcome,
                    ctx.call_id,
                    ctx.agent_id,
                    milliseconds,
                )

    return log_call
