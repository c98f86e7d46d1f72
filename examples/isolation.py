"""Isolation: a hung tool and a dying one, each in a worker process, and a hung thread tool.

A ``process`` tool past its deadline is killed with SIGKILL and its worker replaced: the only
way to really stop a hung sync handler in Python. A worker that dies mid-call is that call's
``handler_exit``. A ``thread`` tool past its deadline gets ``timeout`` at once and its
cancellation token is set; a thread cannot be killed, so the agent gives it up and counts it.
The process tools are module-level functions: a worker imports its handler by name.
Run it with ``python -m examples.isolation``.
"""

from __future__ import annotations

import os

from toolvisor import Agent, CallContext, function_tool
from toolvisor.testing import ScriptedModel, call, calls


@function_tool(isolation="process", timeout=0.5)
def crunch(n: int) -> int:
    """Sum the numbers below n, in a worker process (no token interrupts this loop)."""
    total = 0
    for i in range(n):
        total += i
    return total


@function_tool(isolation="process")
def crash(code: int) -> str:
    """Exit the worker process at once, as a crashing C extension would."""
    os._exit(code)


@function_tool(timeout=0.5)
def wait_politely(seconds: float, ctx: CallContext) -> str:
    """Wait, in a thread, but stop as soon as the call is cancelled."""
    cancelled = ctx.cancelled.wait(seconds)
    return "stopped early" if cancelled else "waited"


def main() -> None:
    model = ScriptedModel([
        calls(call("crunch", {"n": 10**12}), call("crash", {"code": 3}),
              call("wait_politely", {"seconds": 60})),
        "All three failed.",
    ])
    with Agent(model, [crunch, crash, wait_politely]) as agent:
        outcome = agent.run("Do three things")
    stats = agent.runner.stats  # once the agent is closed (its close kills its workers too)
    for message in outcome.messages:
        if message.role == "tool":
            print(f"{message.tool_call_id}: {message.content}")
    print(f"workers killed: {stats.workers_killed}, died: {stats.workers_died}, "
          f"replaced: {stats.workers_replaced}; threads abandoned: {stats.threads_abandoned}")


if __name__ == "__main__":
    main()
