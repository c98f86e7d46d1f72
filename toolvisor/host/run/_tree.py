"""``AgentTree``: the supervision tree that hosts an agent's runs, and what it runs on.

A root ``Supervisor`` (``one_for_one``) over the ``DynamicSupervisor`` (one temporary
``ToolCallActor`` per call), the ``processes`` supervisor (one ``DynamicSupervisor`` per run
with background processes, ``Processes``), the agent's other children (its MCP connections)
and the ``OrchestratorActor`` (hosts each run's ``TurnMachine``). The ``ToolRunner`` (thread pool,
worker-process pool, event loop), the dispatcher's thread pool and the model's connections
belong to the tree and are closed after it has stopped (the agent's named models, which direct
completions may ask, too). Built and closed by the ``Agent`` on the caller's thread; the
current ``DynamicSupervisor``, ``processes`` supervisor and orchestrator are written by
their start functions (on the root supervisor's thread) and read by the dispatcher,
``Processes`` and the agent (a reference read is atomic).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from toolvisor.actors import ToolCallDispatcher
from toolvisor.contract import AsyncModel, Model
from toolvisor.durable import UnknownRunError
from toolvisor.executor import ToolRunner
from toolvisor.host._mail import tell
from toolvisor.host._protocol import ToolProgressed
from toolvisor.host.models import ModelCalls
from toolvisor.host.processes import HostProcesses, Processes
from toolvisor.host.run._orchestrator import OrchestratorActor
from toolvisor.host.run._settings import OrchestratorSettings
from toolvisor.supervisors import (
    ChildSpec,
    DynamicSupervisor,
    DynamicSupervisorRef,
    Supervisor,
    SupervisorEventHook,
    SupervisorRef,
)


class SettingsFor(Protocol):
    """The orchestrator's settings, given the tree's model calls, dispatcher and processes."""

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
        self._processes: SupervisorRef | None = None  # the current incarnation
        self._orchestrator: Any = None  # the current incarnation, told processes' progress
        self.dispatcher = ToolCallDispatcher(self._current_tool_calls, runner)
        self.models = ModelCalls(model, runner, float(model_timeout))
        self.named_models = {name: ModelCalls(named, runner, float(model_timeout))
                             for name, named in (named_models or {}).items()}
        orchestrator = settings(models=self.models, dispatcher=self.dispatcher,
                                named_models=self.named_models)
        self.processes = Processes(orchestrator.store, self._current_processes,
                                   self.dispatcher, self._process_progress)
        orchestrator = dataclasses.replace(orchestrator, processes=self.processes)

        def start_tool_calls() -> DynamicSupervisorRef:
            self._tool_calls = DynamicSupervisor.start(
                max_children=max_concurrent_calls, name="tool_calls")
            return self._tool_calls

        def start_orchestrator() -> Any:
            self._orchestrator = OrchestratorActor.start(orchestrator)
            return self._orchestrator

        def start_processes() -> SupervisorRef:
            self._processes = Supervisor.start(name="processes")
            return self._processes

        try:
            self.root: SupervisorRef = Supervisor.start([
                ChildSpec("tool_calls", start_tool_calls, type="supervisor"),
                ChildSpec("processes", start_processes, type="supervisor"),
                *children,
                ChildSpec("orchestrator", start_orchestrator),
            ], strategy="one_for_one", name="agent", on_event=on_event)
        except BaseException:
            self._release()
            raise

    def _current_tool_calls(self) -> DynamicSupervisorRef:
        if self._tool_calls is None:
            raise RuntimeError("the agent's tool-call supervisor is not running")
        return self._tool_calls

    def _current_processes(self) -> SupervisorRef:
        if self._processes is None:
            raise RuntimeError("the agent's process supervisor is not running")
        return self._processes

    def processes_of(self, run_id: str) -> HostProcesses:
        """``agent.processes(run_id)``: the background processes the run's calls started,
        to ``wait`` for, ``list`` and ``cancel`` (with a store, any agent on it sees them, and
        ``UnknownRunError`` says it has no such run; without one, only this agent)."""
        store = self.processes.store
        if store is not None and store.get_run(run_id) is None:
            raise UnknownRunError(f"the run store has no run {run_id!r}")
        return HostProcesses(self.processes, run_id)

    def _process_progress(self, run_id: str, data: dict[str, Any]) -> None:
        """A process's progress report, to the orchestrator (nowhere once it has stopped)."""
        if self._orchestrator is not None:
            tell(self._orchestrator, ToolProgressed(run_id, data))

    def orchestrator(self) -> Any:
        """The orchestrator's current ref (a restart gives it a new one): the one its start
        function recorded, while it lives, without a round trip to the root supervisor for
        every run; once it has stopped, the supervisor's answer (given after any restart it
        is making)."""
        current = self._orchestrator
        if current is not None and current.is_alive():
            return current
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
