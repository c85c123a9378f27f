"""What the daemon knows about each agent (conversation) that more than one layer needs.

- `SubagentSessions`: the subagents the Task tool started (tools/tasks.py), and which of them
  are read-only (the permissions guard refuses their writes).
- `AgentModes`: each agent's mode (agent, ask, plan, debug), set by switch_mode
  (tools/agent_state.py); `MODE_ALLOWS` says what each lets the agent change (the permissions
  guard refuses the rest).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TypeVar

from exec_daemon.kernel.spec import EVERYTHING, Effect
from exec_daemon.kernel.state import Daemon

MODES = ("agent", "ask", "plan", "debug")
DEFAULT_MODE = "agent"
# What a call may change in each mode: ask only reads; plan reads and writes its plan file
# (create_plan); agent and debug change anything the other guards allow.
MODE_ALLOWS = {
    "agent": EVERYTHING,
    "ask": Effect.NONE,
    "plan": Effect.PLAN,
    "debug": EVERYTHING,
}
# Conversations whose state is kept; the least recently used one is forgotten beyond this.
MAX_AGENTS = 1000

V = TypeVar("V")


@dataclass
class Subagent:
    agent_id: str
    readonly: bool
    subagent_type: int
    parent_agent_id: str
    description: str
    started_ms: int


class SubagentSessions:
    """The subagents started on this daemon, by agent_id (in memory for the daemon's life)."""

    def __init__(self, daemon: Daemon) -> None:
        self._agents: dict[str, Subagent] = {}

    def get(self, agent_id: str) -> Subagent | None:
        return self._agents.get(agent_id)

    def is_readonly(self, agent_id: str) -> bool:
        agent = self._agents.get(agent_id)
        return agent is not None and agent.readonly

    def add(self, agent: Subagent) -> None:
        self._agents[agent.agent_id] = agent


def mark_used(table: OrderedDict[str, V], agent_id: str) -> None:
    """Makes `agent_id` the most recently used entry; forgets the oldest beyond MAX_AGENTS."""
    table.move_to_end(agent_id)
    while len(table) > MAX_AGENTS:
        table.popitem(last=False)


class AgentModes:
    """The mode of every conversation (agent_id) not in the default mode, in memory."""

    def __init__(self, daemon: Daemon) -> None:
        self._modes: OrderedDict[str, str] = OrderedDict()

    def mode(self, agent_id: str) -> str:
        """The mode an agent is in ("agent" until it switches)."""
        return self._modes.get(agent_id, DEFAULT_MODE)

    def set_mode(self, agent_id: str, mode: str) -> None:
        if mode == DEFAULT_MODE:
            self._modes.pop(agent_id, None)  # the default needs no entry
            return
        self._modes[agent_id] = mode
        self._modes.move_to_end(agent_id)
        # Beyond MAX_AGENTS the oldest unrestricted (debug) entries are forgotten; a mode that
        # restricts the agent is never forgotten, or forgetting it would lift the restriction.
        excess = len(self._modes) - MAX_AGENTS
        if excess > 0:
            unrestricted = [a for a, m in self._modes.items() if MODE_ALLOWS[m] == EVERYTHING]
            for forgotten in unrestricted[:excess]:
                del self._modes[forgotten]

    def allows(self, agent_id: str) -> Effect:
        """What the agent's mode lets its calls change."""
        return MODE_ALLOWS[self.mode(agent_id)]
