"""``CircuitBreaker``: OTP's restart intensity turned on a tool's dependency.

Past a threshold of failures the tool is not called for a while (open), then a few trial calls
are let through (half-open): if they all succeed the breaker closes, if one fails it opens
again. A pure state machine: no threads, no I/O, the clock injected. It has one owner at a
time: the host keeps it under a lock; a test drives it with plain calls and a fake clock.

    closed --threshold reached--> open --open_for elapsed--> half_open --trials pass--> closed
                                   ^------------------ a trial fails --------------'
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from toolvisor.contract import (
    TOOL_ERROR_REASONS,
    Err,
    HandlerResult,
    InvalidArguments,
    ToolError,
    ToolErrorReason,
    check_seconds,
)
from toolvisor.resilience._checks import check_clock, check_count, is_number
from toolvisor.resilience._state import BreakerState, BreakerStatus

Verdict: TypeAlias = Literal["success", "failure", "ignored"]
"""How one call's result counts for its breaker."""

DEFAULT_FAILURE_REASONS: frozenset[ToolErrorReason] = frozenset(
    {"handler_raised", "handler_exit", "timeout"})
UNCOUNTED_CODES: frozenset[str] = frozenset({"cancelled", "not_started"})
"""``ToolError`` codes that say nothing of the dependency: the call was cancelled (its run
ended) or its actor never started."""


@dataclass(frozen=True, slots=True)
class Breaker:
    """When a tool's circuit opens, how long it stays open, and how it is tried again.

    It opens after ``consecutive_failures`` failures in a row, or once ``failure_rate`` (a
    fraction) of the calls in the window failed, the window holding at least ``min_calls``;
    either rule may be ``None`` (not both). The window is the last ``window`` outcomes, and
    with ``window_seconds`` only those of the last ``window_seconds`` seconds (either may be
    ``None``, not both). After ``open_for`` seconds, ``half_open_trials`` calls are let
    through. Failures are ``ToolError`` reasons in ``failure_reasons`` (crashes, exits and
    timeouts) and, with ``count_reported``, the handler's own ``Err``. ``hide_while_open``
    takes the tool out of what the model is offered while open.
    """

    consecutive_failures: int | None = 5
    failure_rate: float | None = None
    min_calls: int = 10
    window: int | None = 20
    window_seconds: float | None = None
    open_for: float = 30.0
    half_open_trials: int = 1
    failure_reasons: frozenset[ToolErrorReason] = DEFAULT_FAILURE_REASONS
    count_reported: bool = False
    hide_while_open: bool = False

    def __post_init__(self) -> None:
        check_count("Breaker.consecutive_failures", self.consecutive_failures, optional=True)
        if self.failure_rate is not None and (
                not is_number(self.failure_rate) or not 0 < self.failure_rate <= 1):
            raise ValueError(f"Breaker.failure_rate must be a fraction in (0, 1] or None, "
                             f"got {self.failure_rate!r}")
        if self.consecutive_failures is None and self.failure_rate is None:
            raise ValueError("Breaker needs consecutive_failures or failure_rate (or both)")
        check_count("Breaker.min_calls", self.min_calls)
        check_count("Breaker.window", self.window, optional=True)
        check_seconds("Breaker.window_seconds", self.window_seconds, optional=True,
                      positive=True)
        if self.window is None and self.window_seconds is None:
            raise ValueError("Breaker needs a window (calls) or window_seconds (or both)")
        if self.failure_rate is not None and self.window is not None \
                and self.min_calls > self.window:
            raise ValueError(f"Breaker.min_calls ({self.min_calls}) must not exceed "
                             f"Breaker.window ({self.window}): the rate could never be reached")
        check_seconds("Breaker.open_for", self.open_for, positive=True)
        check_count("Breaker.half_open_trials", self.half_open_trials)
        reasons = frozenset(self.failure_reasons)
        if isinstance(self.failure_reasons, str) or reasons - TOOL_ERROR_REASONS:
            raise ValueError(f"Breaker.failure_reasons must be ToolError reasons from "
                             f"{sorted(TOOL_ERROR_REASONS)}, got {self.failure_reasons!r}")
        object.__setattr__(self, "failure_reasons", reasons)

    def verdict(self, result: HandlerResult) -> Verdict:
        """How ``result`` counts: a crash in ``failure_reasons`` is a failure; arguments the
        schema refused, a cancelled call and any other crash are ignored (the dependency was
        not reached or not to blame); a reported ``Err`` counts only with ``count_reported``;
        anything else is a success."""
        if not isinstance(result, Err):
            return "success"
        error = result.reason
        if isinstance(error, InvalidArguments):
            return "ignored"
        if isinstance(error, ToolError):
            if error.code in UNCOUNTED_CODES or error.reason not in self.failure_reasons:
                return "ignored"
            return "failure"
        return "failure" if self.count_reported else "success"


@dataclass(frozen=True, slots=True)
class Permit:
    """Leave to run one call; hand it back with its outcome to :meth:`CircuitBreaker.record`.

    ``epoch`` names the breaker state it was given in: an outcome counts only in that state.
    """

    epoch: int
    trial: bool


@dataclass(frozen=True, slots=True)
class NotPermitted:
    """The breaker refused a call: it is open (``retry_in`` seconds to go) or half-open with
    every trial call in flight (``retry_in`` is ``None``); ``why`` says what opened it."""

    status: BreakerStatus
    retry_in: float | None
    why: str


@dataclass(frozen=True, slots=True)
class Transition:
    """The breaker moved from ``before`` to ``after``, because of ``why``."""

    before: BreakerStatus
    after: BreakerStatus
    why: str


class CircuitBreaker:
    """One tool's circuit: ask :meth:`acquire` before a call, :meth:`record` its outcome.

    Not thread-safe: one owner at a time. :meth:`take_transitions` hands over the moves made
    since it was last called (the host logs them); :attr:`status` reads without moving it.
    """

    def __init__(self, config: Breaker | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if config is not None and not isinstance(config, Breaker):
            raise TypeError(f"config must be a Breaker, got {type(config).__name__}")
        self._config = config or Breaker()
        self._clock = check_clock(clock)
        self._status: BreakerStatus = "closed"
        self._epoch = 0
        self._window: deque[tuple[float, bool]] = deque()  # (when, failed), closed state only
        self._failures = 0  # failed entries in the window
        self._streak = 0  # failures in a row, closed state only
        self._opened_at = 0.0
        self._why: str | None = None
        self._trials = 0  # trial permits out, half-open only
        self._passed = 0  # trials that succeeded, half-open only
        self._times_opened = 0
        self._refused = 0
        self._transitions: list[Transition] = []

    @property
    def config(self) -> Breaker:
        return self._config

    @property
    def status(self) -> BreakerStatus:
        """The status now: an open breaker whose wait is over reads ``half_open``."""
        if self._status == "open" and self._clock() >= self._retry_at:
            return "half_open"
        return self._status

    @property
    def _retry_at(self) -> float:
        return self._opened_at + self._config.open_for

    def check(self) -> NotPermitted | None:
        """Is a call refused now (counted in ``refused``)? Takes no permit: the host asks
        before a call waits for its turn, and :meth:`acquire` when it starts."""
        self._advance()
        refused = None
        if self._status == "open":
            refused = NotPermitted("open", max(0.0, self._retry_at - self._clock()),
                                   self._why or "")
        elif self._status == "half_open" and self._trials >= self._config.half_open_trials:
            refused = NotPermitted("half_open", None, self._why or "")
        self._refused += refused is not None
        return refused

    def acquire(self) -> Permit | NotPermitted:
        """A permit to run one call now, or why not."""
        refused = self.check()
        if refused is not None:
            return refused
        if self._status == "half_open":
            self._trials += 1
            return Permit(self._epoch, trial=True)
        return Permit(self._epoch, trial=False)

    def record(self, permit: Permit, outcome: Verdict | HandlerResult) -> None:
        """Count the outcome of the call ``permit`` let through (a result is judged by
        :meth:`Breaker.verdict`). An outcome from an earlier state is not counted."""
        verdict = outcome if isinstance(outcome, str) else self._config.verdict(outcome)
        if permit.epoch != self._epoch:
            return
        if permit.trial:
            self._trials -= 1
            if verdict == "failure":
                self._open("a trial call failed")
            elif verdict == "success":
                self._passed += 1
                if self._passed >= self._config.half_open_trials:
                    self._move("closed", f"{self._passed} trial call(s) succeeded")
            return
        if verdict == "ignored":
            return
        failed = verdict == "failure"
        self._window.append((self._clock(), failed))
        self._failures += failed
        self._streak = self._streak + 1 if failed else 0
        self._prune()
        self._trip()

    def take_transitions(self) -> list[Transition]:
        """The moves since the last call, oldest first."""
        moves, self._transitions = self._transitions, []
        return moves

    def snapshot(self) -> BreakerState:
        """The breaker as it stands (does not move it)."""
        status = self.status
        self._prune()
        return BreakerState(
            status=status,
            retry_in=max(0.0, self._retry_at - self._clock()) if status == "open" else None,
            calls_in_window=len(self._window), failures_in_window=self._failures,
            consecutive_failures=self._streak, trials_in_flight=self._trials,
            trials_passed=self._passed, times_opened=self._times_opened,
            refused=self._refused, why=self._why)

    # --- internals --------------------------------------------------------------------------

    def _advance(self) -> None:
        if self._status == "open" and self._clock() >= self._retry_at:
            self._move("half_open", f"open for {self._config.open_for:g} s")

    def _trip(self) -> None:
        config = self._config
        if config.consecutive_failures is not None \
                and self._streak >= config.consecutive_failures:
            self._open(f"{self._streak} failures in a row")
        elif config.failure_rate is not None and len(self._window) >= config.min_calls \
                and self._failures >= config.failure_rate * len(self._window):
            self._open(f"{self._failures} of the last {len(self._window)} calls failed")

    def _open(self, why: str) -> None:
        self._opened_at = self._clock()
        self._why = why
        self._times_opened += 1
        self._move("open", why)

    def _move(self, after: BreakerStatus, why: str) -> None:
        self._transitions.append(Transition(self._status, after, why))
        self._status = after
        self._epoch += 1
        self._window.clear()
        self._failures = self._streak = self._trials = self._passed = 0

    def _prune(self) -> None:
        """Drop outcomes beyond the window's length or age."""
        window, config = self._window, self._config
        oldest = -float("inf") if config.window_seconds is None \
            else self._clock() - config.window_seconds
        while window and ((config.window is not None and len(window) > config.window)
                          or window[0][0] < oldest):
            self._failures -= window.popleft()[1]
