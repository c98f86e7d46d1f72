"""The run tree in the store: which agent each run runs on, and which run's call started it.

``record_run`` writes both when the orchestrator creates a run (``toolvisor.cli runs`` shows
the tree); ``refuse_child`` keeps ``Agent.resume_run`` from handing out a child session's
outcome as if it were its parent's. Plain functions over the store, on the caller's thread.
"""

from __future__ import annotations

from toolvisor.durable import RunStore
from toolvisor.host.sessions import AgentSessions


def record_run(store: RunStore, sessions: AgentSessions | None, run_id: str) -> None:
    """Record run ``run_id`` in ``store`` with the name of the agent ``sessions`` starts it on
    (``None``: no agent's) and, for a child session, the run whose call started it."""
    link = None if sessions is None else sessions.link_of(run_id)
    store.create_run(run_id, agent=None if sessions is None else sessions.agent_name,
                     parent_run_id=None if link is None else link.parent_run_id)


def refuse_child(operation: str, store: RunStore, run_id: str,
                 sessions: AgentSessions) -> None:
    """A ``ValueError`` if ``run_id`` is a child session and the agent of ``sessions`` is its
    parent's agent (or not its own): the child's outcome goes to the call that started it, so
    handing it out here would pass it off as the parent's. On the child's own agent (not also
    its parent's) the child's outcome is what the caller asks for.

    Args:
        operation: The agent's method asked (``resume_run``), named in the error.
        store: The agent's run store.
        run_id: The run asked for.
        sessions: The agent asked, as the starter of child sessions (its name).
    """
    agent = sessions.agent_name
    record = store.get_run(run_id) if isinstance(run_id, str) and run_id else None
    if record is None or record.parent_run_id is None:
        return
    chain = [record]
    seen = {record.run_id}
    while (parent := chain[-1].parent_run_id) is not None and parent not in seen:
        seen.add(parent)
        above = store.get_run(parent)
        if above is None:
            break
        chain.append(above)
    parent_agent = chain[1].agent if len(chain) > 1 else None
    if record.agent == agent and parent_agent != agent:
        return
    top = chain[-1]
    where = "the agent that runs it" if top.agent is None else f"agent {top.agent!r}"
    own = "" if record.agent is None or record.agent == parent_agent else (
        f"; to read the child's own outcome, {operation}({run_id!r}) on agent "
        f"{record.agent!r}")
    raise ValueError(
        f"{operation}: run {run_id!r} is a child session (of agent {record.agent!r}) started "
        f"by a call of run {record.parent_run_id!r} (of agent {parent_agent!r}); its outcome "
        f"goes to that call, not to this agent ({agent!r}). Resume the top-level run instead, "
        f"{operation}({top.run_id!r}) on {where}: it goes on with its children{own}")
