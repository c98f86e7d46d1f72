"""What a user is told, even with logging off, about a model that keeps a run waiting: a call
not answered after ``model_warn_after`` seconds, and a failed call retried or given up.

Both reach the event sink when one is installed, else Python's ``logging`` at WARNING (so
stderr with no set-up): see :meth:`toolvisor._logging.EventLog.notify`.
"""

from __future__ import annotations

from typing import Any

from toolvisor._logging import EventLog

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


def notify_waiting(log: EventLog, run_id: str, *, turn: int, attempt: int, waited: float,
                   timeout: float) -> None:
    """Say that a run's model call has not answered after ``waited`` seconds (``timeout``
    ends the attempt). Called on the orchestrator's timer thread: it reads no shared state."""
    log.notify("model_call_waiting",
               f"run {run_id}: the model has not answered for {waited:g} s (turn {turn}, "
               f"attempt {attempt}); the attempt ends at model_timeout={timeout:g} s",
               run_id=run_id, turn=turn, attempt=attempt, seconds=waited)
