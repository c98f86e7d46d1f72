"""Per-tool resilience: circuit breakers, bulkheads and rate limits, as pure state machines.

Supervision protects the runtime from a tool; these protect a failing dependency from the
agent, and the agent from a tool that is down. Configure them per tool with ``Agent(...,
limits=Limits(per_tool={"name": Resilience(breaker=Breaker(...), bulkhead=Bulkhead(...),
rate_limit=RateLimit(...))}))`` (or one ``Resilience`` for every tool). Each state machine takes
an injected clock and has no threads, so a test drives it with plain calls
(``toolvisor.testing.FakeClock``, ``drive_breaker``).
"""

from toolvisor.resilience._breaker import (
    DEFAULT_FAILURE_REASONS,
    UNCOUNTED_CODES,
    Breaker,
    CircuitBreaker,
    NotPermitted,
    Permit,
    Transition,
    Verdict,
)
from toolvisor.resilience._bulkhead import Bulkhead, BulkheadSlots
from toolvisor.resilience._gate import (
    BULKHEAD_FULL,
    BULKHEAD_WAIT_TIMEOUT,
    CIRCUIT_OPEN,
    RATE_LIMITED,
    Action,
    Moved,
    Refusal,
    Refuse,
    Resilience,
    Start,
    ToolGate,
    WakeIn,
)
from toolvisor.resilience._rate_limit import RateLimit, TokenBucket
from toolvisor.resilience._state import (
    BreakerState,
    BreakerStatus,
    BulkheadState,
    GateState,
    RateLimitState,
    ResilienceState,
)

__all__ = [
    "BULKHEAD_FULL",
    "BULKHEAD_WAIT_TIMEOUT",
    "CIRCUIT_OPEN",
    "DEFAULT_FAILURE_REASONS",
    "RATE_LIMITED",
    "UNCOUNTED_CODES",
    "Action",
    "Breaker",
    "BreakerState",
    "BreakerStatus",
    "Bulkhead",
    "BulkheadSlots",
    "BulkheadState",
    "CircuitBreaker",
    "GateState",
    "Moved",
    "NotPermitted",
    "Permit",
    "RateLimit",
    "RateLimitState",
    "Refusal",
    "Refuse",
    "Resilience",
    "ResilienceState",
    "Start",
    "TokenBucket",
    "ToolGate",
    "Transition",
    "Verdict",
    "WakeIn",
]
