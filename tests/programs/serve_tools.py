"""Tools the MCP serving tests serve (``python -m toolvisor.cli mcp serve
tests.programs.serve_tools:tools``); ``hang`` runs in a worker process, so its timeout kills it."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel

from toolvisor import Err, Ok, Tool, function_tool, tool


class Pair(BaseModel):
    a: int
    b: int


@tool
def add(arguments: Pair) -> Ok:
    """Add two integers."""
    return Ok({"sum": arguments.a + arguments.b})


@function_tool
def fail() -> str:
    """Raises: a crash, reported as an isError result."""
    raise RuntimeError("the disk is full")


@function_tool
def refuse() -> Err:
    """Reports a failure of its own."""
    return Err("not today")


def _sleep_forever(arguments: dict[str, Any]) -> Ok:
    time.sleep(3600)
    return Ok("unreachable")


hang = Tool(name="hang", description="Never returns.", handler=_sleep_forever,
            isolation="process", timeout=1.0)
pick = Tool(name="pick", manual=True)  # manual: not served

tools = [add, fail, refuse, hang, pick]
