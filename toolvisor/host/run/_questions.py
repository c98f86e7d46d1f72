"""``Questions``: the questions of the runs one orchestrator hosts, and the answers it refuses.

A question's deadline is dated once, on the host's clock (the store's, with one), when its run
first suspends on it, and saved before anyone is told (a restart never moves it); with a store,
the ``QuestionTimer`` tells the orchestrator when it is due, hosted or not. A ``Suspended`` is
spent once the calls it asked about no longer wait as it asked them. It never steps a machine:
the orchestrator does. Everything here runs on the orchestrator's thread, which owns it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.durable import RunStore
from toolvisor.host._hosted_run import HostedRun
from toolvisor.host._protocol import AlreadyResumedError, AnswerRun
from toolvisor.host.run._question_timer import QuestionTimer
from toolvisor.machine import Done, MachineConfig, Suspended, TurnMachine


class Questions:
    """Dates, arms and checks questions for one orchestrator; ``tell`` reaches it from the
    timer's thread (only with a ``store``: without one nothing hosts a suspended run), which
    looks at ``clock`` every ``poll`` seconds; ``config`` restores a run not hosted here."""

    def __init__(self, clock: Callable[[], float], tell: Callable[[Any], None], *,
                 store: RunStore | None, config: MachineConfig | None, poll: float) -> None:
        self._store = store
        self._config = config
        self.clock = clock
        self._timer = None if store is None else QuestionTimer(clock, poll, tell)
        self._log = get_event_log("orchestrator")

    def date(self, run: HostedRun) -> bool:
        """Date the questions the run now waits on that have no deadline yet (logged); whether
        any was (then the run's checkpoint is to be saved and its ``Suspended`` read again)."""
        machine = run.machine
        dated = machine.date_questions(self.clock())
        for question in dated:
            self._log.info("question_deadline", run_id=run.run_id, turn=machine.turn,
                           tool_name=question.tool, tool_call_id=question.call_id,
                           expires_at=question.expires_at)
        return bool(dated)

    def arm(self, run_id: str, outcome: Suspended) -> None:
        """Be told when the first question of ``outcome`` is due (with a store)."""
        if self._timer is not None and outcome.expires_at is not None:
            self._timer.arm(run_id, outcome.expires_at)

    def disarm(self, run_id: str) -> None:
        if self._timer is not None:
            self._timer.disarm(run_id)

    def due_in_store(self, run_id: str, now: float) -> bool:
        """Whether the run's latest checkpoint waits on a question due at ``now`` (a run not
        hosted here is adopted only then: one answered meanwhile is left alone)."""
        store, config = self._store, self._config
        if store is None or config is None:
            return False
        saved = store.latest_checkpoint(run_id)
        return saved is not None and bool(
            TurnMachine.restore(config, saved.data).questions_due(now))

    def refuse_spent(self, run: HostedRun, message: AnswerRun) -> None:
        """Refuse answers to calls that no longer wait as the ``Suspended`` asked them (the
        same call of the same turn and attempt): it was resumed already, or its questions
        expired and their defaults answered them."""
        waiting = run.machine.waiting_calls()
        asked = message.asked.waiting_calls()
        spent = [c for c in message.answers if asked.get(c) != waiting.get(c)]
        if not spent:
            return
        now = self.clock()
        how = "by an earlier resume" + "".join(
            f"; or {q.call_id} by its default when its question expired at {q.expires_at}"
            for q in message.asked.questions
            if q.call_id in spent and q.expires_at is not None and q.expires_at <= now)
        raise AlreadyResumedError(
            f"run {run.run_id}: this Suspended was resumed already (a Suspended resumes once): "
            f"call(s) {spent} no longer wait for an answer, they were answered {how}; "
            f"agent.resume_run({run.run_id!r}) gives the run's outcome")

    def close(self) -> None:
        if self._timer is not None:
            self._timer.close()


def suspended_now(machine: TurnMachine) -> Suspended:
    """The ``Suspended`` a suspended machine stands at (read again after it changed)."""
    done = machine.outstanding
    assert isinstance(done, Done) and isinstance(done.outcome, Suspended)
    return done.outcome
