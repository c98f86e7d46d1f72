"""What a user is told, even with logging off, about a model that keeps a run waiting: a call
not answered after ``model_warn_after`` seconds, and a failed call retried or given up.

Both reach the event sink when one is installed, else Python's ``logging`` at WARNING (so
stderr with no set-up): see :meth:`toolvisor._logging.EventLog.notify`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from toolvisor._logging import EventLog
from toolvisor.executor import DeadlineTimer

_DECISIONS = {"RetryAfter": "retrying", "FailRun": "the run fails",
              "BrokenPolicy": "on_model_error failed, so the run fails"}


def log_machine_event(log: EventLog, run_id: str, level: str, event: str,
                      fields: dict[str, Any]) -> None:
    """Log one of the machine's events of run ``run_id``: ``model_call_failed`` as a notice
    the user sees, any other at its ``level``."""
    if event != "model_call_failed":
        getattr(log, level)(event, run_id=run_id, **fields)
        return
    then = _DECISIONS.get(str(fields.get("decision")), "the run fails")
    error = str(fields.get("error")).rstrip(".")
    log.notify(event, f"run {run_id}: the model call failed (turn {fields.get('turn')}, "
                      f"attempt {fields.get('attempt')}): {error}; {then}",
               run_id=run_id, **fields)


class WaitingModels:
    """The model calls in flight, each said to the user once it has waited ``after`` seconds
    (``model_call_waiting``; ``timeout`` is the attempt's deadline, which the notice names).

    :meth:`add` and :meth:`remove` run on the orchestrator's thread, :meth:`_due` on the timer's;
    ``_lock`` guards ``_started`` and ``_armed``. One deadline at a time is on the timer, as a
    call's idle deadline is: due when the oldest call has waited ``after``, it says each call
    that has, once, and comes due again for the next one. So a call costs a dict entry, never a
    deadline of its own (a schedule per call wakes the timer's thread: about 0.2 ms a run).
    """

    def __init__(self, log: EventLog, timer: DeadlineTimer, after: float, timeout: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = log
        self._timer = timer
        self._after = after
        self._timeout = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._started: dict[str, tuple[int, int, float]] = {}  # run id -> (turn, attempt, when)
        self._armed = False  # whether a deadline is on the timer

    def add(self, run_id: str, turn: int, attempt: int) -> None:
        """Run ``run_id``'s model call (of ``turn``, ``attempt``) starts waiting now."""
        with self._lock:
            self._started[run_id] = (turn, attempt, self._clock())
            if self._armed:
                return
            self._armed = True
        self._timer.schedule(self._after, self._due)

    def remove(self, run_id: str) -> None:
        """Run ``run_id``'s model call answered or was given up: it is not said."""
        with self._lock:
            self._started.pop(run_id, None)

    def _due(self) -> None:
        now = self._clock()
        with self._lock:
            waited = [(run_id, turn, attempt) for run_id, (turn, attempt, when)
                      in self._started.items() if now - when >= self._after]
            for run_id, _, _ in waited:
                del self._started[run_id]
            left = [when + self._after - now for _, _, when in self._started.values()]
            self._armed = bool(left)
        for run_id, turn, attempt in waited:
            self._log.notify(
                "model_call_waiting",
                f"run {run_id}: the model has not answered for {self._after:g} s (turn {turn}, "
                f"attempt {attempt}); the attempt ends at Timeouts.model={self._timeout:g} s",
                run_id=run_id, turn=turn, attempt=attempt, seconds=self._after)
        if left:
            with contextlib.suppress(RuntimeError):  # the timer closed: its host stopped
                self._timer.schedule(min(left), self._due)
