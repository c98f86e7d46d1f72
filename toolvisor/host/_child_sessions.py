"""Child sessions: runs started by a call, linked to it as an OTP process to its parent.

``AgentSessionHost`` is one agent's side: it starts (or, when its store already holds the run,
re-attaches to) a child run on its orchestrator, cancels one, snapshots one, and remembers
each live child's ``ChildLink`` (its parent run and call, its depth, its trace parent) under a
lock, since the calls of any agent's runs reach it from their own threads.

``CallSessions`` is one call's ``ctx.sessions``: the run's own view (model, snapshot, catalog)
and the children this call started. The ``CallStarter`` that built it owns its end: when the
call's reply is taken (a result, a timeout, a cancellation) or its run is released, it calls
:meth:`CallSessions.end`, which refuses any later child and cancels each live one; a child's
own calls end the same way when its run is cancelled, so the cascade reaches every level.
State here is read and written by the handler's threads and by the orchestrator's thread
(``end``), under the object's lock; no lock is held while waiting for a child.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from pykka import ActorDeadError, ActorRef

from toolvisor._logging import get_event_log
from toolvisor.contract import (
    AskUser,
    CapabilityError,
    CatalogEntry,
    DurableEffectsAccess,
    Message,
    ModelInfo,
    SessionSnapshot,
    SystemMessage,
    ToolError,
    UserMessage,
)
from toolvisor.durable import SessionStore
from toolvisor.host._commands import (
    AttachRun,
    CancelRun,
    OrchestratorSettings,
    StartRun,
    reply_future,
)
from toolvisor.host._model_info import model_info
from toolvisor.host._relays import Relay, Relays, Resume, relayed_question
from toolvisor.host._run import HostedRun, RunMessage
from toolvisor.machine import MachineConfig, TurnMachine
from toolvisor.registry import ToolRegistry

_log = get_event_log("sessions")

CHILD_STEP = "toolvisor.child_session"
"""The journal step (``<CHILD_STEP>.<n>``) that keeps the run id of a call's n-th child."""


@dataclass(frozen=True, slots=True)
class SnapshotRun(RunMessage):
    """Reply with a :class:`SessionSnapshot` of the run (hosted here, else from the store)."""

    reply: Future[Any]


def answer_snapshot(message: SnapshotRun, run: HostedRun | None,
                    settings: OrchestratorSettings) -> None:
    """Answer a snapshot on the orchestrator's thread: of a run hosted there, else from the
    store's latest checkpoint."""
    run_id, reply, store = message.run_id, message.reply, settings.store
    machine = None if run is None else run.machine
    link = None if settings.sessions is None else settings.sessions.link_of(run_id)
    saved = None if machine is not None or store is None else store.latest_checkpoint(run_id)
    if machine is None and (saved is None or settings.config is None):
        reply.set_exception(LookupError(f"run {run_id!r} is not hosted here and no store "
                                        "holds it"))
        return
    if machine is None:
        assert saved is not None and settings.config is not None
        machine = TurnMachine.restore(settings.config, saved.data)
    reply.set_result(snapshot_of(run_id, machine, link))


def snapshot_of(run_id: str, machine: TurnMachine, link: ChildLink | None) -> SessionSnapshot:
    """The snapshot of a run as its machine stands (on the orchestrator's thread)."""
    run = machine.checkpoint().run
    return SessionSnapshot(run_id=run_id, status=machine.status, messages=tuple(run.messages),
                           state=dict(machine.state), usage=run.usage, turns=machine.turn,
                           parent_run_id=None if link is None else link.parent_run_id)


@dataclass(frozen=True, slots=True)
class ChildLink:
    """What a child run knows of its parent: the run and the call that started it, how deep
    it is (a child of a top-level run is 1), and the W3C trace headers of the parent call's
    span (its ``invoke_agent`` span is made under it)."""

    parent_run_id: str
    parent_call_id: str
    depth: int
    trace: Mapping[str, str] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """How deep child sessions may nest (a top-level run is depth 0) and how many one call
    may start; each is refused past its limit with a ``CapabilityError``."""

    max_session_depth: int = 3
    max_child_sessions: int = 16

    def __post_init__(self) -> None:
        for name in ("max_session_depth", "max_child_sessions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")


class AgentSessionHost:
    """One agent as a host of child sessions (and of its runs' own view). Thread-safe."""

    def __init__(self, agent_name: str, model: Any, *, config: MachineConfig,
                 store: SessionStore | None, orchestrator: Callable[[], ActorRef[Any]],
                 closed: Callable[[], bool], limits: SessionLimits, resume: Resume) -> None:
        self._agent_name = agent_name
        self._model = model_info(model)
        self._config = config
        self._store = store
        self._orchestrator = orchestrator
        self._closed = closed
        self.limits = limits
        self.resume = resume  # the agent's resume: a relayed answer reaches a child through it
        self.relays = Relays()  # the questions its runs' calls ask for their children
        self._lock = threading.Lock()
        self._links: dict[str, ChildLink] = {}  # live child runs hosted here

    @property
    def agent_name(self) -> str:
        return self._agent_name

    def model_info(self) -> ModelInfo:
        return self._model

    def start_child(self, run_id: str, prompt: str | Sequence[Message],
                    state: Mapping[str, Any] | None, link: ChildLink) -> Future[Any]:
        self._check_open()
        future = reply_future()
        with self._lock:
            self._links[run_id] = link
        try:
            if self._store is not None and self._store.get_run(run_id) is not None:
                self._tell(AttachRun(run_id, future))  # a parent resumed: the same child
            else:
                machine = TurnMachine(self._config)
                self._tell(StartRun(run_id, machine, machine.start(prompt, state=state),
                                    future))
        except BaseException:
            self.forget(run_id)
            raise
        return future

    def cancel_child(self, run_id: str) -> None:
        with contextlib.suppress(ActorDeadError, CapabilityError):
            self._tell(CancelRun(run_id))

    def snapshot(self, run_id: str) -> SessionSnapshot:
        future: Future[Any] = reply_future()
        self._tell(SnapshotRun(run_id, future))
        snapshot: SessionSnapshot = future.result()
        return snapshot

    def link_of(self, run_id: str) -> ChildLink | None:
        with self._lock:
            return self._links.get(run_id)

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._links.pop(run_id, None)

    def _check_open(self) -> None:
        if self._closed():
            raise CapabilityError("agent_closed", f"agent {self._agent_name!r} is closed: it "
                                  "hosts no more sessions; start children on an open Agent")

    def _tell(self, message: Any) -> None:
        self._check_open()
        try:
            self._orchestrator().tell(message)
        except ActorDeadError as exc:
            raise CapabilityError("agent_closed", f"agent {self._agent_name!r} is stopping: "
                                  "it hosts no more sessions") from exc


@dataclass(eq=False)
class _Session:
    """A child session: the agent hosting it, its transcript so far, its state."""

    host: AgentSessionHost
    state: Mapping[str, Any] | None
    messages: tuple[Message, ...] = ()
    closed: bool = False
    live: str | None = None  # the run of its turn under way


@dataclass(eq=False)
class _Children:
    """What one call started (guarded by ``CallSessions._lock``)."""

    sessions: dict[str, _Session] = field(default_factory=dict)
    live: dict[str, AgentSessionHost] = field(default_factory=dict)  # child run -> its host
    granted: dict[str, AgentSessionHost] = field(default_factory=dict)  # may be snapshot
    finished: dict[str, SessionSnapshot] = field(default_factory=dict)
    started: int = 0


class CallSessions:
    """``ctx.sessions`` for one call of run ``run_id`` (see the module's docstring)."""

    def __init__(self, *, run_id: str, call_id: str, host: AgentSessionHost,
                 registry: ToolRegistry, durable: DurableEffectsAccess | None) -> None:
        self._run_id = run_id
        self._call_id = call_id
        self._host = host
        self._registry = registry
        self._durable = durable
        link = host.link_of(run_id)
        self._depth = 0 if link is None else link.depth
        self._lock = threading.Lock()
        self._ended = False
        self._children = _Children()
        self.trace_scope: Callable[[], AbstractContextManager[Any]] | None = None  # set by
        # the CallStarter before the call starts, when it is traced

    # --- the run's own view -----------------------------------------------------------------

    def model(self) -> ModelInfo:
        """The run's model: provider, name and variant."""
        return self._host.model_info()

    def snapshot_current(self) -> SessionSnapshot:
        """A read-only view of the calling run: transcript so far, state, usage, status."""
        return self._host.snapshot(self._run_id)

    def snapshot(self, run_id: str) -> SessionSnapshot:
        """The same view of run ``run_id``: this call's run, or a child this call started."""
        if run_id == self._run_id:
            return self.snapshot_current()
        with self._lock:
            finished = self._children.finished.get(run_id)
            host = self._children.granted.get(run_id)
        if finished is not None:
            return finished
        if host is None:
            raise CapabilityError(
                "snapshot_not_granted",
                f"run {run_id!r} is not this call's run nor a child session it started: a "
                "call may read its own run and its children only")
        return host.snapshot(run_id)

    def tool_catalog(self) -> tuple[CatalogEntry, ...]:
        """Every tool the agent's sources provide, with its spec and whether it is offered."""
        members = self._registry.members()
        return tuple(CatalogEntry(spec=m.spec, present=m.name in members)
                     for m in self._registry.available())

    def set_tool_membership(self, names: Iterable[str], present: bool) -> frozenset[str]:
        """Put ``names`` in the catalog (``present=True``) or take them out; returns the names
        whose membership changed. A name no source provides is a ``LookupError``."""
        if isinstance(names, str):
            raise TypeError(f"names must be a collection of tool names, got the str {names!r}; "
                            f"pass [{names!r}]")
        if not isinstance(present, bool):
            raise TypeError(f"present must be a bool, got {present!r}")
        edit = self._registry.add_member if present else self._registry.remove_member
        return frozenset(name for name in list(names) if edit(name))

    # --- child sessions ---------------------------------------------------------------------

    def create_session(self, agent: Any = None,
                       state: Mapping[str, Any] | None = None) -> str:
        """A child session on ``agent`` (this call's agent when ``None``); its id names it to
        ``start_turn`` and ``close_session``. No run starts until its first turn."""
        host = self._host_of(agent)
        with self._lock:
            self._check_live()
            session = f"{self._call_id}.s{len(self._children.sessions) + 1}"
            self._children.sessions[session] = _Session(host, state)
        return session

    def start_turn(self, prompt: str | Sequence[Message], session: str | None = None,
                   agent: Any = None, state: Mapping[str, Any] | None = None) -> Any:
        """Run one turn of a child: of ``session``, or (without one) of a one-shot child on
        ``agent``. Blocks until the child run ends or suspends; returns its outcome
        (``Completed``, ``Failed``, ``Halted`` or ``Suspended``). A child whose host could not
        run it raises ``ToolError`` (``handler_exit``, code ``child_session_crashed``)."""
        if session is None:
            opened = _Session(self._host_of(agent), state)
        elif agent is not None or state is not None:
            raise ValueError("start_turn(session=...) runs on the session's own agent and "
                             "state; give agent= and state= to create_session instead")
        else:
            opened = self._session(session)
        request = _prompt_of(opened.messages, prompt)
        with self._lock:
            self._check_live()
            limits = self._host.limits
            if self._depth + 1 > limits.max_session_depth:
                raise CapabilityError(
                    "session_depth_exceeded",
                    f"a child session here would be {self._depth + 1} levels deep, past the "
                    f"limit of {limits.max_session_depth}; raise Agent(max_session_depth=...) "
                    "or start it from a shallower run")
            if self._children.started >= limits.max_child_sessions:
                raise CapabilityError(
                    "too_many_child_sessions",
                    f"call {self._call_id!r} already started {self._children.started} child "
                    f"runs, the limit per call; raise Agent(max_child_sessions=...) or run "
                    "fewer turns from one call")
            self._children.started += 1
            ordinal = self._children.started
        child = self._child_run_id(ordinal)
        host = opened.host
        link = ChildLink(self._run_id, self._call_id, self._depth + 1, self._trace_headers())
        _log.info("child_session_started", run_id=child, parent_run_id=self._run_id,
                  parent_call_id=self._call_id, agent=host.agent_name, depth=link.depth)
        future = host.start_child(child, request, opened.state, link)
        with self._lock:
            self._children.live[child] = host
            self._children.granted[child] = host
            opened.live = child
            ended = self._ended
        if ended:  # the call ended while the child was being started
            host.cancel_child(child)
        try:
            outcome = future.result()
        except Exception as exc:
            raise ToolError("handler_exit", f"child session {child!r} on agent "
                            f"{host.agent_name!r} crashed: {type(exc).__name__}: {exc}",
                            cause=exc, code="child_session_crashed") from exc
        finally:
            host.forget(child)
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

    def relay(self, outcome: Any) -> AskUser:
        """The question of a child this call started, suspended on it, as this call's own
        ``AskUser`` (return it): the parent run suspends on it, and resuming the parent with
        an answer gives the answer to the child, whose result becomes this call's."""
        run_id = getattr(outcome, "run_id", None)
        with self._lock:
            host = self._children.granted.get(run_id) if isinstance(run_id, str) else None
        if host is None:
            raise CapabilityError("relay_unsupported", f"run {run_id!r} is not a child session "
                                  "this call started; only its own children's questions relay")
        question = relayed_question(host.agent_name, outcome)
        self._host.relays.add(self._run_id, self._call_id,
                              Relay(host.agent_name, host.resume, outcome))
        return question

    def close_session(self, session: str) -> None:
        """Close ``session``: no more turns; a turn under way is cancelled."""
        opened = self._session(session)
        with self._lock:
            opened.closed = True
            live = opened.live
        if live is not None:
            opened.host.cancel_child(live)

    # --- the link ---------------------------------------------------------------------------

    def end(self) -> None:
        """The call ended (or its run was released): refuse later children and cancel every
        live one (each cancels its own, so the cascade reaches every level). Idempotent."""
        with self._lock:
            self._ended = True
            live = list(self._children.live.items())
            for opened in self._children.sessions.values():
                opened.closed = True
        for run_id, host in live:
            host.cancel_child(run_id)

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

    def _host_of(self, agent: Any) -> AgentSessionHost:
        if agent is None:
            return self._host
        host = getattr(agent, "session_host", None)
        if not isinstance(host, AgentSessionHost):
            raise TypeError(f"agent must be a toolvisor Agent (or None for this call's "
                            f"agent), got {type(agent).__name__}")
        return host

    def _child_run_id(self, ordinal: int) -> str:
        """A new run id; in a durable call, journaled first, so a call run again after a
        crash re-attaches to the same child instead of starting another."""
        if self._durable is None:
            return uuid.uuid4().hex
        run_id: str = self._durable.run_json(f"{CHILD_STEP}.{ordinal}", None,
                                             lambda _: uuid.uuid4().hex)
        return run_id

    def _trace_headers(self) -> dict[str, str] | None:
        if self.trace_scope is None:
            return None
        from opentelemetry import propagate  # noqa: PLC0415 - only when tracing is on

        headers: dict[str, str] = {}
        with self.trace_scope():
            propagate.inject(headers)
        return headers


def _prompt_of(transcript: tuple[Message, ...],
               prompt: str | Sequence[Message]) -> str | Sequence[Message]:
    """A session's next prompt: its transcript so far (its system prompt is the agent's to
    add again) then the new prompt."""
    if not transcript:
        return prompt
    kept = [m for m in transcript if not isinstance(m, SystemMessage)]
    added = [UserMessage(content=prompt)] if isinstance(prompt, str) else list(prompt)
    return [*kept, *added]
