"""Which framework channel a failed call goes to: ask the model to retry, or report a failure.

A framework with both channels (pydantic-ai's ``ModelRetry`` and ``ToolFailed``) asks an
``ErrorPolicy`` for each failed call. The default, :func:`retry_invalid_arguments`, retries
only what the model can fix by calling again differently: arguments the tool's schema refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeAlias

from toolvisor.contract import InvalidArguments

Channel: TypeAlias = Literal["retry", "fail"]
"""``retry``: the model is asked to call again (it uses a retry); ``fail``: it is told the call
failed, and decides what to do."""

ErrorPolicy: TypeAlias = Channel | Callable[[Any], Channel]
"""One channel for every failure, or a function of the ``Err``'s reason (a ``ToolError`` for a
crash, a timeout or a refusal; whatever the handler reported otherwise)."""


def retry_invalid_arguments(reason: Any) -> Channel:
    """``retry`` for arguments the schema refused (``InvalidArguments``), else ``fail``."""
    return "retry" if isinstance(reason, InvalidArguments) else "fail"


def channel_of(policy: ErrorPolicy, reason: Any) -> Channel:
    """The channel ``policy`` picks for a failure whose reason is ``reason``."""
    channel = policy(reason) if callable(policy) else policy
    if channel not in ("retry", "fail"):
        raise ValueError(f"an error policy answers 'retry' or 'fail', got {channel!r} for "
                         f"{reason!r}")
    return channel


def check_policy(policy: object) -> ErrorPolicy:
    """``policy`` if it is one, else a ``TypeError`` saying what is."""
    if policy in ("retry", "fail") or callable(policy):
        return policy
    raise TypeError(f"on_error must be 'retry', 'fail' or a function of the error's reason "
                    f"returning one of them, got {policy!r}")

