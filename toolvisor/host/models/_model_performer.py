"""``ModelPerformer``: performs one model request (a run's ``LlmCall`` effect), with explicit
inputs and no orchestrator.

It builds the request the model is sent (the run's catalog decides its tools, less those whose
breaker hides them; the output budget may bound the tool results it reads), says the call to
the user once it has waited too long (``WaitingModels``), and asks the model through the
agent's ``ModelCalls`` (the runner's deadline, a late answer discarded). The answer becomes the
response the run's machine takes: ``ModelReplied``, or ``NotPerformed`` with the
``ModelError`` the machine's model policy then decides on. The orchestrator's
``ModelsInFlight`` starts every run's model call through one; another host of the machine (a
workflow's activity) calls :meth:`ModelPerformer.perform` and waits. Holds no mutable state:
any thread may use it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from toolvisor.call import OutputProjection
from toolvisor.contract import ModelProgressSink
from toolvisor.executor import CallHandle
from toolvisor.host._protocol import ModelAnswer
from toolvisor.host._run_catalog import RunCatalog
from toolvisor.host.models._model_calls import ModelCalls, machine_response
from toolvisor.host.models._model_notices import WaitingModels
from toolvisor.host.models._model_request import request_for_model
from toolvisor.host.observe import Scope
from toolvisor.machine import LlmCall, ModelReplied, NotPerformed


def _none_hidden() -> frozenset[str]:
    return frozenset()


class ModelPerformer:
    """Performs the model requests of an agent's runs.

    Args:
        models: The agent's model calls (its model, runner and ``model_timeout``).
        projection: The output budget, which may bound the tool results the model reads.
        hidden: The tools the model is not offered now (the gates' open breakers).
        notices: Says a call that keeps its run waiting to the user (``None``: nothing is said).
    """

    def __init__(self, models: ModelCalls, projection: OutputProjection, *,
                 hidden: Callable[[], frozenset[str]] = _none_hidden,
                 notices: WaitingModels | None = None) -> None:
        self._models = models
        self._projection = projection
        self._hidden = hidden
        self.notices = notices

    def start(self, run_id: str, effect: LlmCall, catalog: RunCatalog,
              on_answer: Callable[[ModelAnswer], None], *,
              progress: ModelProgressSink | None = None, scope: Scope | None = None
              ) -> CallHandle:
        """Ask the model what ``effect`` of run ``run_id`` asks, offering the tools of the
        run's ``catalog``; ``on_answer`` is called once, on a runner thread, after every
        ``progress`` report. The caller takes the call off ``notices`` when it ends.

        Args:
            run_id: The run the request is of (its notice names it).
            effect: The run's ``LlmCall``.
            catalog: The run's own catalog.
            on_answer: Given the model's response or ``ModelError``.
            progress: Given what the model reports while it answers (a text delta).
            scope: Entered where the call runs (its span made current there).
        """
        request = request_for_model(catalog, self._projection, effect.request, self._hidden())
        handle = self._models.start(request, on_answer, progress, scope)
        if self.notices is not None:
            self.notices.add(run_id, effect.turn, effect.attempt)
        return handle

    def perform(self, run_id: str, effect: LlmCall, catalog: RunCatalog, *,
                progress: ModelProgressSink | None = None, scope: Scope | None = None
                ) -> ModelReplied | NotPerformed:
        """:meth:`start`, then wait for the answer (the runner's deadline bounds the wait):
        the response ``effect``'s machine takes. Arguments as for :meth:`start`."""
        answered: Future[ModelAnswer] = Future()
        self.start(run_id, effect, catalog, answered.set_result, progress=progress, scope=scope)
        try:
            answer = answered.result()
        finally:
            if self.notices is not None:
                self.notices.remove(run_id)
        return machine_response(effect.id, answer)
