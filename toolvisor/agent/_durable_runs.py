"""``DurableRuns``: the part of ``Agent`` that reaches runs in its store.

``submit``, ``claim_runs``, ``resume_run``, ``cancel_run``, ``resolve`` and their asyncio twins
act on runs by id or key, in any process that opens the store; each raises ``DurableError``
without one. The ``Agent`` derives from it and provides what it reads: its store, its machine's
config, its session host, its catalog and its orchestrator.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeAlias, cast

from toolvisor.contract import Message
from toolvisor.durable import QUEUED, UNSET, DurableError, ResolveOutcome, RunStore
from toolvisor.host import (
    AgentSessions,
    AttachRun,
    CancelRun,
    ClaimRuns,
    refuse_child,
    reply_future,
)
from toolvisor.isolation import check_main_guard
from toolvisor.machine import Completed, Failed, Halted, MachineConfig, Suspended, TurnMachine
from toolvisor.registry import ToolRegistry

RunOutcome: TypeAlias = Completed | Suspended | Halted | Failed
"""What a run ends with: done, waiting for answers, halted on purpose, or failed."""


class DurableRuns(ABC):
    """The durable-run methods of ``Agent`` (documented here, where they are defined).

    They may be called from any thread: they read what the agent set when it was built and
    tell the orchestrator actor, which owns every hosted run.
    """

    _store: RunStore | None
    _config: MachineConfig
    _registry: ToolRegistry
    sessions: AgentSessions

    @abstractmethod
    def _orchestrator(self) -> Any:
        """The orchestrator's current ref (the Agent's tree's)."""

    def submit(self, prompt: str | Sequence[Message], *,
               state: Mapping[str, Any] | None = None) -> str:
        """Queue a run on ``prompt`` in the store (its first checkpoint) for a worker on any
        machine (``toolvisor worker``).

        Args:
            prompt: The user's message, or the messages to start from.
            state: The shared state tools read and write through ``ctx.state``.

        Returns:
            The run's id, which :meth:`resume_run` takes.
        """
        store = self._require_store("submit")
        machine = TurnMachine(self._config)
        machine.start(prompt, state=state)
        run_id = store.create_run(status=QUEUED, agent=self.sessions.agent_name).run_id
        store.save_checkpoint(run_id, machine.last_effect_id, machine.checkpoint().to_json(),
                              status=QUEUED)
        return run_id

    async def asubmit(self, prompt: str | Sequence[Message], *,
                      state: Mapping[str, Any] | None = None) -> str:
        """:meth:`submit` for asyncio (on a worker thread).

        Args:
            prompt: The user's message, or the messages to start from.
            state: The shared state tools read and write through ``ctx.state``.

        Returns:
            The run's id.
        """
        return await asyncio.to_thread(self.submit, prompt, state=state)

    def claim_runs(self, limit: int) -> dict[str, Future[RunOutcome]]:
        """Claim runnable runs of the store and drive them here (a ``Worker`` does); one that
        comes to wait on keys is let go.

        Args:
            limit: At most this many runs.

        Returns:
            Each claimed run's next outcome, by run id.
        """
        self._require_store("claim_runs")
        self._orchestrator().tell(ClaimRuns(limit, future := reply_future()))
        return cast("dict[str, Future[RunOutcome]]", future.result())

    def resume_run(self, run_id: str, *, wait_for: float | None = None) -> RunOutcome:
        """The next outcome of run ``run_id``, picking it up from the store if needed.

        A run hosted by this agent (waiting on completion keys) is waited for. Any other run is
        restored from the store's latest checkpoint, in this process, and goes on from there:
        the outstanding effect is performed again (a tool call that had completed is not run
        again; a durable step that had completed is replayed from the journal), resolved keys
        are delivered (a wait whose deadline passed meanwhile is expired first, through its
        ``on_timeout``; a question past its deadline is answered by its default), and a run
        still waiting reports ``Suspended`` with its keys; one that failed on its model is
        asked again.

        Args:
            run_id: The run's id.
            wait_for: Seconds this call waits; it only stops the wait, never the run.

        Returns:
            The run's next outcome.

        Raises:
            UnknownRunError: The store has no run ``run_id``.
            RunLeasedError: Another live host drives the run.
            ValueError: ``run_id`` is a child session's, naming its parent (resume that).
            TimeoutError: The run did not reach its next outcome within ``wait_for``.
        """
        return self._wait(run_id, self._attach("resume_run", run_id), wait_for, cancel=False)

    async def aresume_run(self, run_id: str) -> RunOutcome:
        """:meth:`resume_run` for asyncio; cancelling the awaiting task (``asyncio.timeout``
        too) only stops this wait: the run goes on (``acancel_run`` ends it).

        Args:
            run_id: The run's id.

        Returns:
            The run's next outcome.
        """
        outcome: RunOutcome = await asyncio.wrap_future(self._attach("aresume_run", run_id))
        return outcome

    def _attach(self, operation: str, run_id: str) -> Future[Any]:
        refuse_child(operation, self._require_store(operation), run_id, self.sessions)
        check_main_guard(self._registry.process_tools)
        self._orchestrator().tell(AttachRun(run_id, future := reply_future()))
        return future

    def cancel_run(self, run_id: str, *, wait_for: float | None = None) -> RunOutcome:
        """Cancel run ``run_id``: its waits resolve as cancelled; a ``Pending`` call that asked
        for ``on_cancel="cancel_external_work"`` gets its tool's ``on_cancel`` hook called.

        Args:
            run_id: The run's id.
            wait_for: Seconds this call waits for the run to end; the run is cancelled all
                the same.

        Returns:
            How the run ended: ``Halted("cancelled")``, or its outcome if it had already ended.

        Raises:
            TimeoutError: The run did not end within ``wait_for``.
        """
        outcome: RunOutcome = self._cancel("cancel_run", run_id).result(wait_for)
        return outcome

    async def acancel_run(self, run_id: str) -> RunOutcome:
        """:meth:`cancel_run` for asyncio; cancelling the awaiting task only stops this wait.

        Args:
            run_id: The run's id.

        Returns:
            How the run ended.
        """
        outcome: RunOutcome = await asyncio.wrap_future(self._cancel("acancel_run", run_id))
        return outcome

    def _cancel(self, operation: str, run_id: str) -> Future[Any]:
        self._require_store(operation)
        self._orchestrator().tell(CancelRun(run_id, future := reply_future()))
        return future

    def resolve(self, key: str, *, ok: Any = UNSET, error: Any = UNSET) -> ResolveOutcome:
        """Deliver the result of a ``Pending`` call (any process that can open the store may
        do the same: ``toolvisor resolve``).

        Args:
            key: The call's completion key (``suspended.keys``).
            ok: The call's result, as JSON; give it or ``error``.
            error: The call's error, as JSON.

        Returns:
            ``"accepted"`` (first resolution: the run continues), ``"already_resolved"`` or
            ``"unknown_or_revoked"`` (tampered, foreign or revoked key: nothing changes).
        """
        return self._require_store("resolve").resolve(key, ok=ok, error=error)

    async def aresolve(self, key: str, *, ok: Any = UNSET, error: Any = UNSET) -> ResolveOutcome:
        """:meth:`resolve` for asyncio (on a worker thread). Cancelling the awaiting task does
        not undo a resolution under way: resolving again answers ``"already_resolved"``.

        Args:
            key: The call's completion key.
            ok: The call's result, as JSON.
            error: The call's error, as JSON.

        Returns:
            As :meth:`resolve`.
        """
        return await asyncio.to_thread(self._require_store("aresolve").resolve, key, ok=ok,
                                       error=error)

    def _require_store(self, operation: str) -> RunStore:
        if self._store is None:
            raise DurableError.needs_store(operation)
        return self._store

    def _wait(self, run_id: str, future: Future[Any], wait_for: float | None, *,
              cancel: bool = True) -> RunOutcome:
        """The run's next outcome. Past ``wait_for`` a run without a store is cancelled; a
        durable run never is (``cancel_run`` does that): the wait stops, the run goes on."""
        try:
            outcome: RunOutcome = future.result(wait_for)
        except TimeoutError:
            if cancel and self._store is None:
                self._orchestrator().tell(CancelRun(run_id))
                raise TimeoutError(f"run {run_id} did not end within wait_for={wait_for} s; "
                                   "it was cancelled") from None
            raise TimeoutError(f"run {run_id} did not end within wait_for={wait_for} s; it "
                               f"goes on (agent.resume_run({run_id!r}) waits again, "
                               "agent.cancel_run cancels it)") from None
        return outcome

