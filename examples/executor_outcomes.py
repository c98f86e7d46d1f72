"""Every outcome of ``execute``: the legal results a handler chooses, and the six ToolErrors.

Run it with ``python -m examples.executor_outcomes``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Literal

from pydantic import BaseModel

from toolvisor import (
    AskUser,
    CallContext,
    Err,
    Halt,
    Ok,
    Pending,
    Tool,
    ToolCall,
    ToolError,
    function_tool,
    tool,
)
from toolvisor.testing import encode, encode_checked, execute


class Add(BaseModel):
    a: int
    b: int


@tool
def add(arguments: Add) -> Ok:
    """Add two integers (arity 1: arguments only, validated and converted to Add)."""
    return Ok(arguments.a + arguments.b)


@tool(input_schema={"type": "object", "properties": {}})  # it takes no arguments
def whoami(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Say who is calling (arity 2: the call context comes second)."""
    return Ok({"session": ctx.session_id, "call": ctx.tool_call_id})


@function_tool
def weather(city: str, units: Literal["metric", "imperial"] = "metric") -> str:
    """A plain function: its parameters are the arguments, its return value is Ok(value)."""
    return f"{city}: 21 C" if units == "metric" else f"{city}: 70 F"


def returns(name: str, value: Any) -> Tool:
    return Tool(name=name, handler=lambda arguments: value)


def raises(arguments: dict[str, Any]) -> Ok:
    raise ConnectionError("upstream refused")


def exits(arguments: dict[str, Any]) -> Ok:
    sys.exit(3)


CASES: list[tuple[str, Tool, dict[str, Any]]] = [
    ("arity 1, Ok", add, {"a": 2, "b": 3}),
    ("arity 2, Ok with context", whoami, {}),
    ("function tool, plain value -> Ok", weather, {"city": "Oslo"}),
    ("handler reports Err (not wrapped)", returns("lookup", Err("no such user")), {}),
    ("handler asks the user", returns("deploy", AskUser("Deploy to prod?", ("yes", "no"))), {}),
    ("handler halts the run", returns("stop", Halt("goal_reached", {"answer": 42})), {}),
    ("handler defers its result", returns("webhook", Pending(deadline=60)), {}),
    ("invalid arguments", add, {"a": "two"}),
    ("raise -> handler_raised", Tool(name="flaky", handler=raises), {}),
    ("sys.exit -> handler_exit", Tool(name="quitter", handler=exits), {}),
    ("garbage -> invalid_return", returns("sloppy", {"not": "a result"}), {}),
    ("unencodable -> encoding_failed", returns("socket", Ok(os)), {}),
    ("no handler -> not_found", Tool(name="manual_only"), {}),
]


def main() -> None:
    ctx = CallContext(session_id="demo", tool_call=ToolCall(id="call_1", name="whoami"))
    print("toolvisor executor: every outcome of one handler call\n")
    for label, the_tool, arguments in CASES:
        result, text = encode_checked(execute(the_tool, arguments, ctx), tool_name=the_tool.name)
        kind = (f"ToolError({result.reason.reason})"
                if isinstance(result, Err) and isinstance(result.reason, ToolError)
                else type(result).__name__)
        print(f"  {label:<36} {kind:<28} {text[:90]}")
    print("\nencode(Ok('plain strings stay as they are')) ->",
          encode(Ok("plain strings stay as they are")))


if __name__ == "__main__":
    main()
