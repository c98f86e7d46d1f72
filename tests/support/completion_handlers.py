"""Module-level handlers that make direct completions from a worker process or a Ray task
(importable by name there); each reports the pid it ran in, so a test sees it left the agent."""

from __future__ import annotations

import os
from typing import Any

from toolvisor import CallContext, Ok
from toolvisor.contract import CapabilityError, ModelRequest, UserMessage


def ranks(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Ranks with one completion of the run's model, asked over the context link."""
    response = ctx.direct_completions.complete(arguments["prompt"], source="rank")
    usage = response.usage
    return Ok({"text": response.text, "pid": os.getpid(),
               "tokens": None if usage is None else usage.input_tokens})


def names_a_missing_model(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """A refused completion: its ``CapabilityError`` crosses back with its code."""
    try:
        ctx.direct_completions.complete(ModelRequest(messages=(UserMessage(content="hi"),),
                                                     model="missing"))
    except CapabilityError as exc:
        return Ok({"code": exc.code, "pid": os.getpid()})
    return Ok("unreachable")
