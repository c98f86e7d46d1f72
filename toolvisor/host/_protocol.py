"""The orchestrator's protocol: every message the ``OrchestratorActor`` receives, and what a
run's future fails with.

The ``Agent`` and a child's ``AgentSessions`` tell it commands (``StartRun``, ``AnswerRun``,
``AttachRun``, ``ClaimRuns``, ``CancelRun``, ``SnapshotRun``); the threads that perform a run's
effects tell it what came of them (``ModelAnswered``, ``ModelProgress``, ``OutcomesReady``,
``ToolProgressed``, ``GateWoke``, ``RetryDue``, ``Woke``); its timers and key waiters tell it
what is due (``KeyResolved``, ``QuestionsDue``, ``RenewLeases``). Each message is frozen; one
that concerns one run is a ``RunMessage``, and what goes wrong while handling it ends that run
alone. Imports nothing of the host but its mail.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from toolvisor.contract import ModelError, ModelResponse, ToolvisorError
from toolvisor.host._mail import Reply
from toolvisor.machine import Effect, ResponseRefused, Suspended, TurnMachine

ProgressCallback = Callable[[str, str, dict[str, Any]], None]
"""``(run_id, event, data)``: called on the orchestrator's thread; keep it quick."""

ModelAnswer = ModelResponse | ModelError
"""What one model call comes back with."""


# --- what a run's future fails with -----------------------------------------------------------

class OrchestratorStopped(ToolvisorError, RuntimeError):
    """The orchestrator stopped (the agent was closed, or it crashed) before the run ended."""


class AlreadyResumedError(ResponseRefused):
    """A ``Suspended`` that was resumed already (or whose question expired and was answered by
    its default): a ``Suspended`` resumes once."""


class RunLeasedError(ToolvisorError, RuntimeError):
    """Another host drives the run: resume it there, or once that host has closed its agent or
    died, or its lease has expired."""


@dataclass(frozen=True, slots=True)
class RunMessage:
    """A message for the run ``run_id``; the orchestrator routes it by this type, and what
    goes wrong while handling it ends that run alone."""

    run_id: str


# --- commands: from the Agent and from a child's AgentSessions --------------------------------

@dataclass(frozen=True, slots=True)
class StartRun(RunMessage):
    """Host ``machine`` from here on: perform ``effects``, then whatever follows."""

    machine: TurnMachine
    effects: list[Effect]
    reply: Reply


@dataclass(frozen=True, slots=True)
class AnswerRun(RunMessage):
    """Resume a suspended run with ``answers`` to ``asked`` (the verified ``Suspended`` they
    answer); reply with its next outcome.

    A run hosted here (waiting on keys) is resumed in place; otherwise it is restored from the
    store's latest checkpoint. Answers to calls that no longer wait as ``asked`` says (the
    same call of the same turn and attempt) are refused: that ``Suspended`` was spent.
    """

    answers: dict[str, Any]
    reply: Future[Any]
    asked: Suspended


@dataclass(frozen=True, slots=True)
class AttachRun(RunMessage):
    """Reply with the run's next outcome; a run not hosted here is restored from the store
    (``claimed``: its lease was claimed for it, and it is handed back when it waits on keys)."""

    reply: Future[Any]
    claimed: bool = False


@dataclass(frozen=True, slots=True)
class ClaimRuns:
    """Claim up to ``limit`` runnable runs from the store and drive each from its latest
    checkpoint; ``reply`` gets ``{run_id: future of its next outcome}`` (empty: none). A
    claimed run that comes to wait on keys is handed back once its ``Suspended`` is given out:
    its lease is released and whichever host claims it once it is woken drives it on."""

    limit: int
    reply: Future[Any]


@dataclass(frozen=True, slots=True)
class CancelRun(RunMessage):
    """Cancel the run: its waits resolve as cancelled, the machine ends it
    ``Halted("cancelled")``; ``reply`` (if given) gets that outcome, and a run not hosted
    here is then restored from the store to be cancelled."""

    reply: Future[Any] | None = None


@dataclass(frozen=True, slots=True)
class SnapshotRun(RunMessage):
    """Reply with a ``SessionSnapshot`` of the run (hosted here, else from the store)."""

    reply: Future[Any]


# --- what came of a run's effects, from the threads that perform them ------------------------

@dataclass(frozen=True, slots=True)
class ModelAnswered(RunMessage):
    """A model call came back, with a response or a ``ModelError``."""

    effect_id: int
    answer: ModelAnswer


@dataclass(frozen=True, slots=True)
class ModelProgress(RunMessage):
    """A streaming model reported progress (a text delta) for a run's call."""

    effect_id: int
    event: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class OutcomesReady:
    """Calls finished since the orchestrator last drained its ``FinishedCalls``."""


@dataclass(frozen=True, slots=True)
class ToolProgressed(RunMessage):
    """A running call (or a background process) reported progress: the data of its
    ``tool_progress`` event."""

    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class GateWoke:
    """A call's wait at its tool's gate is over (told by the deadline timer's thread)."""

    ticket: int


@dataclass(frozen=True, slots=True)
class RetryDue(RunMessage):
    """A tool call's retry waited out its backoff: start it."""

    call_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class Woke(RunMessage):
    """A ``Sleep`` effect's wait (the model call's backoff) is over."""

    effect_id: int


# --- what is due, from the timers and the key waiters -----------------------------------------

@dataclass(frozen=True, slots=True)
class KeyResolved(RunMessage):
    """A key waiter's word to the orchestrator: ``key`` resolved or its deadline passed."""

    key: str


@dataclass(frozen=True, slots=True)
class QuestionsDue(RunMessage):
    """The question timer's word to the orchestrator: a question of run ``run_id`` is due."""


@dataclass(frozen=True, slots=True)
class RenewLeases:
    """The lease renewal timer's word to the orchestrator."""
