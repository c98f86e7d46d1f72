"""The agents this process's workers run, by name: where the workflow, in Temporal's sandbox,
finds its agent's settings (this module is passed through the sandbox, so the sandbox and the
worker share it).

Guarded by one lock: workers register and release from any thread, and workflows read from
Temporal's workflow threads.
"""

from __future__ import annotations

import threading

from toolvisor.contract import ToolvisorError
from toolvisor.temporal._agent import TemporalAgent

_lock = threading.Lock()
_agents: dict[str, tuple[TemporalAgent, int]] = {}  # name -> (agent, workers holding it)


class UnknownAgentError(ToolvisorError, LookupError):
    """A run names an agent that no worker of this process was given."""


def hold(agent: TemporalAgent) -> None:
    """A worker runs ``agent`` until it calls :func:`release`; another agent of the same name
    while it does is refused (a run names its agent, so the name must say which)."""
    with _lock:
        held, count = _agents.get(agent.name, (agent, 0))
        if held is not agent and count:
            raise ValueError(f"a worker of this process already runs another agent named "
                             f"{agent.name!r}; give each agent its own name")
        _agents[agent.name] = (agent, count + 1)


def release(agent: TemporalAgent) -> None:
    """A worker that held ``agent`` stopped."""
    with _lock:
        held, count = _agents.get(agent.name, (agent, 0))
        if held is agent and count > 1:
            _agents[agent.name] = (agent, count - 1)
        elif held is agent:
            _agents.pop(agent.name, None)


def agent_named(name: str) -> TemporalAgent:
    """The agent ``name`` a worker of this process runs; ``UnknownAgentError`` naming the
    ones there are, if none."""
    with _lock:
        found = _agents.get(name)
        known = sorted(_agents)
    if found is None:
        raise UnknownAgentError(f"no worker of this process runs an agent named {name!r}; "
                                f"its agents: {known or '(none)'}")
    return found[0]
