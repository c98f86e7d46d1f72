"""``HostedRun``: a run the orchestrator hosts (its machine, watchers and timers).

What the orchestrator's collaborators keep per run (the calls, their gates, the durable waits,
the model call, the spans) is theirs, keyed by run id, behind their own methods. Everything
here belongs to the orchestrator's thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolvisor.durable import StoreError
from toolvisor.executor import Deadline
from toolvisor.host._mail import Reply
from toolvisor.host._run_catalog import RunCatalog
from toolvisor.machine import Done, Failed, TurnMachine
from toolvisor.registry import ToolRegistry


@dataclass(eq=False)
class HostedRun:
    """A run's machine, who waits for its next outcome, its own catalog, and its ``Sleep``
    timers."""

    run_id: str
    machine: TurnMachine
    watchers: list[Reply]  # answered with the run's next outcome
    catalog: RunCatalog  # the run's own catalog edits over the agent's registry (from its
    # machine's state when hosted; its calls edit it, their outcomes tell the machine)
    reemitted: int | None = None  # the waiting effect a restored run re-emits: the calls of
    # a ToolCalls may have run before the crash (only retryable or journaled ones run again),
    # and a Sleep or a backoff waits only what is left of it
    timers: dict[int, Deadline] = field(default_factory=dict)  # by Sleep effect id
    claimed: bool = False  # claimed from the store: let go when it comes to wait on keys

    def reply(self, outcome: Any) -> None:
        """Give ``outcome`` to everyone waiting for the run's next outcome."""
        watchers, self.watchers = self.watchers, []
        for watcher in watchers:
            if not watcher.done():
                watcher.set_result(outcome)

    def fail(self, error: Exception) -> None:
        """Fail everyone waiting for the run's next outcome with ``error``."""
        watchers, self.watchers = self.watchers, []
        for watcher in watchers:
            if not watcher.done():
                watcher.set_exception(error)

    def failed(self, error: str, *, abort: bool = True) -> Failed:
        """``Failed(error)``: the run as its machine ends it if ``abort`` (the transcript so
        far, unfinished calls closed; what the machine raises if it cannot), else bare."""
        if abort:
            done = self.machine.abort(error)[-1]
            if isinstance(done, Done) and isinstance(done.outcome, Failed):
                return done.outcome
        return Failed(error=error, messages=(), turns=self.machine.turn)

    def stopped_by(self, failure: StoreError) -> Failed:
        """``Failed`` saying the store refused the run's write (``failure``): the run stopped
        at its last saved checkpoint, which stays as it was (nothing of this outcome is
        saved), and ``resume_run`` goes on from there once the store takes writes again."""
        return self.failed(f"{failure}; the run stopped at its last saved checkpoint: resume "
                           f"it (agent.resume_run({self.run_id!r})) once the store takes writes "
                           "again", abort=not self.machine.finished)

    def cancel_timers(self) -> None:
        """Cancel the run's ``Sleep`` timers (the run ends or is released)."""
        for timer in self.timers.values():
            timer.cancel()
        self.timers.clear()


def watched(run: HostedRun | None, error: Exception, reply: Reply | None) -> HostedRun | None:
    """``run``, ``reply`` among its watchers; if there is no run, ``reply`` failed with
    ``error`` (the orchestrator ends or lets go a run it may no longer host)."""
    if run is None:
        if reply is not None and not reply.done():
            reply.set_exception(error)
    elif reply is not None and reply not in run.watchers:
        run.watchers.append(reply)
    return run


def hosted(run_id: str, machine: TurnMachine, reply: Reply, registry: ToolRegistry,
           reemitted: int | None = None) -> HostedRun:
    """Run ``run_id`` as its host takes it: its own catalog is the agent's registry with the
    edits its machine keeps (none for a new run, the checkpoint's for a restored one)."""
    return HostedRun(run_id, machine, [reply],
                     RunCatalog(run_id, registry, machine.membership), reemitted)
