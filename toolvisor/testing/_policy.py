"""Testing ``on_tool_error`` and ``on_model_error`` policies in isolation: one failure in, one
decision out."""

from __future__ import annotations

from typing import Any

from toolvisor.contract import Err, ModelError, ModelErrorReason, ToolCall
from toolvisor.machine import (
    CallAttempt,
    Decision,
    ModelDecision,
    ModelPolicy,
    Policy,
    apply_model_policy,
    apply_policy,
    check_model_policy,
    check_policy,
)


def decide(
    policy: Policy,
    call: ToolCall | CallAttempt | str,
    error: Any,
    *,
    attempt: int = 1,
    retryable: bool = False,
    known: bool = True,
    seed: int = 0,
) -> Decision:
    """What ``policy`` decides about one failure, exactly as the ``TurnMachine`` would ask.

    ``call`` is a ``ToolCall``, a ``CallAttempt`` (then ``attempt``, ``retryable`` and ``known``
    are its own) or a tool name. ``error`` is the failure: an ``Err`` (its reason is used) or
    the reason itself, a ``ToolError`` for a crash. No threads, no model, no machine.
    """
    check_policy(policy, "decide()")
    if isinstance(error, Err):
        error = error.reason
    if isinstance(call, str):
        call = ToolCall(id="call_1", name=call)
    failed = call if isinstance(call, CallAttempt) else CallAttempt(
        call=call, attempt=attempt, retryable=retryable, known=known)
    return apply_policy(policy, failed, error, seed=seed)


def decide_model(policy: ModelPolicy, error: ModelError | ModelErrorReason, *,
                 attempt: int = 1, retry_after: float | None = None, seed: int = 0,
                 turn: int = 1) -> ModelDecision:
    """What ``policy`` decides about one failed model call, exactly as the machine would ask.

    ``error`` is a ``ModelError`` or just its reason (then ``retry_after`` is its own);
    ``attempt`` says which attempt of the turn's model call failed.
    """
    check_model_policy(policy, "decide_model()")
    if isinstance(error, str):
        error = ModelError(error, retry_after=retry_after)
    return apply_model_policy(policy, error.with_attempt(attempt), seed=seed, turn=turn)
