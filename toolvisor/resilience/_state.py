"""What ``agent.resilience_state()`` reports: every breaker, bulkhead and rate limit, as JSON."""

from __future__ import annotations

from typing import Literal, TypeAlias

from pydantic import Field

from toolvisor.contract import FrozenModel

BreakerStatus: TypeAlias = Literal["closed", "open", "half_open"]


class BreakerState(FrozenModel):
    """A circuit breaker as it stands.

    ``retry_in``: seconds until an open breaker lets trial calls through (``None`` unless
    open). The window counts are those of the closed state; ``why`` says what last opened it.
    """

    status: BreakerStatus
    retry_in: float | None = None
    calls_in_window: int = 0
    failures_in_window: int = 0
    consecutive_failures: int = 0
    trials_in_flight: int = 0
    trials_passed: int = 0
    times_opened: int = 0
    refused: int = 0
    why: str | None = None


class BulkheadState(FrozenModel):
    """A bulkhead as it stands: calls running and waiting, and how many were refused."""

    max_concurrent: int
    running: int
    queued: int
    max_queue: int
    refused: int = 0


class RateLimitState(FrozenModel):
    """A token bucket as it stands: ``tokens`` may be negative while calls wait their turn."""

    calls: int
    per: float
    tokens: float
    waiting: int
    refused: int = 0


class GateState(FrozenModel):
    """One tool's breaker, bulkhead and rate limit (``None`` where not configured)."""

    breaker: BreakerState | None = None
    bulkhead: BulkheadState | None = None
    rate_limit: RateLimitState | None = None


class ResilienceState(FrozenModel):
    """Every guarded tool's gate, by tool name (a tool appears once it has been called)."""

    tools: dict[str, GateState] = Field(default_factory=dict)
