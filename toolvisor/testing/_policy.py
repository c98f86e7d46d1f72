"""Testing an ``on_tool_error`` policy in isolation: one failure in, one decision out."""

from __future__ import annotations

from typing import Any

from toolvisor.contract import Err, ToolCall
from toolvisor.machine.policy import Decision, FailedCall, Policy, apply_policy, check_policy


def decide(
    policy: Policy,
    call: ToolCall | FailedCall | str,
    error: Any,
    *,
    attempt: int = 1,
    retryable: bool = False,
    known: bool = True,
    seed: int = 0,
) -> Decision:
    """What ``policy`` decides about one failure, exactly as the ``TurnMachine`` would ask.

    ``call`` is a ``ToolCall``, a ``FailedCall`` (then ``attempt``, ``retryable`` and ``known``
    are its own) or a tool name. ``error`` is the failure: an ``Err`` (its reason is used) or
    the reason itself, a ``ToolError`` for a crash. No threads, no model, no machine.
    """
    check_policy(policy, "decide()")
    if isinstance(error, Err):
        error = error.reason
    if isinstance(call, str):
        call = ToolCall(id="call_1", name=call)
    failed = call if isinstance(call, FailedCall) else FailedCall(
        call=call, attempt=attempt, retryable=retryable, known=known)
    return apply_policy(policy, failed, error, seed=seed)
