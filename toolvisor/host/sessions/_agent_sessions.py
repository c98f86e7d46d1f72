"""``AgentSessions``: one agent as the starter of child sessions, and of its runs' own view.

It starts (or, when its store already holds the run, re-attaches to) a child run on its
orchestrator, cancels one, snapshots one, and remembers each live child's ``ChildLink`` (its
parent run and call, its depth, its trace parent) under a lock, since the calls of any agent's
runs reach it from their own threads. It reaches the orchestrator only by telling its
``ActorRef`` the protocol's messages. A snapshot is a ``SnapshotRun`` answered on the
orchestrator's thread (``answer_snapshot``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from pykka import ActorDeadError, ActorRef

from toolvisor._logging import get_event_log
from toolvisor.contract import CapabilityError, Message, ModelInfo, SessionSnapshot, Tool
from toolvisor.durable import RunStore
from toolvisor.host._mail import reply_future
from toolvisor.host._protocol import AnswerRun, AttachRun, CancelRun, SnapshotRun, StartRun
from toolvisor.host.models import model_info
from toolvisor.host.sessions._relays import Relays, Resume
from toolvisor.host.sessions._stored_relays import (
    cancel_relayed,
    follow_key_relays,
    recover_relay,
    resolve_relayed_key,
)
from toolvisor.machine import Done, MachineConfig, Suspended, TurnMachine, answers_for

_log = get_event_log("sessions")


def answer_snapshot(message: SnapshotRun, machine: TurnMachine | None,
                    sessions: AgentSessions | None, store: RunStore | None,
                    config: MachineConfig | None) -> None:
    """Answer a snapshot on the orchestrator's thread: of a run hosted there (``machine``),
    else from the ``store``'s latest checkpoint (restored with ``config``); ``sessions``
    knows the run's link, if it is a child."""
    run_id, reply = message.run_id, message.reply
    link = None if sessions is None else sessions.link_of(run_id)
    try:  # a snapshot that cannot be made is the asker's error, never the run's
        saved = None if machine is not None or store is None else store.latest_checkpoint(run_id)
        if machine is None and (saved is None or config is None):
            raise LookupError(f"run {run_id!r} is not hosted here and no store holds it")
        if machine is None:
            assert saved is not None and config is not None
            machine = TurnMachine.restore(config, saved.data)
        reply.set_result(snapshot_of(run_id, machine, link))
    except Exception as exc:
        reply.set_exception(exc)


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


class AgentSessions:
    """One agent as the starter of child sessions (and of its runs' own view). Thread-safe."""

    def __init__(self, agent_name: str, model: Any, *, config: MachineConfig,
                 store: RunStore | None, orchestrator: Callable[[], ActorRef[Any]],
                 closed: Callable[[], bool], limits: SessionLimits, resume: Resume) -> None:
        self._agent_name = agent_name
        self._model = model_info(model)
        self._config = config
        self._store = store
        self._orchestrator = orchestrator
        self._closed = closed
        self.limits = limits
        self.resume = resume  # the agent's resume: a relayed answer reaches a child through it
        self.relays = Relays(functools.partial(recover_relay, self))  # the questions its
        # runs' calls ask for their children (read back from the store after a restart)
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

    @property
    def store(self) -> RunStore | None:
        return self._store

    @property
    def closed(self) -> bool:
        """Whether the agent has closed (it hosts no more runs)."""
        return self._closed()

    def ended(self, run_id: str, outcome: Any) -> None:
        """Run ``run_id`` ended here with ``outcome`` (on the orchestrator's thread): a child
        whose key a parent's call relays resolves that key (``resolve_relayed_key``); if the
        store fails, the parent's key stays open (resolved when the parent follows again)."""
        if self._store is None:
            return
        try:
            resolve_relayed_key(self, run_id, outcome)
        except Exception as exc:
            _log.error("relay_key_unresolved", run_id=run_id,
                       error=f"{type(exc).__name__}: {exc}")

    def attach(self, run_id: str) -> Future[Any]:
        """The future of run ``run_id``'s next outcome (hosted here, else restored)."""
        future = reply_future()
        self._tell(AttachRun(run_id, future))
        return future

    @property
    def tools(self) -> Sequence[Tool]:
        """The agent's tools (those of ``Agent.as_tool`` name the agents they run)."""
        return self._config.tools

    def stored_suspension(self, run_id: str) -> Suspended | None:
        """What run ``run_id`` waits on, read from the store (a parent resumed after a restart
        reads its child's, which its signed checkpoint and journal name); ``None`` if it waits
        on nothing (running or finished)."""
        saved = None if self._store is None else self._store.latest_checkpoint(run_id)
        if saved is None:
            raise CapabilityError("child_run_not_found", f"run {run_id!r} is not in the store "
                                  f"of agent {self._agent_name!r}; give that agent the store "
                                  "the run was saved in")
        done = TurnMachine.restore(self._config, saved.data).outstanding
        if not isinstance(done, Done) or not isinstance(done.outcome, Suspended):
            return None
        return done.outcome.model_copy(update={"run_id": run_id})

    def answer_stored(self, asked: Suspended, answer: Any) -> tuple[str, Future[Any]]:
        """Resume a child from its store with ``answer`` to ``asked`` (read by
        :meth:`stored_suspension`, never given from outside): its own relays go on down."""
        answers = answers_for(asked, answer, self._config.mode)

        def proceed(given: dict[str, Any]) -> Future[Any]:
            future = reply_future()
            self._tell(AnswerRun(asked.run_id, given, future, asked))
            return future
        return asked.run_id, self.relays.answer(asked, dict(answers), proceed)

    def follow_key_relays(self, run_id: str, waiting: dict[str, tuple[str, str]]) -> None:
        """A run waits on keys: follow the children its calls relay that no relay in memory
        follows (see ``follow_key_relays``)."""
        follow_key_relays(self, run_id, waiting)

    def shown_keys(self, run_id: str, keys: dict[str, str]) -> dict[str, str]:
        """The keys a suspended run shows, by call id (a relaying call's: its child's)."""
        return self.relays.shown_keys(run_id, keys)

    def cancel_relayed(self, run_id: str, waiting: dict[str, str]) -> None:
        """A run is cancelled: drop its calls' relays and cancel the children they relay."""
        cancel_relayed(self, run_id, waiting)

    def cancel(self, run_id: str) -> None:
        """Cancel child run ``run_id``: hosted here, or restored from the store if no process
        hosts it and it has not ended. The one way a child is cancelled: by its call's end, its
        session's close, or its parent run's cancellation. ``CapabilityError`` if the agent
        has closed (its runs were handed back, never cancelled)."""
        self._tell(CancelRun(run_id, reply_future()))

    def trace_parent(self, run_id: str) -> Mapping[str, str] | None:
        """The W3C trace headers run ``run_id``'s span is made under: a child's parent call's
        (``None``: not a child, or not traced)."""
        link = self.link_of(run_id)
        return None if link is None else link.trace

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
