"""``TokenBucket``: at most N calls of a tool per period, with a burst.

A pure state machine with an injected clock. A call takes a token; when there is none it
reserves the next one (the bucket goes into debt) and waits until it is due, so calls keep
their order and the rate holds; a call that would wait past ``max_wait`` is refused instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from toolvisor.contract import check_seconds
from toolvisor.resilience._checks import check_clock, check_count
from toolvisor.resilience._state import RateLimitState


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``calls`` calls every ``per`` seconds, at most ``burst`` (default ``calls``) at
    once after a quiet spell. A call beyond it waits its turn up to ``max_wait`` seconds
    (``None``: as long as it takes) and is refused if its turn is further off; ``max_wait=0``
    fails fast."""

    calls: int
    per: float = 1.0
    burst: int | None = None
    max_wait: float | None = 60.0

    def __post_init__(self) -> None:
        check_count("RateLimit.calls", self.calls)
        check_seconds("RateLimit.per", self.per, positive=True)
        check_count("RateLimit.burst", self.burst, optional=True)
        check_seconds("RateLimit.max_wait", self.max_wait, optional=True)

    @property
    def capacity(self) -> int:
        return self.calls if self.burst is None else self.burst


class TokenBucket:
    """One tool's token bucket. Not thread-safe: one owner at a time."""

    def __init__(self, config: RateLimit, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(config, RateLimit):
            raise TypeError(f"config must be a RateLimit, got {type(config).__name__}")
        self._config = config
        self._clock = check_clock(clock)
        self._rate = config.calls / config.per  # tokens a second
        self._tokens = float(config.capacity)
        self._at = self._clock()
        self._waiting = 0
        self._refused = 0

    @property
    def config(self) -> RateLimit:
        return self._config

    def _refill(self) -> float:
        now = self._clock()
        self._tokens = min(float(self._config.capacity),
                           self._tokens + (now - self._at) * self._rate)
        self._at = now
        return now

    def take(self) -> float | None:
        """Take a token: how many seconds to wait for it (``0.0``: run now), or ``None`` if
        that is past ``max_wait`` (refused; nothing taken)."""
        self._refill()
        wait = max(0.0, (1.0 - self._tokens) / self._rate)
        if self._config.max_wait is not None and wait > self._config.max_wait:
            self._refused += 1
            return None
        self._tokens -= 1.0
        if wait > 0:
            self._waiting += 1
        return wait

    def next_in(self) -> float:
        """Seconds until a call asked now could run (takes nothing)."""
        self._refill()
        return max(0.0, (1.0 - self._tokens) / self._rate)

    def waited(self) -> None:
        """A call that had to wait has had its turn."""
        self._waiting -= 1

    def give_back(self) -> None:
        """A waiting call was cancelled before its turn: its token goes back."""
        self._waiting -= 1
        self._refill()
        self._tokens = min(float(self._config.capacity), self._tokens + 1.0)

    def snapshot(self) -> RateLimitState:
        self._refill()
        return RateLimitState(calls=self._config.calls, per=self._config.per,
                              tokens=round(self._tokens, 6), waiting=self._waiting,
                              refused=self._refused)
