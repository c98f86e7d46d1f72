"""A program that forgets ``agent.close()`` while every kind of toolvisor thread is alive.

``python -m tests.programs.forgetful_host <store>``: one run calls a ``thread``, an ``asyncio`` and
a ``process`` tool and an MCP server's tool; a second run parks on a completion key (its key
waiter and the store's lease timer stay); a third sleeps before a retry (an hour). It then
prints one JSON line (the outcomes and the live threads) and falls off the end of the program
without closing the agent: the interpreter must exit by itself.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support import handlers as h
from toolvisor import Agent, CallContext, Pending, Tool, set_event_sink
from toolvisor.machine import CallAttempt, RetryAfter
from toolvisor.mcp import McpToolProvider
from toolvisor.testing import ScriptedModel, call, calls

ROOT = Path(__file__).resolve().parents[2]


def parks(arguments: dict[str, Any], ctx: CallContext) -> Pending:
    """Takes a completion key nobody resolves."""
    ctx.completion_key()
    return Pending(deadline=3600)


def retry_in_an_hour(failed: CallAttempt, error: Any) -> RetryAfter:
    return RetryAfter(3600.0)


TOOLS = [
    Tool(name="echo", handler=h.ok_echo),
    Tool(name="pid", handler=h.pid, isolation="process"),
    Tool(name="hello", handler=h.async_ok),
    Tool(name="parks", handler=parks),
    Tool(name="flaky", handler=h.raises, retryable=True),
]


def main(store: str) -> None:
    sleeping = threading.Event()

    def sink(level: str, event: str, fields: dict[str, Any]) -> None:
        if event == "retry_scheduled":
            sleeping.set()

    set_event_sink(sink)
    model = ScriptedModel({  # a script for each run, by its prompt
        "call them all": [calls(call("echo", {"a": 1}), call("pid", {}), call("hello", {}),
                                call("add", {"a": 2, "b": 3})), "all four ran"],
        "park": [calls(call("parks", {}))],
        "sleep": [calls(call("flaky", {}))],
    })
    mcp = McpToolProvider.stdio("local", [sys.executable, "-m", "tests.programs.mcp_server"],
                                cwd=str(ROOT))
    agent = Agent(model, [*TOOLS, mcp], store=store, on_tool_error={"flaky": retry_in_an_hour})
    first = agent.run("call them all")
    second = agent.run("park")
    threading.Thread(target=agent.run, args=("sleep",), daemon=True).start()
    sleeping.wait()
    print(json.dumps({
        "outcomes": [type(first).__name__, type(second).__name__],
        "threads": sorted(t.name for t in threading.enumerate()),
        "non_daemon": sorted(t.name for t in threading.enumerate()
                             if not t.daemon and t is not threading.main_thread()),
    }), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
