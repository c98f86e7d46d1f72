"""Tools the adapter tests run under pydantic-ai, LangGraph and the OpenAI Agents SDK; ``hang``
runs in a worker process, so its timeout kills it. ``add`` counts its runs in a file named by
the ``TOOLVISOR_TEST_COUNT`` environment variable, when set."""

from __future__ import annotations

import os
import time
from typing import Any

from toolvisor import AskUser, CallContext, Err, Halt, Ok, Pending, Tool, function_tool


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    counter = os.environ.get("TOOLVISOR_TEST_COUNT")
    if counter:
        with open(counter, "a") as runs:
            runs.write("add\n")
    return a + b


@function_tool
def crash() -> str:
    """Raises: a crash."""
    raise RuntimeError("the disk is full")


@function_tool
def refuse() -> Err:
    """Reports a failure of its own."""
    return Err("not today")


@function_tool
def deploy(target: str) -> AskUser:
    """Asks before deploying."""
    return AskUser(f"Deploy to {target}?", options=("yes", "no"))


@function_tool
def review(doc: str, ctx: CallContext) -> Pending:
    """Sends ``doc`` for review; the reviewer resolves the call's completion key."""
    ctx.completion_key()
    return Pending(deadline=3600)


@function_tool
def stop() -> Halt:
    """Ends the run."""
    return Halt("enough")


def _sleep_forever(arguments: dict[str, Any]) -> Ok:
    time.sleep(3600)
    return Ok("unreachable")


hang = Tool(name="hang", description="Never returns.", handler=_sleep_forever,
            isolation="process", timeout=0.5)

tools = [add, crash, refuse, deploy, review, stop, hang]
