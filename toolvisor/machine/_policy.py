"""``on_tool_error`` policies and the decisions they make: pure, importable and testable alone.

A policy is ``"continue"``, ``"halt"``, a :class:`RetryPolicy`, or a function
``(CallAttempt, error) -> Decision``. :func:`apply_policy` applies one to one failure and never
raises: a function that raises or returns something else becomes :class:`BrokenPolicy`, which
halts the run with ``invalid_return``. ``error`` is what the ``Err`` carried: a
:class:`ToolError` when the call crashed, anything else when the handler reported the failure
itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, get_args

from toolvisor.contract import (
    TOOL_ERROR_REASONS,
    Err,
    Ok,
    ToolCall,
    ToolError,
    ToolErrorReason,
    check_seconds,
    is_seconds,
)

PolicyName: TypeAlias = Literal["continue", "halt"]
POLICY_NAMES: frozenset[str] = frozenset(get_args(PolicyName))

_DEFAULT_RETRY_REASONS: frozenset[ToolErrorReason] = frozenset(
    {"handler_raised", "handler_exit", "timeout"}
)


@dataclass(frozen=True, slots=True)
class CallAttempt:
    """The failed call a policy is asked about.

    ``attempt`` counts from 1; ``retryable`` is the tool's ``retryable`` flag (``False`` for a
    tool the catalog does not know, ``known=False``).
    """

    call: ToolCall
    attempt: int = 1
    retryable: bool = False
    known: bool = True

    @property
    def id(self) -> str:
        return self.call.id

    @property
    def name(self) -> str:
        return self.call.name

    @property
    def arguments(self) -> dict[str, Any]:
        return self.call.arguments


def is_crash(error: Any) -> bool:
    """``True`` when the failure is a crash (a ``ToolError``), ``False`` when it was reported."""
    return isinstance(error, ToolError)


@dataclass(frozen=True, slots=True)
class ContinueRun:
    """Give the model a result and go on: the encoded error, or ``result`` instead of it."""

    result: Ok | Err | None = None


@dataclass(frozen=True, slots=True)
class HaltRun:
    """End the run with ``Halted(reason="tool_error")`` once the sibling calls have finished.

    ``result`` becomes the outcome's result (default: the failed call and its error).
    """

    result: Any = None


@dataclass(frozen=True, slots=True)
class RetryAfter:
    """Run the call again ``delay`` seconds after this failure (only for ``retryable=True``
    tools); its siblings go on meanwhile."""

    delay: float


@dataclass(frozen=True, slots=True)
class BrokenPolicy:
    """The policy itself failed (raised, or returned a non-decision): halts with invalid_return."""

    detail: str


Decision: TypeAlias = ContinueRun | HaltRun | RetryAfter | BrokenPolicy
PolicyFunction: TypeAlias = Callable[[CallAttempt, Any], Decision]


class Backoff(Protocol):
    """What a policy that retries with capped exponential backoff and jitter is set with."""

    @property
    def max_attempts(self) -> int: ...
    @property
    def base_delay(self) -> float: ...
    @property
    def multiplier(self) -> float: ...
    @property
    def max_delay(self) -> float: ...
    @property
    def jitter(self) -> float: ...


def check_backoff(policy: Backoff, owner: str) -> None:
    """Refuse backoff settings out of range, each error naming ``owner.setting``."""
    if isinstance(policy.max_attempts, bool) or not isinstance(policy.max_attempts, int) \
            or policy.max_attempts < 1:
        raise ValueError(f"{owner}.max_attempts must be an int >= 1, "
                         f"got {policy.max_attempts!r}")
    for name in ("base_delay", "max_delay"):
        check_seconds(f"{owner}.{name}", getattr(policy, name))
    if not _is_number(policy.multiplier) or policy.multiplier < 1:
        raise ValueError(f"{owner}.multiplier must be a number >= 1, "
                         f"got {policy.multiplier!r}")
    if not _is_number(policy.jitter) or not 0 <= policy.jitter <= 1:
        raise ValueError(f"{owner}.jitter must be a fraction in [0, 1], "
                         f"got {policy.jitter!r}")


def backoff_delay(policy: Backoff, attempt: int, draw_from: str) -> float:
    """The wait after failed attempt ``attempt``: ``min(max_delay, base_delay * multiplier **
    (attempt - 1))`` scaled down by up to ``jitter``, drawn from ``draw_from`` (the same
    inputs wait the same, so a replay does)."""
    raw = min(policy.max_delay, policy.base_delay * policy.multiplier ** (attempt - 1))
    return raw * (1 - policy.jitter * random.Random(draw_from).random())


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retry crashes of ``retryable=True`` tools with capped exponential backoff and jitter.

    ``max_attempts`` counts every run of the call, the first included. The n-th retry waits
    ``min(max_delay, base_delay * multiplier ** (n - 1))`` scaled down by up to ``jitter``
    (a fraction in ``[0, 1]``), drawn from the run's seed so a replay waits the same. Only
    ``ToolError`` reasons in ``reasons`` are retried, and handler-reported ``Err`` only when
    ``retry_reported``. Every failure not retried is handled as ``otherwise``.
    """

    max_attempts: int = 3
    base_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 30.0
    jitter: float = 0.5
    reasons: frozenset[ToolErrorReason] = _DEFAULT_RETRY_REASONS
    retry_reported: bool = False
    otherwise: PolicyName = "continue"

    def __post_init__(self) -> None:
        check_backoff(self, "RetryPolicy")
        reasons = frozenset(self.reasons)
        unknown = reasons - TOOL_ERROR_REASONS
        if isinstance(self.reasons, str) or unknown:
            raise ValueError(f"RetryPolicy.reasons must be ToolError reasons from "
                             f"{sorted(TOOL_ERROR_REASONS)}, got {self.reasons!r}")
        object.__setattr__(self, "reasons", reasons)
        if self.otherwise not in POLICY_NAMES:
            raise ValueError(f"RetryPolicy.otherwise must be 'continue' or 'halt', "
                             f"got {self.otherwise!r}")

    def delay(self, attempt: int, *, seed: int, call_id: str) -> float:
        """Seconds to wait before running attempt ``attempt + 1``; the same for the same inputs."""
        return backoff_delay(self, attempt, f"{seed}:{call_id}:{attempt}")

    def wants_retry(self, error: Any) -> bool:
        """Whether ``error`` is a failure this policy retries (attempts and tool aside)."""
        if isinstance(error, ToolError):
            return error.reason in self.reasons
        return self.retry_reported


Policy: TypeAlias = PolicyName | RetryPolicy | PolicyFunction


def check_policy(policy: object, where: str) -> None:
    """Refuse anything that is not a policy, naming ``where`` it was given."""
    if isinstance(policy, str):
        if policy not in POLICY_NAMES:
            raise ValueError(f"{where}: unknown policy {policy!r}; use 'continue', 'halt', "
                             "a RetryPolicy or a function (call, error) -> decision")
        return
    if isinstance(policy, RetryPolicy) or callable(policy):
        return
    raise TypeError(f"{where}: a policy is 'continue', 'halt', a RetryPolicy or a function "
                    f"(call, error) -> decision, got {type(policy).__name__}")


EVERY_OTHER_TOOL = "*"
"""The key of an ``on_tool_error`` mapping that names the policy of every tool it does not name."""


def policies_by_tool(on_tool_error: Policy | Mapping[str, Policy],
                     known: Collection[str]) -> tuple[Policy, dict[str, Policy]]:
    """An agent's ``on_tool_error`` (one policy, or a policy by tool name with ``"*"`` for
    every other tool) as the machine's default policy and its overrides by tool name: the one
    reading of the setting, shared by ``Agent`` and ``TemporalAgent``.

    Args:
        on_tool_error: The agent's setting; a mapping without ``"*"`` leaves every other
            tool ``"continue"``.
        known: The names of the agent's tools, which the mapping may name.

    Returns:
        The default policy and the per-tool policies (``MachineConfig.on_tool_error`` and
        ``MachineConfig.tool_policies``), each checked there.

    Raises:
        ValueError: The mapping names a tool not in ``known``, naming the known ones.
    """
    if not isinstance(on_tool_error, Mapping):
        return on_tool_error, {}
    policies = dict(on_tool_error)
    default = policies.pop(EVERY_OTHER_TOOL, "continue")
    for name in policies:
        if name not in known:
            raise ValueError(f"on_tool_error names unknown tool {name!r}; known tools: "
                             f"{sorted(known)} (use {EVERY_OTHER_TOOL!r} for every other "
                             "tool)")
    return default, policies


def apply_policy(policy: Policy, failed: CallAttempt, error: Any, *, seed: int = 0) -> Decision:
    """What to do about one failure. Pure, and never raises for a policy function's sake."""
    if policy == "continue":
        return ContinueRun()
    if policy == "halt":
        return HaltRun()
    if isinstance(policy, RetryPolicy):
        if failed.retryable and failed.attempt < policy.max_attempts \
                and policy.wants_retry(error):
            return RetryAfter(policy.delay(failed.attempt, seed=seed, call_id=failed.id))
        return ContinueRun() if policy.otherwise == "continue" else HaltRun()
    if isinstance(policy, str):
        return BrokenPolicy(f"unknown policy {policy!r}")
    return _ask_function(policy, failed, error)


def _ask_function(policy: PolicyFunction, failed: CallAttempt, error: Any) -> Decision:
    name = getattr(policy, "__qualname__", type(policy).__name__)
    try:
        decision: object = policy(failed, error)
    except Exception as exc:
        return BrokenPolicy(f"policy {name} raised {type(exc).__name__}: {exc}")
    if isinstance(decision, ContinueRun):
        if decision.result is not None and not isinstance(decision.result, Ok | Err):
            return BrokenPolicy(f"policy {name} returned ContinueRun with a "
                                f"{type(decision.result).__name__}; the replacement result "
                                "must be Ok or Err")
        return decision
    if isinstance(decision, RetryAfter):
        if not is_seconds(decision.delay):
            return BrokenPolicy(f"policy {name} returned RetryAfter({decision.delay!r}); "
                                "the delay must be a finite number of seconds >= 0")
        if not failed.retryable:
            return BrokenPolicy(f"policy {name} asked to retry tool {failed.name!r}, which "
                                "is not declared retryable=True")
        return decision
    if isinstance(decision, HaltRun | BrokenPolicy):
        return decision
    return BrokenPolicy(f"policy {name} returned {type(decision).__name__}, expected "
                        "ContinueRun, HaltRun or RetryAfter")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)

