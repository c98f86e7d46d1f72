"""What the three "framework + toolvisor" drivers share: the hung tool as a toolvisor ``process``
tool (a worker process its deadline kills), and how its end is reported.

The drivers themselves (``_pydantic_ai_toolvisor``, ``_langgraph_toolvisor``,
``_openai_agents_toolvisor``) run the same scripted turns as the framework alone, with the
framework's own tools replaced by toolvisor's adapter: the difference per call is what the
adapter adds.
"""

import time
from typing import Any

from bench.competitors._driver import HungReport
from bench.competitors._tools import HANG_SECONDS
from toolvisor import Ok, Tool
from toolvisor.adapters import SupervisedCalls

HUNG_TIMEOUT_SECONDS = 0.2


def _hang(arguments: dict[str, Any]) -> Ok:
    time.sleep(HANG_SECONDS)
    return Ok("woke up")


HANG = Tool(name="hang", description="Wait for an answer that never comes.", handler=_hang,
            isolation="process", timeout=HUNG_TIMEOUT_SECONDS)
"""The hung tool under toolvisor: in a worker process, killed at its 200 ms deadline."""

def _ready(arguments: dict[str, Any]) -> Ok:
    return Ok("ready")


READY = Tool(name="ready", description="Answer at once (warms the worker processes up).",
             handler=_ready, isolation="process")

HUNG_SETTING = f"adapter, isolation='process', timeout={HUNG_TIMEOUT_SECONDS}"


def warm_up(calls: SupervisedCalls) -> None:
    """Start the worker processes before the turn (the framework-alone rows start no process:
    the first call of a cold pool would time its start-up, not the deadline)."""
    calls.run(READY.name, {}, "warm-up")


def close_and_report(calls: SupervisedCalls, report: HungReport) -> None:
    """Close the adapter (its runner joins the pool) and report whether the worker that ran
    the hung tool was killed."""
    calls.close()
    report.emit("tool_worker_killed", killed=calls.stats.workers_killed)
