"""``on_model_error`` policies: what to do when a model call fails. Pure, like ``on_tool_error``.

A policy is ``"fail"``, a :class:`ModelRetryPolicy` (the default), or a function
``(ModelError) -> RetryAfter | FailRun``; ``error.attempt`` says which attempt of the turn's
model call failed. :func:`apply_model_policy` never raises: a function that raises or returns
anything else is a :class:`BrokenPolicy`, which fails the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from toolvisor.contract import (
    MODEL_ERROR_REASONS,
    RETRYABLE_MODEL_ERRORS,
    ModelError,
    ModelErrorReason,
    check_seconds,
    is_seconds,
)
from toolvisor.machine._policy import BrokenPolicy, RetryAfter, backoff_delay, check_backoff


@dataclass(frozen=True, slots=True)
class FailRun:
    """Give up: the run ends ``Failed`` with the model error (its transcript kept)."""


ModelDecision: TypeAlias = RetryAfter | FailRun | BrokenPolicy


@dataclass(frozen=True, slots=True)
class ModelRetryPolicy:
    """Retry model failures that may pass by themselves, with capped exponential backoff.

    ``max_attempts`` counts every attempt of one turn's model call, the first included. The
    n-th retry waits ``min(max_delay, base_delay * multiplier ** (n - 1))`` scaled down by up
    to ``jitter`` (drawn from the run's seed, so a replay waits the same), or the provider's
    ``retry_after`` when that is longer. A ``retry_after`` beyond ``max_retry_after`` fails the
    run rather than wait that long, or hammer a provider that asked for patience. Only errors
    whose reason is in ``reasons`` are retried (default ``timeout``, ``rate_limited``,
    ``unavailable``: never ``rejected``, which no retry can fix).
    """

    max_attempts: int = 4
    base_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 20.0
    jitter: float = 0.5
    max_retry_after: float = 60.0
    reasons: frozenset[ModelErrorReason] = RETRYABLE_MODEL_ERRORS  # type: ignore[assignment]

    def __post_init__(self) -> None:
        check_backoff(self, "ModelRetryPolicy")
        check_seconds("ModelRetryPolicy.max_retry_after", self.max_retry_after)
        reasons = frozenset(self.reasons)
        if isinstance(self.reasons, str) or reasons - MODEL_ERROR_REASONS:
            raise ValueError(f"ModelRetryPolicy.reasons must be ModelError reasons from "
                             f"{sorted(MODEL_ERROR_REASONS)}, got {self.reasons!r}")
        object.__setattr__(self, "reasons", reasons)

    def decide(self, error: ModelError, *, seed: int, turn: int) -> RetryAfter | FailRun:
        """Retry ``error`` (the failure of attempt ``error.attempt``) or give up."""
        if error.reason not in self.reasons or error.attempt >= self.max_attempts:
            return FailRun()
        if error.retry_after is not None and error.retry_after > self.max_retry_after:
            return FailRun()
        delay = backoff_delay(self, error.attempt, f"{seed}:model:{turn}:{error.attempt}")
        return RetryAfter(max(delay, error.retry_after or 0.0))


DEFAULT_MODEL_POLICY = ModelRetryPolicy()
"""The ``on_model_error`` an agent or machine gets unless told otherwise."""

ModelPolicyFunction: TypeAlias = Callable[[ModelError], RetryAfter | FailRun]
ModelPolicy: TypeAlias = Literal["fail"] | ModelRetryPolicy | ModelPolicyFunction


def check_model_policy(policy: object, where: str) -> None:
    """Refuse anything that is not a model policy, naming ``where`` it was given."""
    if policy == "fail" or isinstance(policy, ModelRetryPolicy):
        return
    if callable(policy) and not isinstance(policy, str):
        return
    raise TypeError(f"{where}: a model policy is 'fail', a ModelRetryPolicy or a function "
                    f"(ModelError) -> RetryAfter | FailRun, got {policy!r}")


def apply_model_policy(policy: ModelPolicy, error: ModelError, *, seed: int,
                       turn: int) -> ModelDecision:
    """What to do about one failed model call. Pure, and never raises for a function's sake."""
    if policy == "fail":
        return FailRun()
    if isinstance(policy, ModelRetryPolicy):
        return policy.decide(error, seed=seed, turn=turn)
    if isinstance(policy, str):
        return BrokenPolicy(f"unknown model policy {policy!r}")
    name = getattr(policy, "__qualname__", type(policy).__name__)
    try:
        decision: object = policy(error)
    except Exception as exc:
        return BrokenPolicy(f"model policy {name} raised {type(exc).__name__}: {exc}")
    if isinstance(decision, FailRun):
        return decision
    if isinstance(decision, RetryAfter):
        delay = decision.delay
        if not is_seconds(delay):
            return BrokenPolicy(f"model policy {name} returned RetryAfter({delay!r}); the "
                                "delay must be a finite number of seconds >= 0")
        return decision
    return BrokenPolicy(f"model policy {name} returned {type(decision).__name__}, expected "
                        "RetryAfter or FailRun")
