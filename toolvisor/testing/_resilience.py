"""Testing breakers, bulkheads and rate limits without waiting: a fake clock and a breaker
driven through a script of call outcomes, as ``decide`` does for a failure policy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from toolvisor.contract import LEGAL_RESULT_TYPES, HandlerResult, is_seconds
from toolvisor.resilience import (
    Breaker,
    BreakerStatus,
    CircuitBreaker,
    NotPermitted,
    Verdict,
)


class FakeClock:
    """A clock that moves only when told: pass it wherever a ``clock`` is taken
    (``CircuitBreaker``, ``TokenBucket``, ``ToolGate``, ``Agent(clocks=Clocks(monotonic=...))``,
    the questions' ``Clocks(wall=...)``, ``SqliteRunStore(path, clock=...)``)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move forward ``seconds`` (>= 0); returns the new time."""
        if not is_seconds(seconds):
            raise ValueError(f"a clock only moves forward: got {seconds!r} seconds")
        self.now += seconds
        return self.now


BreakerScriptStep: TypeAlias = Verdict | HandlerResult | float
"""One step of :func:`drive_breaker`: a call ending ``success`` / ``failure`` / ``ignored`` or
with a handler result (judged by the breaker's rules), or seconds for the clock to move."""


@dataclass(frozen=True, slots=True)
class BreakerStep:
    """What one script step did: ``ran`` (``None`` for a clock step; ``False``: refused,
    ``refused`` says why) and the breaker's ``status`` after it."""

    step: Any
    ran: bool | None
    status: BreakerStatus
    refused: NotPermitted | None = None


def drive_breaker(config: Breaker, steps: Sequence[BreakerScriptStep], *,
                  clock: FakeClock | None = None) -> list[BreakerStep]:
    """Drive a fresh ``CircuitBreaker(config)`` through ``steps``, one call at a time, on a
    fake clock (``clock``, else one starting at 0). No threads, no agent, no waiting.

    ``drive_breaker(Breaker(consecutive_failures=2, open_for=30), ["failure", "failure",
    "success", 30, "success"])`` reads ``closed, open, open (refused), half_open, closed``.
    """
    clock = clock or FakeClock()
    breaker = CircuitBreaker(config, clock=clock)
    out: list[BreakerStep] = []
    for step in steps:
        if isinstance(step, bool) or not (
                isinstance(step, (int, float, *LEGAL_RESULT_TYPES))
                or step in ("success", "failure", "ignored")):
            raise TypeError(f"drive_breaker: a step is 'success', 'failure', 'ignored', a "
                            f"handler result or seconds for the clock, got {step!r}")
        if isinstance(step, int | float):
            clock.advance(step)
            out.append(BreakerStep(step, None, breaker.status))
            continue
        permit = breaker.acquire()
        if isinstance(permit, NotPermitted):
            out.append(BreakerStep(step, False, breaker.status, permit))
            continue
        breaker.record(permit, step)
        out.append(BreakerStep(step, True, breaker.status))
    return out
