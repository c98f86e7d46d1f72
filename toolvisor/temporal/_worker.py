"""``AgentWorker``: a Temporal worker for agents, their workflow and activities registered.

It owns a ``ToolRunner`` (unless given one) that runs the model and tool calls, and closes it
when the worker stops. ``replay`` checks recorded histories against the workflow code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from types import TracebackType
from typing import Any, Literal, TypeAlias

from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from toolvisor.contract import ToolvisorError, check_seconds
from toolvisor.executor import ToolRunner
from toolvisor.temporal import _registry
from toolvisor.temporal._activities import Activities
from toolvisor.temporal._agent import TemporalAgent
from toolvisor.temporal._workflow import AgentRun

Serves: TypeAlias = Literal["all", "workflows", "activities"]
_SERVES = ("all", "workflows", "activities")
_FAILURES: list[type[BaseException]] = [ToolvisorError]  # a toolvisor error in workflow
# code (an unreadable checkpoint, a broken driver) fails the run once, never a task retried


def _sandbox() -> SandboxedWorkflowRunner:
    """Temporal's sandbox with toolvisor (and pydantic, its values' base) passed through:
    imported once, outside it. The package's ``__init__`` imports the whole runtime (actors,
    threads; its logging's structlog imports rich, whose ``rich.style`` draws
    ``random.getrandbits`` at import), which the sandbox refuses to import, and would import
    again for every run; what the workflow uses of it is the pure machine, which reads no
    clock and draws no randomness of its own (the replay test checks it)."""
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default
                                   .with_passthrough_modules("toolvisor", "pydantic",
                                                             "pydantic_core"))


def _checked(agents: Sequence[TemporalAgent]) -> list[TemporalAgent]:
    listed = list(agents)
    if not listed or not all(isinstance(a, TemporalAgent) for a in listed):
        raise TypeError(f"give the worker a non-empty list of TemporalAgent, got {agents!r}")
    names = [a.name for a in listed]
    if len(set(names)) != len(names):
        raise ValueError(f"two of the worker's agents have the same name: {sorted(names)}")
    return listed


class AgentWorker:
    """Runs ``agents``' workflows and activities on ``task_queue``: ``async with`` it (it
    works in the background until the block ends) or ``await run()``.

    Args:
        client: The connected Temporal client.
        agents: The agents whose runs it runs (a run names its agent).
        task_queue: The task queue its runs are started on.
        runner: Runs the model and tool calls; by default one of its own, closed with it.
        process_workers: The worker processes of its own runner's ``process`` isolation.
        serves: ``"all"``; ``"workflows"`` to drive runs only (their calls run on the queue's
            other workers), or ``"activities"`` to run calls only.
        sticky_timeout: Seconds a run's next task waits for the worker that has the run
            cached before any worker of the queue takes it: when a worker dies, its runs go
            on elsewhere after this (Temporal's ``sticky_queue_schedule_to_start_timeout``).
    """

    def __init__(self, client: Client, agents: Sequence[TemporalAgent], *, task_queue: str,
                 runner: ToolRunner | None = None, process_workers: int = 2,
                 serves: Serves = "all", sticky_timeout: float = 10.0) -> None:
        self._agents = _checked(agents)
        if serves not in _SERVES:
            raise ValueError(f"AgentWorker.serves must be one of {_SERVES}, got {serves!r}")
        check_seconds("AgentWorker.sticky_timeout", sticky_timeout, positive=True)
        self._owned = runner is None
        self._runner = ToolRunner(process_workers=process_workers) if runner is None \
            else runner
        try:
            self._activities = Activities(self._agents, self._runner)
            roles: dict[str, Any] = {}
            if serves != "activities":
                roles.update(workflows=[AgentRun], workflow_runner=_sandbox(),
                             workflow_failure_exception_types=_FAILURES)
            if serves != "workflows":
                roles.update(activities=[self._activities.model_call,
                                         self._activities.tool_call])
            self._worker = Worker(
                client, task_queue=task_queue,
                sticky_queue_schedule_to_start_timeout=timedelta(seconds=sticky_timeout),
                **roles)
        except BaseException:
            if self._owned:  # its threads would outlive a worker that never was
                self._runner.close()
            raise
        self._held: list[TemporalAgent] = []
        for agent in self._agents:
            _registry.hold(agent)
            self._held.append(agent)

    @property
    def worker(self) -> Worker:
        """The Temporal ``Worker`` underneath."""
        return self._worker

    async def run(self) -> None:
        """Run until :meth:`shutdown`, then close."""
        try:
            await self._worker.run()
        finally:
            self.close()

    async def shutdown(self) -> None:
        """Stop taking tasks, let the running ones finish, then close."""
        try:
            await self._worker.shutdown()
        finally:
            self.close()

    def close(self) -> None:
        """Close the models' connections and the runner it owns; release its agents.
        Idempotent."""
        held, self._held = self._held, []
        if not held:
            return
        self._activities.close()
        if self._owned:
            self._runner.close()
        for agent in held:
            _registry.release(agent)

    async def __aenter__(self) -> AgentWorker:
        await self._worker.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        try:
            await self._worker.__aexit__(exc_type, exc, traceback)
        finally:
            self.close()


async def replay(histories: Iterable[WorkflowHistory], agents: Sequence[TemporalAgent]) -> None:
    """Replay recorded run histories against today's workflow code with ``agents`` (as their
    workers have them); raises Temporal's non-determinism error if one no longer replays.

    Args:
        histories: The histories (``await handle.fetch_history()``, or loaded from JSON).
        agents: The agents the runs were for.
    """
    held = _checked(agents)
    for agent in held:
        _registry.hold(agent)
    tasks = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolvisor-replay")
    try:
        replayer = Replayer(workflows=[AgentRun], workflow_runner=_sandbox(),
                            workflow_failure_exception_types=_FAILURES,
                            workflow_task_executor=tasks)
        for history in histories:
            await replayer.replay_workflow(history)
    finally:
        tasks.shutdown()
        for agent in held:
            _registry.release(agent)
