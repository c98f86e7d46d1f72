"""Function tools at module level, where a worker process finds them by module and name."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel

from toolvisor import AskUser, CallContext, function_tool


class Point(BaseModel):
    x: int
    y: int


@function_tool(isolation="process")
def weather(city: str, units: Literal["metric", "imperial"] = "metric") -> str:
    """Today's weather in a city.

    Args:
        city: The city's name.
        units: The units to report in.
    """
    return f"{city}: 21 C" if units == "metric" else f"{city}: 70 F"


@function_tool(isolation="process")
def where(label: str, ctx: CallContext) -> dict[str, Any]:
    """Which process ran the call, and for which call."""
    return {"label": label, "pid": os.getpid(), "call": ctx.tool_call_id}


@function_tool(isolation="process")
def refuse(reason: str) -> str:
    """Raises."""
    raise ValueError(reason)


@function_tool(isolation="process")
def confirm(question: str) -> AskUser:
    """Asks the user, through the handler results' pass-through."""
    return AskUser(question, ("yes", "no"))


@function_tool(isolation="process")
def manhattan(point: Point, /, origin: Point | None = None) -> int:
    """A pydantic parameter, converted in the worker; a positional-only one too."""
    start = origin or Point(x=0, y=0)
    return abs(point.x - start.x) + abs(point.y - start.y)


def double(n: int) -> int:
    """Not decorated: ``function_tool(double)`` elsewhere is a tool a worker cannot find here."""
    return 2 * n
