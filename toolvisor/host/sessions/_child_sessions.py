"""Child sessions: runs started by a call, linked to it as an OTP process to its parent.

``CallSessions`` is one call's ``ctx.sessions``: the run's own view (model, snapshot, its own
catalog, a ``RunCatalog``) and the children this call started. The ``CallStarter`` that built
it owns its end: when the call's reply is taken (a result, a timeout, a cancellation) or its
run's work is stopped, it calls :meth:`CallSessions.end`, which refuses any later child and cancels
each live one; a child's own calls end the same way when its run is cancelled, so the cascade
reaches every level. The catalog edits the call made are taken with its reply
(``take_membership``, on the call's thread), for its outcome. State here is read and written by
the handler's threads and by the orchestrator's thread (``end``), under the object's lock; no
lock is held while waiting for a child.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.contract import (
    AskUser,
    CapabilityError,
    CatalogEntry,
    CompletionKeys,
    DurableEffectsAccess,
    Message,
    ModelInfo,
    Pending,
    SessionSnapshot,
    SystemMessage,
    ToolError,
    UserMessage,
    trace_headers,
)
from toolvisor.host._run_catalog import RunCatalog
from toolvisor.host.sessions._agent_sessions import AgentSessions, ChildLink
from toolvisor.host.sessions._relays import Relay, relayed_question, waits_on_one_key
from toolvisor.host.sessions._stored_relays import (
    CHILD_STEP,
    follow_child,
    journal_relay,
    relay_key_of,
)

_log = get_event_log("sessions")

@dataclass(eq=False)
class _Session:
    """A child session: the agent hosting it, its transcript so far, its state."""

    starter: AgentSessions
    state: Mapping[str, Any] | None
    messages: tuple[Message, ...] = ()
    closed: bool = False
    live: str | None = None  # the run of its turn under way


@dataclass(eq=False)
class _Children:
    """What one call started (guarded by ``CallSessions._lock``)."""

    sessions: dict[str, _Session] = field(default_factory=dict)
    live: dict[str, AgentSessions] = field(default_factory=dict)  # child run -> its agent
    granted: dict[str, AgentSessions] = field(default_factory=dict)  # may be snapshot
    finished: dict[str, SessionSnapshot] = field(default_factory=dict)
    relaying: dict[str, AgentSessions] = field(default_factory=dict)  # children whose key
    # this call's Pending waits on
    started: int = 0


class CallSessions:
    """``ctx.sessions`` for one call of run ``run_id`` (see the module's docstring)."""

    def __init__(self, *, run_id: str, call_id: str, starter: AgentSessions,
                 catalog: RunCatalog, durable: DurableEffectsAccess | None,
                 keys: CompletionKeys | None) -> None:
        self._run_id = run_id
        self._call_id = call_id
        self._starter = starter
        self._catalog = catalog
        self._membership: dict[str, bool] | None = {}  # this call's catalog edits; None once
        # its reply took them
        self._durable = durable
        self._keys = keys
        link = starter.link_of(run_id)
        self._depth = 0 if link is None else link.depth
        self._lock = threading.Lock()
        self._ended = False
        self._children = _Children()
        self.trace_scope: Callable[[], AbstractContextManager[Any]] | None = None  # set by
        # the CallStarter before the call starts, when it is traced

    # --- the run's own view -----------------------------------------------------------------

    def model(self) -> ModelInfo:
        """The run's model: provider, name and variant."""
        return self._starter.model_info()

    def snapshot_current(self) -> SessionSnapshot:
        """A read-only view of the calling run: transcript so far, state, usage, status."""
        return self._starter.snapshot(self._run_id)

    def snapshot(self, run_id: str) -> SessionSnapshot:
        """The same view of run ``run_id``: this call's run, or a child this call started."""
        if run_id == self._run_id:
            return self.snapshot_current()
        with self._lock:
            finished = self._children.finished.get(run_id)
            starter = self._children.granted.get(run_id)
        if finished is not None:
            return finished
        if starter is None:
            raise CapabilityError(
                "snapshot_not_granted",
                f"run {run_id!r} is not this call's run nor a child session it started: a "
                "call may read its own run and its children only")
        return starter.snapshot(run_id)

    def tool_catalog(self) -> tuple[CatalogEntry, ...]:
        """Every tool the agent's sources provide, with its spec and whether it is in this
        run's catalog (offered to its model)."""
        return self._catalog.entries()

    def set_tool_membership(self, names: Iterable[str], present: bool) -> frozenset[str]:
        """Put ``names`` in the run's own catalog (``present=True``) or take them out; returns
        the names whose membership changed. Other runs, and the agent's registry, are not
        touched. A name no source provides is a ``LookupError``."""
        if isinstance(names, str):
            raise TypeError(f"names must be a collection of tool names, got the str {names!r}; "
                            f"pass [{names!r}]")
        if not isinstance(present, bool):
            raise TypeError(f"present must be a bool, got {present!r}")
        names = list(names)
        if not all(isinstance(name, str) for name in names):
            raise TypeError(f"names must be tool names (str), got {names!r}")
        with self._lock:
            if self._membership is None:
                raise CapabilityError(
                    "call_finished", f"call {self._call_id!r} has ended: its run took its "
                    "catalog edits with its result; edit the catalog while the call runs")
            changed = self._catalog.set(names, present)
            self._membership.update(dict.fromkeys(names, present))
        return changed

    def take_membership(self) -> dict[str, bool]:
        """The catalog edits this call made, for its outcome (on the thread that gives its
        reply); later edits are refused: its run would not keep them."""
        with self._lock:
            edits, self._membership = self._membership or {}, None
        return edits

    # --- child sessions ---------------------------------------------------------------------

    def create_session(self, agent: Any = None,
                       state: Mapping[str, Any] | None = None) -> str:
        """A child session on ``agent`` (this call's agent when ``None``); its id names it to
        ``start_turn`` and ``close_session``. No run starts until its first turn."""
        starter = self._starter_of(agent)
        with self._lock:
            self._check_live()
            session = f"{self._call_id}.s{len(self._children.sessions) + 1}"
            self._children.sessions[session] = _Session(starter, state)
        return session

    def start_turn(self, prompt: str | Sequence[Message], session: str | None = None,
                   agent: Any = None, state: Mapping[str, Any] | None = None) -> Any:
        """Run one turn of a child: of ``session``, or (without one) of a one-shot child on
        ``agent``. Blocks until the child run ends or suspends; returns its outcome
        (``Completed``, ``Failed``, ``Halted`` or ``Suspended``). A child whose host could not
        run it raises ``ToolError`` (``handler_exit``, code ``child_session_crashed``)."""
        if session is None:
            opened = _Session(self._starter_of(agent), state)
        elif agent is not None or state is not None:
            raise ValueError("start_turn(session=...) runs on the session's own agent and "
                             "state; give agent= and state= to create_session instead")
        else:
            opened = self._session(session)
        request = _prompt_of(opened.messages, prompt)
        with self._lock:
            self._check_live()
            limits = self._starter.limits
            if self._depth + 1 > limits.max_session_depth:
                raise CapabilityError(
                    "session_depth_exceeded",
                    f"a child session here would be {self._depth + 1} levels deep, past the "
                    f"limit of {limits.max_session_depth}; raise Limits(session_depth=...) "
                    "or start it from a shallower run")
            if self._children.started >= limits.max_child_sessions:
                raise CapabilityError(
                    "too_many_child_sessions",
                    f"call {self._call_id!r} already started {self._children.started} child "
                    f"runs, the limit per call; raise Limits(child_sessions=...) or run "
                    "fewer turns from one call")
            self._children.started += 1
            ordinal = self._children.started
        child = self._child_run_id(ordinal)
        starter = opened.starter
        link = ChildLink(self._run_id, self._call_id, self._depth + 1,
                         trace_headers(self.trace_scope))
        _log.info("child_session_started", run_id=child, parent_run_id=self._run_id,
                  parent_call_id=self._call_id, agent=starter.agent_name, depth=link.depth)
        future = starter.start_child(child, request, opened.state, link)
        with self._lock:
            self._children.live[child] = starter
            self._children.granted[child] = starter
            opened.live = child
            ended = self._ended
        if ended:  # the call ended while the child was being started
            _cancel(starter, child)
        try:
            outcome = future.result()
        except Exception as exc:
            raise ToolError("handler_exit", f"child session {child!r} on agent "
                            f"{starter.agent_name!r} crashed: {type(exc).__name__}: {exc}",
                            cause=exc, code="child_session_crashed") from exc
        finally:
            starter.forget(child)
            with self._lock:
                self._children.live.pop(child, None)
                opened.live = None
        messages = tuple(getattr(outcome, "messages", ()))
        with self._lock:
            opened.messages = messages
            self._children.finished[child] = SessionSnapshot(
                run_id=child, status=str(getattr(outcome, "status", "unknown")),
                messages=messages, state=dict(getattr(outcome, "state", {}) or {}),
                usage=outcome.usage, turns=int(getattr(outcome, "turns", 0)),
                parent_run_id=self._run_id)
        return outcome

    def relay(self, outcome: Any) -> AskUser | Pending:
        """What a child this call started is suspended on, as this call's own result (return
        it). A question: an ``AskUser`` the parent run suspends on; resuming the parent gives
        the answer to the child, whose result becomes this call's. One completion key (with a
        store): a ``Pending`` the parent waits on, whose suspension shows the child's key;
        resolving it resumes the child, whose outcome then resolves this call."""
        run_id = getattr(outcome, "run_id", None)
        with self._lock:
            starter = self._children.granted.get(run_id) if isinstance(run_id, str) else None
        if starter is None:
            raise CapabilityError("relay_unsupported", f"run {run_id!r} is not a child session "
                                  "this call started; only its own children's questions relay")
        child_key = waits_on_one_key(outcome)
        keyed = child_key is not None and self._keys is not None and self._starter.store is not None
        question = None if keyed else relayed_question(starter.agent_name, outcome)
        if self._durable is not None:  # a parent resumed after a restart reads it back
            journal_relay(self._durable, starter.agent_name, outcome.run_id,
                          "question" if question else "key")
        if question is None:
            assert child_key is not None
            return self._relay_key(starter, outcome.run_id, child_key)
        self._starter.relays.add(self._run_id, self._call_id,
                              Relay(starter.agent_name, starter.resume, outcome))
        return question

    def _relay_key(self, starter: AgentSessions, child: str, child_key: str) -> Pending:
        """Wait on the child's key through this call's own: the child stays linked (cancelled
        with the run), and its next outcome resolves this call's key (journaled under the
        child, so whichever process ends the child resolves it)."""
        assert self._keys is not None and self._starter.store is not None
        key = self._keys.issue()
        with self._lock:
            self._children.relaying[child] = starter
        self._starter.relays.add_key(self._run_id, self._call_id, child_key)

        def child_back() -> None:
            with self._lock:
                self._children.relaying.pop(child, None)
        relay_key_of(starter, child, parent=self._run_id, key=key)
        follow_child(self._starter, self._run_id, self._call_id, key, child=starter,
                     child_run=child, then=child_back)
        return Pending()

    def close_session(self, session: str) -> None:
        """Close ``session``: no more turns; a turn under way is cancelled."""
        opened = self._session(session)
        with self._lock:
            opened.closed = True
            live = opened.live
        if live is not None:
            _cancel(opened.starter, live)

    # --- the link ---------------------------------------------------------------------------

    def end(self, *, run_stopped: bool = False, run_goes_on: bool = False) -> bool:
        """The call ended (or its run's work was stopped: ``run_stopped``): refuse later
        children and cancel every live one (each cancels its own, so the cascade reaches every
        level); a child whose key this call relays is cancelled only with the run, and not when
        the run goes on elsewhere or later (``run_goes_on``: its agent closes, or it waits on
        keys elsewhere): that child waits on in the store, its outcome resolving this call's
        key wherever it ends. Whether such a child still waits."""
        with self._lock:
            self._ended = True
            live = list(self._children.live.items())
            if run_stopped and not run_goes_on:
                live += list(self._children.relaying.items())
            for opened in self._children.sessions.values():
                opened.closed = True
            relaying = bool(self._children.relaying) and not run_stopped
        if run_stopped:
            self._starter.relays.forget(self._run_id, self._call_id)
        for run_id, starter in live:
            _cancel(starter, run_id)
        return relaying

    def _check_live(self) -> None:
        if self._ended:
            raise CapabilityError(
                "call_finished", f"call {self._call_id!r} has ended: its child sessions were "
                "closed with it; start children only while the call runs")

    def _session(self, session: str) -> _Session:
        with self._lock:
            self._check_live()
            opened = self._children.sessions.get(session)
            if opened is None:
                raise CapabilityError("unknown_session", f"no child session {session!r} in "
                                      f"this call; it has {sorted(self._children.sessions)}")
            if opened.closed:
                raise CapabilityError("session_closed", f"child session {session!r} is "
                                      "closed; create a new one")
            return opened

    def _starter_of(self, agent: Any) -> AgentSessions:
        if agent is None:
            return self._starter
        starter = getattr(agent, "sessions", None)
        if not isinstance(starter, AgentSessions):
            raise TypeError(f"agent must be a toolvisor Agent (or None for this call's "
                            f"agent), got {type(agent).__name__}")
        return starter

    def _child_run_id(self, ordinal: int) -> str:
        """A new run id; in a durable call, journaled first, so a call run again after a
        crash re-attaches to the same child instead of starting another."""
        if self._durable is None:
            return uuid.uuid4().hex
        run_id: str = self._durable.run_json(f"{CHILD_STEP}.{ordinal}", None,
                                             lambda _: uuid.uuid4().hex)
        return run_id


def _cancel(starter: AgentSessions, run_id: str) -> None:
    """Cancel a child this call started (nothing to do once its agent has closed)."""
    with contextlib.suppress(CapabilityError):
        starter.cancel(run_id)


def _prompt_of(transcript: tuple[Message, ...],
               prompt: str | Sequence[Message]) -> str | Sequence[Message]:
    """A session's next prompt: its transcript so far (its system prompt is the agent's to
    add again) then the new prompt."""
    if not transcript:
        return prompt
    kept = [m for m in transcript if not isinstance(m, SystemMessage)]
    added = [UserMessage(content=prompt)] if isinstance(prompt, str) else list(prompt)
    return [*kept, *added]
