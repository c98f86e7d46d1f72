"""``ModelsInFlight``: the model call each hosted run has in flight.

It starts a run's model call (``LlmCall``) through the agent's ``ModelCalls``, keeps its handle
by run id until it answers or the run is released (then it is cancelled), and tells apart the
answers and progress of the call in flight from those of a call given up. Runs on the
orchestrator's thread, which owns that table.
"""

from __future__ import annotations

from typing import Any

from pykka import ActorRef

from toolvisor.executor import CallHandle
from toolvisor.host._commands import OrchestratorSettings
from toolvisor.host._effect_messages import ModelAnswered, ModelProgress, ModelReplies
from toolvisor.host._model_request import request_for_model
from toolvisor.host._observing import RunObserver
from toolvisor.host._run_catalog import RunCatalog
from toolvisor.machine import LlmCall


class ModelsInFlight:
    """The model call in flight of each run one orchestrator hosts; answers are told to ``me``."""

    def __init__(self, settings: OrchestratorSettings, me: ActorRef[Any],
                 observe: RunObserver) -> None:
        self._settings = settings
        self._me = me
        self._observe = observe
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
        self._calls[run_id] = (effect.id, settings.models.start(
            request, replies, replies.progress, self._observe.scope(run_id)))

    def progress(self, message: ModelProgress) -> None:
        """A report of the call in flight goes on; one of a call that ended is dropped."""
        if self._in_flight(message.run_id, message.effect_id):
            self._observe.progress(message.run_id, message.event, message.data)

    def answered(self, message: ModelAnswered) -> None:
        """The call answered: it is no longer in flight (the machine takes the answer)."""
        if self._in_flight(message.run_id, message.effect_id):
            del self._calls[message.run_id]
            self._observe.model_answered(message.run_id, message.answer)

    def release(self, run_id: str) -> None:
        """Cancel the run's call in flight, if any."""
        call = self._calls.pop(run_id, None)
        if call is not None:
            call[1].cancel()

    def _in_flight(self, run_id: str, effect_id: int) -> bool:
        call = self._calls.get(run_id)
        return call is not None and call[0] == effect_id
