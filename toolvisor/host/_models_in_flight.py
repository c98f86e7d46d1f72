"""``ModelsInFlight``: the model call each hosted run has in flight.

It starts a run's model call (``LlmCall``) through the agent's ``ModelCalls``, keeps its handle
by run id until it answers or the run is released (then it is cancelled), and tells apart the
answers and progress of the call in flight from those of a call given up. A call still waiting
``model_warn_after`` seconds after it started is said to the user once (``WaitingModels``, on
the orchestrator's timer). Runs on the orchestrator's thread, which owns that table.
"""

from __future__ import annotations

from typing import Any

from pykka import ActorRef

from toolvisor._logging import get_event_log
from toolvisor.executor import CallHandle, DeadlineTimer
from toolvisor.host._commands import OrchestratorSettings
from toolvisor.host._effect_messages import ModelAnswered, ModelProgress, ModelReplies
from toolvisor.host._model_notices import WaitingModels
from toolvisor.host._model_request import request_for_model
from toolvisor.host._observing import RunObserver
from toolvisor.host._run_catalog import RunCatalog
from toolvisor.machine import LlmCall


class ModelsInFlight:
    """The model call in flight of each run one orchestrator hosts; answers are told to ``me``."""

    def __init__(self, settings: OrchestratorSettings, me: ActorRef[Any],
                 observe: RunObserver, timer: DeadlineTimer) -> None:
        self._settings = settings
        self._me = me
        self._observe = observe
        after = settings.model_warn_after
        self._waiting = None if after is None else WaitingModels(
            get_event_log("orchestrator"), timer, after, settings.models.timeout)
        self._calls: dict[str, tuple[int, CallHandle]] = {}  # run id -> (LlmCall id, its call)

    def start(self, run_id: str, effect: LlmCall, catalog: RunCatalog) -> None:
        """Ask the model what ``effect`` asks, offering the tools of the run's ``catalog``; its
        answer comes back as ``ModelAnswered``."""
        settings = self._settings
        request = request_for_model(catalog, settings.projection, effect.request,
                                    settings.gates.hidden())
        self._observe.model_started(run_id, effect)
        replies = ModelReplies(self._me, run_id, effect)  # refers to neither the handle nor
        # this table: the call's arguments keep it without a reference cycle
        handle = settings.models.start(request, replies, replies.progress,
                                       self._observe.scope(run_id))
        self._calls[run_id] = (effect.id, handle)
        if self._waiting is not None:
            self._waiting.add(run_id, effect.turn, effect.attempt)

    def progress(self, message: ModelProgress) -> None:
        """A report of the call in flight goes on; one of a call that ended is dropped."""
        if self._in_flight(message.run_id, message.effect_id):
            self._observe.progress(message.run_id, message.event, message.data)

    def answered(self, message: ModelAnswered) -> None:
        """The call answered: it is no longer in flight (the machine takes the answer)."""
        if self._in_flight(message.run_id, message.effect_id):
            self._forget(message.run_id)
            self._observe.model_answered(message.run_id, message.answer)

    def release(self, run_id: str) -> None:
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
