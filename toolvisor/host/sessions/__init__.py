"""Child sessions: runs started by a call (``ctx.sessions``), linked to it as an OTP process to
its parent; a child's question or key relayed through its parent; an agent as a tool."""

from toolvisor.host.sessions._agent_sessions import (
    AgentSessions,
    ChildLink,
    SessionLimits,
    answer_snapshot,
)
from toolvisor.host.sessions._agent_tool import agent_tool
from toolvisor.host.sessions._child_sessions import CallSessions
from toolvisor.host.sessions._relays import Resume

__all__ = [
    "AgentSessions",
    "CallSessions",
    "ChildLink",
    "Resume",
    "SessionLimits",
    "agent_tool",
    "answer_snapshot",
]
