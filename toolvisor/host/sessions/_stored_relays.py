"""Relays derived from the store: a parent's call relaying its child, recovered after a restart.

A relaying call journals one step, ``toolvisor.child_relay``, naming the child run, the agent
hosting it and what it relays (a question or a key); the child's run id was journaled before
it started (``toolvisor.child_session.<n>``). A parent resumed in another process, or by
another agent on the same store, has no relay in memory, so it reads them back: the step of
each waiting call (filed under the call's turn and attempt, which the parent's signed
checkpoint gives), checked against the call's own children and, for a question, against the
signed question, which names the child's agent. That agent is found by name among the agents
the parent and its tools name (``Agent.as_tool``). A call relaying a key also journals its own
key under the child run (``RELAYED_KEY``), which the host that ends the child resolves. Nothing
here is kept: each function reads the store when it is called, from the thread that calls it.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from toolvisor._logging import get_event_log
from toolvisor.contract import CapabilityError, DurableEffectsAccess, Ok, Tool
from toolvisor.durable import RunStore
from toolvisor.host._protocol import AlreadyResumedError, OrchestratorStopped, RunLeasedError
from toolvisor.host.sessions._agent_tool import AgentToolHandler, outcome_result
from toolvisor.host.sessions._relays import Relay, Relays, waits_on_keys, waits_on_one_key
from toolvisor.host.waits import durable_call_id
from toolvisor.machine import Suspended

_log = get_event_log("sessions")

CHILD_STEP = "toolvisor.child_session"
"""The journal step (``<CHILD_STEP>.<n>``) that keeps the run id of a call's n-th child."""

RELAY_STEP = "toolvisor.child_relay"
"""The journal step of a call that relays its child: ``{"agent", "run_id", "kind"}``."""

RELAYED_KEY = ("toolvisor.relayed_by", "key")
"""Where a child whose key a parent's call relays keeps that call's own key, in its own
journal (call id, step id): ``{"run_id": <parent>, "key": <key>}``. Whichever host ends the
child resolves the key with its outcome, so a parent whose host closed or died is completed
by the child's outcome wherever the child ends."""


class RelayingAgent(Protocol):
    """What these functions use of an agent's ``AgentSessions``: its name, store, tools and
    relays, and how it reaches its runs."""

    @property
    def agent_name(self) -> str: ...

    @property
    def store(self) -> RunStore | None: ...

    @property
    def tools(self) -> Sequence[Tool]: ...

    @property
    def closed(self) -> bool: ...

    @property
    def relays(self) -> Relays: ...

    def stored_suspension(self, run_id: str) -> Suspended | None: ...

    def answer_stored(self, asked: Suspended, answer: Any) -> tuple[str, Future[Any]]: ...

    def attach(self, run_id: str) -> Future[Any]: ...

    def cancel(self, run_id: str) -> None: ...


@dataclass(frozen=True, slots=True)
class StoredRelay:
    """What a call journaled of the child it relays: the child's agent, its run, and whether
    the call relays its ``question`` or its ``key``."""

    agent: str
    run_id: str
    kind: str


def journal_relay(durable: DurableEffectsAccess, agent: str, child: str, kind: str) -> None:
    """Journal that the calling call relays ``child`` (on agent ``agent``)."""
    durable.run_json(RELAY_STEP, {"run_id": child, "kind": kind},
                     lambda _: {"agent": agent, "run_id": child, "kind": kind})


def stored_relay(store: RunStore, run_id: str, durable_id: str) -> StoredRelay | None:
    """The relay call ``durable_id`` of run ``run_id`` journaled, checked to name one of the
    children the call journaled; ``None`` if it relays nothing."""
    record = store.journal_record(run_id, durable_id, RELAY_STEP)
    if record is None:
        return None
    try:
        data = json.loads(record.output)
        relay = StoredRelay(str(data["agent"]), str(data["run_id"]), str(data["kind"]))
    except (ValueError, TypeError, KeyError) as exc:
        raise CapabilityError("relay_unreadable", f"call {durable_id!r} of run {run_id!r} "
                              f"journaled a relay that is not one: {record.output!r}") from exc
    children, n = set(), 1
    while (child := store.journal_record(run_id, durable_id, f"{CHILD_STEP}.{n}")) is not None:
        children.add(json.loads(child.output))
        n += 1
    if relay.run_id not in children:
        raise CapabilityError(
            "relay_unknown_child", f"call {durable_id!r} of run {run_id!r} relays run "
            f"{relay.run_id!r}, which is none of the child sessions it journaled "
            f"({sorted(children)}); the store's journal does not match the call")
    return relay


def child_starter(starter: RelayingAgent, name: str, child: str) -> RelayingAgent:
    """The ``AgentSessions`` of agent ``name``, among this agent and the agents its tools name."""
    named: dict[int, RelayingAgent] = {id(starter): starter}
    for tool in starter.tools:
        if isinstance(tool.handler, AgentToolHandler):
            found = tool.handler.agent.sessions
            named[id(found)] = found
    matches = [h for h in named.values() if h.agent_name == name]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise CapabilityError(
            "child_agent_ambiguous", f"child run {child!r} was started on agent {name!r}, and "
            f"agent {starter.agent_name!r} and its tools name {len(matches)} agents of that name; "
            "give each agent its own name (Agent(..., name=...))")
    raise CapabilityError(
        "child_agent_not_found", f"child run {child!r}, relayed by a call of agent "
        f"{starter.agent_name!r}, runs on agent {name!r}, which is neither that agent nor one its "
        f"tools name ({sorted(h.agent_name for h in named.values())}); give agent "
        f"{starter.agent_name!r} the tool that {name}.as_tool(...) makes, {name!r} having the "
        "store that holds the child run")


def recover_relay(starter: RelayingAgent, asked: Suspended, call_id: str) -> Relay | None:
    """The relay of question call ``call_id`` of the verified suspension ``asked``, read back
    from the store; ``None`` if the call relays no child's question."""
    store, waiting = starter.store, asked.waiting_calls().get(call_id)
    if store is None or waiting is None:
        return None
    stored = stored_relay(store, asked.run_id, durable_call_id(*waiting, call_id))
    if stored is None or stored.kind != "question":
        return None
    question = next((q.question for q in asked.questions if q.call_id == call_id), "")
    if not question.startswith(f"{stored.agent} > "):
        raise CapabilityError(
            "relay_mismatch", f"call {call_id!r} of run {asked.run_id!r} journaled a relay of "
            f"agent {stored.agent!r}'s child, but its signed question {question!r} is not that "
            "agent's; the store's journal does not match the run")
    child = child_starter(starter, stored.agent, stored.run_id)
    suspension = child.stored_suspension(stored.run_id)
    if suspension is not None \
            and [f"{stored.agent} > {q.question}" for q in suspension.questions] == [question]:
        return Relay(stored.agent, child.answer_stored, suspension)
    parent = starter.stored_suspension(asked.run_id)
    if parent is None or question not in [q.question for q in parent.questions
                                          if q.call_id == call_id]:
        raise AlreadyResumedError(
            f"run {asked.run_id}: this Suspended was resumed already: call {call_id!r} no "
            f"longer asks {question!r}; agent.resume_run({asked.run_id!r}) gives the run's "
            "outcome")
    # the child took its answer, and the parent's host died before it heard back: follow it
    return Relay(stored.agent, child.answer_stored,
                 functools.partial(child.attach, stored.run_id))


def relay_key_of(child: RelayingAgent, child_run: str, *, parent: str, key: str) -> None:
    """Journal, under child run ``child_run`` (on ``child``'s store), that its outcome
    resolves ``key``, of a call of run ``parent`` (``RELAYED_KEY``)."""
    store = child.store
    assert store is not None
    call_id, step_id = RELAYED_KEY
    store.record_step(child_run, call_id, step_id, json.dumps({"run_id": parent}),
                      json.dumps({"run_id": parent, "key": key}))


def resolve_relayed_key(child: RelayingAgent, child_run: str, outcome: Any) -> None:
    """Child run ``child_run`` ended with ``outcome`` on ``child``: resolve the key of the
    parent's call that relays it, if one does, with the outcome's text (else its error).
    A key resolved already (the parent's host followed the child) stays as it is."""
    store = child.store
    assert store is not None
    record = store.journal_record(child_run, *RELAYED_KEY)
    if record is None:
        return
    _resolve_with_outcome(store, str(json.loads(record.output)["key"]), outcome, child.agent_name)


def _resolve_with_outcome(store: RunStore, key: str, outcome: Any, agent_name: str) -> None:
    """Resolve ``key`` with a child's ``outcome`` on agent ``agent_name``: its text, else its
    error (``outcome_result``)."""
    result = outcome_result(outcome, agent_name)
    if isinstance(result, Ok):
        store.resolve(key, ok=result.value)
    else:
        store.resolve(key, error=str(result.reason))


def follow_child(starter: RelayingAgent, run_id: str, call_id: str, key: str, *,
                 child: RelayingAgent, child_run: str,
                 then: Callable[[], None] = lambda: None) -> None:
    """Resolve ``key``, of call ``call_id`` of run ``run_id``, with child run ``child_run``'s
    outcome (its text, else its error), then call ``then``.

    An outcome still waiting on keys alone is not one yet: a child restored from the store
    re-emits the suspension it waits in, and a child whose key was resolved may wait on
    another. The call then shows the child's key (its own, if the child waits on several) and
    attaches again, for the child's next outcome (a child waiting on keys stays hosted, so
    that attach waits for it). A child its host handed back (its agent closed: its orchestrator
    stopped; or another host drives it) is followed no more, and neither is one once the
    parent's agent has closed: the parent waits on, and the child's outcome resolves the key
    wherever it ends (``resolve_relayed_key``). Each callback runs on the child's
    orchestrator's thread.
    """
    store = starter.store
    assert store is not None

    def child_back(done: Future[Any]) -> None:
        error = done.exception()
        if starter.closed or isinstance(error, OrchestratorStopped | RunLeasedError):
            _log.info("child_unfollowed", run_id=run_id, call_id=call_id, child=child_run,
                      why="the parent's agent closed" if starter.closed else str(error))
            return
        outcome = None if error is not None else done.result()
        if waits_on_keys(outcome):
            starter.relays.add_key(run_id, call_id, waits_on_one_key(outcome) or key)
            # refused only while the child's agent closes: the parent, restored, attaches again
            with contextlib.suppress(CapabilityError):
                child.attach(child_run).add_done_callback(child_back)
            return
        then()
        if error is not None:
            store.resolve(key, error=f"child session {child_run} on agent "
                                     f"{child.agent_name!r} crashed: {error}")
        else:
            _resolve_with_outcome(store, key, outcome, child.agent_name)
    child.attach(child_run).add_done_callback(child_back)


def follow_key_relays(starter: RelayingAgent, run_id: str,
                      waiting: dict[str, tuple[str, str]]) -> None:
    """A restored run waits on the keys of ``waiting`` (``call id -> (durable id, key)``): for
    each call relaying a child's key that no relay in memory follows, follow the child
    (``follow_child``: its outcome resolves the call's key; the child's key is the one
    shown)."""
    store = starter.store
    assert store is not None
    for call_id, (durable_id, key) in waiting.items():
        if starter.relays.follows_key(run_id, call_id):
            continue
        stored = stored_relay(store, run_id, durable_id)
        if stored is None or stored.kind != "key":
            continue
        child = child_starter(starter, stored.agent, stored.run_id)
        child_keys = [w.key for w in store.open_waits(stored.run_id)]
        starter.relays.add_key(run_id, call_id, child_keys[0] if len(child_keys) == 1 else key)
        follow_child(starter, run_id, call_id, key, child=child, child_run=stored.run_id)


def cancel_relayed(starter: RelayingAgent, run_id: str, waiting: dict[str, str]) -> None:
    """Run ``run_id`` is cancelled while its calls ``waiting`` (``call id -> durable id``)
    wait: drop their relays, and cancel each child they relay (restored from its store if no
    process hosts it)."""
    store = starter.store
    for call_id, durable_id in waiting.items():
        starter.relays.forget(run_id, call_id)
        stored = None if store is None else stored_relay(store, run_id, durable_id)
        if stored is not None:
            child_starter(starter, stored.agent, stored.run_id).cancel(stored.run_id)
