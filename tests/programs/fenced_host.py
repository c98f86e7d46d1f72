"""The host of the fencing test, a real process:
``python -m tests.programs.fenced_host STORE FIFO``.

It opens an ``Agent`` on STORE whose lease outlives the test (600 s: it never renews while the
test runs, so only the fencing token can tell it that it lost the run) and starts a run. The
run's tool, ``work``, prints ``{"blocked": RUN_ID}`` and blocks reading FIFO; once a line
arrives it journals a step, printing ``{"journal": "ok"}`` or, when the store refuses the write,
``{"journal": "StaleLeaseError", "message": ...}`` (and raises it). Then the program prints how
its run ended (``{"outcome": ...}``, or ``{"refused": TYPE, "message": ...}``), closes the agent
and prints ``{"closed": PID}``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from tests.programs.durable_handlers import describe, emit
from toolvisor import Agent, CallContext, Durability, Tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.durable import RunStore, StaleLeaseError
from toolvisor.testing import ScriptedModel, call, calls


def work_tool(fifo: Path) -> Tool:
    """``work``: block on ``fifo``, then journal one step."""
    def work(arguments: dict[str, Any], ctx: CallContext) -> str:
        effects = ctx.durable_effects()
        emit({"blocked": effects.run_id})
        fifo.read_text(encoding="utf-8")
        try:
            effects.run_json("after", 0, lambda _: "worked")
        except StaleLeaseError as exc:
            emit({"journal": type(exc).__name__, "message": str(exc)})
            raise
        emit({"journal": "ok"})
        return "worked"
    return Tool("work", handler=work)


def say_what_work_returned(request: ModelRequest) -> ModelResponse:
    (result,) = [m.content for m in request.messages if isinstance(m, ToolResultMessage)]
    return ModelResponse(text=f"work said {result}")


def fenced_agent(store: str | RunStore, fifo: Path) -> Agent:
    """The agent of both hosts: the process's, and the test's that takes the run over."""
    return Agent(ScriptedModel([calls(call("work", id="c_work")), say_what_work_returned]),
                 [work_tool(fifo)], durability=Durability(store=store, lease_ttl=600))


def main(store: str, fifo: str) -> None:
    with fenced_agent(store, Path(fifo)) as agent:
        try:
            emit({"outcome": describe(agent.run("go", wait_for=120))})
        except StaleLeaseError as exc:
            emit({"refused": type(exc).__name__, "message": str(exc)})
    emit({"closed": os.getpid()})


if __name__ == "__main__":
    main(*sys.argv[1:])
