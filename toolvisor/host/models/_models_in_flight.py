"""``ModelsInFlight``: the model call each hosted run has in flight.

It starts a run's model call (``LlmCall``) through a ``ModelPerformer``, keeps its handle
by run id until it answers or the run's work stops (then it is cancelled), and tells apart the
answers and progress of the call in flight from those of a call given up. A call still waiting
``model_warn_after`` seconds after it started is said to the user once (``WaitingModels``, on
the orchestrator's timer). Runs on the orchestrator's thread, which owns that table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pykka import ActorRef

from toolvisor._logging import get_event_log
from toolvisor.call import OutputProjection
from toolvisor.executor import CallHandle, DeadlineTimer
from toolvisor.host._mail import tell
from toolvisor.host._protocol import ModelAnswer, ModelAnswered, ModelProgress
from toolvisor.host._run_catalog import RunCatalog
from toolvisor.host.models._model_calls import ModelCalls, machine_response
from toolvisor.host.models._model_notices import WaitingModels
from toolvisor.host.models._model_performer import ModelPerformer
from toolvisor.host.observe import RunObserver
from toolvisor.machine import LlmCall, ModelReplied, NotPerformed


class ModelReplies:
    """Where a run's model call reports: called with its answer (on the runner's thread), its
    ``progress`` with each report (on the model's thread or loop), each told to the
    orchestrator. One object per call in flight instead of two partials, each with a tuple of
    its arguments (objects the collector tracks while the model thinks)."""

    __slots__ = ("_effect", "_me", "_run_id")

    def __init__(self, me: ActorRef[Any], run_id: str, effect: LlmCall) -> None:
        self._me = me
        self._run_id = run_id
        self._effect = effect

    def __call__(self, answer: ModelAnswer) -> None:
        tell(self._me, ModelAnswered(self._run_id, self._effect.id, answer))

    def progress(self, event: str, data: dict[str, Any]) -> None:
        """A report of the call, with its turn and attempt."""
        effect = self._effect
        tell(self._me, ModelProgress(self._run_id, effect.id, event,
                                     {"turn": effect.turn, "attempt": effect.attempt, **data}))


class ModelsInFlight:
    """The model call in flight of each run one orchestrator hosts; answers are told to ``me``.

    ``models`` asks the model, ``projection`` bounds the tool results it reads, ``hidden``
    says which tools it is not offered now (their breakers are open), and a call still
    waiting ``warn_after`` seconds is said to the user (``None``: never), on ``timer``.
    """

    def __init__(self, models: ModelCalls, me: ActorRef[Any], observe: RunObserver,
                 timer: DeadlineTimer, *, projection: OutputProjection,
                 hidden: Callable[[], frozenset[str]], warn_after: float | None) -> None:
        self._me = me
        self._observe = observe
        self._waiting = None if warn_after is None else WaitingModels(
            get_event_log("orchestrator"), timer, warn_after, models.timeout)
        self._performer = ModelPerformer(models, projection, hidden=hidden,
                                         notices=self._waiting)
        self._calls: dict[str, tuple[int, CallHandle]] = {}  # run id -> (LlmCall id, its call)

    def start(self, run_id: str, effect: LlmCall, catalog: RunCatalog) -> None:
        """Ask the model what ``effect`` asks, offering the tools of the run's ``catalog``; its
        answer comes back as ``ModelAnswered``."""
        self._observe.model_started(run_id, effect)
        replies = ModelReplies(self._me, run_id, effect)  # refers to neither the handle nor
        # this table: the call's arguments keep it without a reference cycle
        handle = self._performer.start(run_id, effect, catalog, replies,
                                       progress=replies.progress,
                                       scope=self._observe.scope(run_id))
        self._calls[run_id] = (effect.id, handle)

    def progress(self, message: ModelProgress) -> None:
        """A report of the call in flight goes on; one of a call that ended is dropped."""
        if self._in_flight(message.run_id, message.effect_id):
            self._observe.progress(message.run_id, message.event, message.data)

    def answered(self, message: ModelAnswered) -> ModelReplied | NotPerformed:
        """The call answered: it is no longer in flight; the answer as the machine takes it
        (a ``ModelError``: the call was not performed)."""
        if self._in_flight(message.run_id, message.effect_id):
            self._forget(message.run_id)
            self._observe.model_answered(message.run_id, message.answer)
        return machine_response(message.effect_id, message.answer)

    def stop_work(self, run_id: str) -> None:
        """Cancel the run's call in flight, if any."""
        handle = self._forget(run_id)
        if handle is not None:
            handle.cancel()

    def _forget(self, run_id: str) -> CallHandle | None:
        """The run's call is no longer in flight (nor waiting to be said)."""
        call = self._calls.pop(run_id, None)
        if call is None:
            return None
        if self._waiting is not None:
            self._waiting.remove(run_id)
        return call[1]

    def _in_flight(self, run_id: str, effect_id: int) -> bool:
        call = self._calls.get(run_id)
        return call is not None and call[0] == effect_id
