"""``ResumedSuspensions``: which suspensions of runs without a store an agent has resumed.

Without a store, a ``Suspended`` carries the whole run, so nothing outside it says it was used:
the agent remembers, per run, the ``Done`` effect id of the last suspension it resumed. A
``Suspended`` of that run at or before it is spent (a run's effect ids only grow, so an older
suspension was superseded as well). Any thread may resume: the table is guarded by a lock, held
only for the check-and-set.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from toolvisor.host._protocol import AlreadyResumedError
from toolvisor.machine import Effect, MachineConfig, Suspended, TurnMachine


class ResumedSuspensions:
    """One entry per run resumed from its ``Suspended`` (a run id and an int), for the agent's
    lifetime; another agent, or a new process, does not know them."""

    def __init__(self, config: MachineConfig, clock: Callable[[], float]) -> None:
        self._config = config
        self.clock = clock  # the questions' clock: their defaults answer them once it is due
        self._lock = threading.Lock()
        self._last: dict[str, int] = {}  # run id -> Done effect id of its last resumed suspension

    def resume(self, suspended: Suspended,
               answers: Mapping[str, Any]) -> tuple[TurnMachine, list[Effect], str]:
        """The run's machine restored from ``suspended`` and resumed with ``answers`` now
        (refused answers change nothing), once: its machine, effects and run id."""
        machine = TurnMachine.restore(self._config, suspended.checkpoint)
        suspended_at = machine.last_effect_id  # its Done effect
        effects = machine.resume(answers, now=self.clock())
        run_id = suspended.run_id or uuid.uuid4().hex
        self._spend(run_id, suspended_at)
        return machine, effects, run_id

    def _spend(self, run_id: str, done_effect_id: int) -> None:
        """Mark run ``run_id``'s suspension at ``done_effect_id`` resumed; an
        ``AlreadyResumedError`` naming the run if it (or a later one) was."""
        with self._lock:
            last = self._last.get(run_id)
            if last is None or done_effect_id > last:
                self._last[run_id] = done_effect_id
                return
        raise AlreadyResumedError(
            f"run {run_id}: this Suspended was resumed already (a Suspended resumes once); go "
            "on from the outcome that resume returned. Without a store only this agent knows "
            "it: give agents a store to make that hold across agents and processes")
