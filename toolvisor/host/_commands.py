"""What the orchestrator receives from the ``Agent`` and what every run it hosts shares.

Commands are frozen messages told to the ``OrchestratorActor``; each carries the ``Future`` the
run's next outcome is delivered to. ``OrchestratorStopped`` is what such a future fails with when
the orchestrator stops or crashes before the run ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolvisor.actors import ToolCallDispatcher
from toolvisor.call import OutputProjection
from toolvisor.contract import ToolvisorError
from toolvisor.durable import RunStore, Signer
from toolvisor.host._gates import ToolGates
from toolvisor.host._loop_reply import Reply
from toolvisor.host._model_calls import ModelCalls
from toolvisor.host._processes import Processes
from toolvisor.host._run import RunMessage
from toolvisor.host._tracing import Tracing
from toolvisor.machine import Effect, MachineConfig, ResponseRefused, Suspended, TurnMachine
from toolvisor.registry import ToolRegistry

if TYPE_CHECKING:
    from toolvisor.host._session_host import AgentSessionHost

ProgressCallback = Callable[[str, str, dict[str, Any]], None]
"""``(run_id, event, data)``: called on the orchestrator's thread; keep it quick."""


def reply_future() -> Future[Any]:
    """A future for the orchestrator's answer, already marked running: a caller that gives up
    (a cancelled task) cannot cancel it under the orchestrator, whose thread sets it."""
    future: Future[Any] = Future()
    future.set_running_or_notify_cancel()
    return future


class OrchestratorStopped(ToolvisorError, RuntimeError):
    """The orchestrator stopped (the agent was closed, or it crashed) before the run ended."""


@dataclass(frozen=True, slots=True)
class StartRun(RunMessage):
    """Host ``machine`` from here on: perform ``effects``, then whatever follows."""

    machine: TurnMachine
    effects: list[Effect]
    reply: Reply


class AlreadyResumedError(ResponseRefused):
    """A ``Suspended`` that was resumed already (or whose question expired and was answered by
    its default): a ``Suspended`` resumes once."""


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
    (``claimed``: its lease was claimed for it, and it is let go when it waits on keys)."""

    reply: Future[Any]
    claimed: bool = False


@dataclass(frozen=True, slots=True)
class ClaimRuns:
    """Claim up to ``limit`` runnable runs from the store and drive each from its latest
    checkpoint; ``reply`` gets ``{run_id: future of its next outcome}`` (empty: none). A
    claimed run that comes to wait on keys is let go once its ``Suspended`` is given out: its
    lease is released and whichever host claims it once it is woken drives it on."""

    limit: int
    reply: Future[Any]


@dataclass(frozen=True, slots=True)
class CancelRun(RunMessage):
    """Cancel the run: its waits resolve as cancelled, the machine ends it
    ``Halted("cancelled")``; ``reply`` (if given) gets that outcome."""

    reply: Future[Any] | None = None


@dataclass(frozen=True, slots=True)
class OrchestratorSettings:
    """What every run hosted by one orchestrator shares.

    ``models`` performs the model calls; ``signer`` signs the ``Suspended`` outcomes given
    out; ``store`` makes runs durable; ``config`` is needed to restore runs from it;
    ``clock`` dates the questions' deadlines (the store's clock, with a store);
    ``lease_ttl`` is how long a run's lease outlives this host's last renewal; ``gates`` are
    the tools' breakers, bulkheads and rate limits (owned by the agent, which reads them);
    ``tracing`` makes the runs' spans (``None``: the agent does not trace); ``processes``
    runs the runs' background processes (``None``: calls get no ``ctx.processes``);
    ``named_models`` are the other models a tool's direct completion may name; ``sessions``
    is the agent as a host of child sessions (each call's ``ctx.sessions`` is built on it);
    a model call still waiting ``model_warn_after`` seconds after it started is said to the
    user (``None``: never).
    """

    models: ModelCalls
    signer: Signer
    registry: ToolRegistry
    dispatcher: ToolCallDispatcher
    projection: OutputProjection
    context: Any = None
    on_progress: ProgressCallback | None = None
    store: RunStore | None = None
    config: MachineConfig | None = None
    key_poll_interval: float = 0.05
    lease_ttl: float = 30.0
    gates: ToolGates = field(default_factory=ToolGates)
    tracing: Tracing | None = None
    clock: Callable[[], float] = time.time
    processes: Processes | None = None
    named_models: Mapping[str, ModelCalls] = field(default_factory=dict)
    sessions: AgentSessionHost | None = None
    model_warn_after: float | None = 30.0
