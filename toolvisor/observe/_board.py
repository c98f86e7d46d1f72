"""``Board``: what the live view shows, built from toolvisor's log events.

Pure and thread-safe: :meth:`Board.take` is called from whichever thread emits an event and
returns the plain line for it (``None`` for an event the view ignores); :meth:`Board.runs`
is a snapshot for rendering.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

_OK = frozenset({"ok", "ask_user", "halt", "pending"})


@dataclass
class CallView:
    """One tool call of a turn: its attempts as ``(attempt, status, duration_ms)``, when the
    question it asked expires (``expires_at``, the host's clock), if it does, and the last
    progress its running attempt reported (``progress``, as the view says it)."""

    tool_name: str
    attempts: list[tuple[int, str, float | None]] = field(default_factory=list)
    expires_at: float | None = None
    progress: str | None = None


@dataclass
class TurnView:
    """One turn: the model's attempts and the calls it asked for."""

    model: list[tuple[int, str, float | None]] = field(default_factory=list)
    calls: dict[str, CallView] = field(default_factory=dict)


@dataclass
class RunView:
    """One run on its host: status and turns."""

    run_id: str
    status: str = "running"
    turns: dict[int, TurnView] = field(default_factory=dict)

    def turn(self, number: Any) -> TurnView:
        return self.turns.setdefault(int(number or 0), TurnView())


def at_time(seconds: float | None) -> str:
    """A deadline on the host's clock (seconds since the epoch) as UTC time."""
    if seconds is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def _ms(value: float | None) -> str:
    return "" if value is None else f" {value:.1f} ms"


def _delay(seconds: object) -> str:
    """A wait as a reader takes it in: ``170 ms``, ``2.5 s``."""
    if not isinstance(seconds, int | float):
        return str(seconds)
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def _progress(fields: dict[str, Any]) -> str:
    """A tool's progress report as a reader takes it in: ``parsed 3 of 4 (75%)``."""
    fraction = fields.get("fraction")
    share = f" ({fraction:.0%})" if isinstance(fraction, int | float) else ""
    return f"{fields.get('message')}{share}"


def _set_attempt(attempts: list[tuple[int, str, float | None]], attempt: int, status: str,
                 duration: float | None) -> None:
    for i, (number, _, _) in enumerate(attempts):
        if number == attempt:
            attempts[i] = (attempt, status, duration)
            return
    attempts.append((attempt, status, duration))


class Board:
    """Runs, turns and calls as the events tell them, and the tree's restart count."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, RunView] = {}
        self.restarts = 0
        self.abandoned = 0

    def runs(self) -> list[RunView]:
        """A snapshot, in start order (shared views: read them under no lock, render only)."""
        with self._lock:
            return list(self._runs.values())

    def take(self, event: str, fields: dict[str, Any]) -> str | None:
        """Apply one event; the plain line that tells it, or ``None``."""
        with self._lock:
            return self._take(event, fields)

    def _run(self, fields: dict[str, Any]) -> RunView | None:
        run_id = fields.get("run_id")
        if not isinstance(run_id, str):
            return None
        return self._runs.setdefault(run_id, RunView(run_id))

    @staticmethod
    def _tool_progress(run: RunView, where: str, attempt: int, fields: dict[str, Any]) -> str:
        """A running call's progress report: kept on its view until the attempt ends."""
        call_id = str(fields.get("tool_call_id"))
        view = run.turn(fields.get("turn")).calls.setdefault(
            call_id, CallView(str(fields.get("tool_name"))))
        view.progress = _progress(fields)
        return f"{where} {view.tool_name} ({call_id}) #{attempt} progress: {view.progress}"

    def _take(self, event: str, fields: dict[str, Any]) -> str | None:
        if event == "child_restarted":
            self.restarts += 1
            return f"restart   {fields.get('supervisor_id')}/{fields.get('child_id')}"
        if event == "ray_actor_restarting":  # a RayActor rebuilt within its own intensity
            self.restarts += 1
            return f"restart   ray actor {fields.get('actor')}"
        if event == "call_abandoned":
            self.abandoned += 1
        run = self._run(fields)
        if run is None:
            return None
        head = f"run {run.run_id[:8]}"
        attempt = int(fields.get("attempt") or 1)
        duration = fields.get("duration_ms")
        match event:
            case "run_started":
                run.status = "running"
                return f"{head} started"
            case "model_call_started" | "model_call_finished":
                status = "running" if event == "model_call_started" else str(fields["outcome"])
                _set_attempt(run.turn(fields.get("turn")).model, attempt, status, duration)
                return f"{head} turn {fields.get('turn')} model #{attempt} {status}" \
                    f"{_ms(duration)}"
            case "call_started" | "call_finished":
                status = "running" if event == "call_started" else str(fields["outcome"])
                call_id = str(fields.get("tool_call_id"))
                turn = run.turn(fields.get("turn"))
                view = turn.calls.setdefault(call_id, CallView(str(fields.get("tool_name"))))
                _set_attempt(view.attempts, attempt, status, duration)
                view.progress = None
                return f"{head} turn {fields.get('turn')} {view.tool_name} ({call_id}) " \
                    f"#{attempt} {status}{_ms(duration)}"
            case "question_deadline" | "question_expired":
                call_id = str(fields.get("tool_call_id"))
                view = run.turn(fields.get("turn")).calls.setdefault(
                    call_id, CallView(str(fields.get("tool_name"))))
                where = f"{head} turn {fields.get('turn')} {view.tool_name} ({call_id})"
                if event == "question_deadline":
                    view.expires_at = fields.get("expires_at")
                    return f"{where} asks until {at_time(view.expires_at)}"
                default = fields.get("default")
                answer = "denied" if default is None else f"answered {default!r}"
                view.expires_at = None
                if view.attempts:
                    number, _, took = view.attempts[-1]
                    view.attempts[-1] = (number, f"expired, {answer}", took)
                late = " (a late answer was discarded)" if fields.get("late_answer") else ""
                return f"{where} question expired: {answer} by default{late}"
            case "run_progress" if fields.get("progress") == "call_finished" \
                    and fields.get("answered"):  # its question no longer waits
                for turn in reversed(run.turns.values()):
                    if (answered := turn.calls.get(str(fields.get("call_id")))) is not None:
                        answered.expires_at = None
                        break
                return None
            case "tool_progress":
                return self._tool_progress(run, f"{head} turn {fields.get('turn')}", attempt,
                                           fields)
            case "retry_scheduled":
                return f"{head} retry {', '.join(map(str, fields.get('call_ids') or ()))} " \
                    f"in {_delay(fields.get('seconds'))}"
            case "run_suspended":
                run.status = "suspended"
                return f"{head} suspended, waiting on {', '.join(fields.get('call_ids') or ())}"
            case "run_finished":
                reason = fields.get("reason")
                run.status = str(fields.get("outcome")) + (f" ({reason})" if reason else "")
                return f"{head} {run.status} after {fields.get('turns')} turn(s)"
        return None


def is_good(status: str) -> bool:
    """Whether a status reads as a success (or a run still going)."""
    return status in _OK or status in ("running", "completed", "suspended")
