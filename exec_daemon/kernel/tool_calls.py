"""`ToolCalls`: running a ToolCall through the daemon's dispatcher, for tools that run others.

A subagent (tools/subagents.py) calls the daemon's tools as the orchestrator does: through the
same dispatcher and middleware (guards, hooks, redaction, tracing) under its own agent id. tools/
cannot import the RPC layer, so it asks `daemon.service(ToolCalls)`, which the composition root
(exec_daemon/server.py, `build_app`) provides with the dispatcher it serves with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.spec import ToolSpec


class ToolCalls(Protocol):
    @property
    def specs(self) -> Sequence[ToolSpec]:
        """Every tool the dispatcher runs."""
        ...

    async def run(self, tool_call: ToolCall, ctx: CallContext) -> ToolCall:
        """The call with its result set; raises CodedError when it cannot be run."""
        ...
