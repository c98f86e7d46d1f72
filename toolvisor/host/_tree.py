"""``AgentTree``: the supervision tree that hosts an agent's runs, and what it runs on.

A root ``Supervisor`` (``one_for_one``) over the ``DynamicSupervisor`` (one temporary
``ToolCallActor`` per call), the agent's other children (its MCP connections) and the
``OrchestratorActor`` (hosts each run's ``TurnMachine``). The ``ToolRunner`` (thread pool,
worker-process pool, event loop), the dispatcher's thread pool and the model's connections
belong to the tree and are closed after it has stopped (the agent's named models, which direct
completions may ask, too). Built and closed by the ``Agent`` on
the caller's thread; the current ``DynamicSupervisor`` is written by its start function (on the
root supervisor's thread) and read by the dispatcher.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from toolvisor.actors import ToolCallDispatcher
from toolvisor.contract import AsyncModel, Model
from toolvisor.executor import ToolRunner
from toolvisor.host._commands import OrchestratorSettings
from toolvisor.host._model_calls import ModelCalls
from toolvisor.host._orchestrator import OrchestratorActor
from toolvisor.supervisors import (
    ChildSpec,
    DynamicSupervisor,
    DynamicSupervisorRef,
    Supervisor,
    SupervisorEventHook,
    SupervisorRef,
)


class SettingsFor(Protocol):
    """The orchestrator's settings, given the tree's model calls and dispatcher."""

    def __call__(self, *, models: ModelCalls, dispatcher: ToolCallDispatcher,
                 named_models: Mapping[str, ModelCalls]) -> OrchestratorSettings: ...


class AgentTree:
    """Starts the tree on ``runner``; ``close`` stops it and releases what it ran on."""

    def __init__(self, model: Model | AsyncModel, runner: ToolRunner, *, model_timeout: float,
                 max_concurrent_calls: int, settings: SettingsFor,
                 children: Sequence[ChildSpec] = (),
                 on_event: SupervisorEventHook | None = None,
                 named_models: Mapping[str, Model | AsyncModel] | None = None) -> None:
        self.runner = runner
        self._tool_calls: DynamicSupervisorRef | None = None  # the current incarnation
        self.dispatcher = ToolCallDispatcher(self._current_tool_calls, runner)
        self.models = ModelCalls(model, runner, float(model_timeout))
        self.named_models = {name: ModelCalls(named, runner, float(model_timeout))
                             for name, named in (named_models or {}).items()}
        orchestrator = settings(models=self.models, dispatcher=self.dispatcher,
                                named_models=self.named_models)

        def start_tool_calls() -> DynamicSupervisorRef:
            self._tool_calls = DynamicSupervisor.start(
                max_children=max_concurrent_calls, name="tool_calls")
            return self._tool_calls

        try:
            self.root: SupervisorRef = Supervisor.start([
                ChildSpec("tool_calls", start_tool_calls, type="supervisor"),
                *children,
                ChildSpec("orchestrator", lambda: OrchestratorActor.start(orchestrator)),
            ], strategy="one_for_one", name="agent", on_event=on_event)
        except BaseException:
            self._release()
            raise

    def _current_tool_calls(self) -> DynamicSupervisorRef:
        if self._tool_calls is None:
            raise RuntimeError("the agent's tool-call supervisor is not running")
        return self._tool_calls

    def orchestrator(self) -> Any:
        """The orchestrator's current ref (a restart gives it a new one)."""
        for child in self.root.which_children():
            if child.id == "orchestrator" and child.ref is not None:
                return child.ref
        raise RuntimeError("the agent's orchestrator is not running (its supervisor is "
                           "restarting it, or the agent is closed)")

    def close(self) -> None:
        """Stop the tree, then the dispatcher, the model's connections and the runner."""
        try:
            self.root.stop()
        finally:
            self._release()

    def _release(self) -> None:
        try:
            self.dispatcher.close()
        finally:
            try:
                for calls in (self.models, *self.named_models.values()):
                    calls.close()
            finally:
                self.runner.close()
