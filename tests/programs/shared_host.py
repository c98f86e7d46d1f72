"""One agent process of the shared-store tests, driven line by line over stdin and stdout.

``python -m tests.programs.shared_host STORE`` opens an ``Agent`` on the SQLite file STORE with one
tool, ``hook``, that takes a completion key and returns ``Pending``; its model's script calls
``hook``, then says what it returned (a host that picks a run up goes on at the run's turn).
The program prints ``{"ready": PID}``, then one JSON line for each command it reads:

- ``run``: start a run; ``{"outcome": ...}`` (``Suspended`` with its ``run_id`` and ``keys``).
- ``resume RUN_ID``: ``agent.resume_run``; ``{"outcome": ...}``, or
  ``{"refused": "RunLeasedError", "message": ...}`` while another process hosts the run.
- ``resolve KEY JSON``: ``agent.resolve(KEY, ok=JSON)``; ``{"resolved": "accepted"}`` (or
  ``"already_resolved"``, ``"unknown_or_revoked"``).
- ``close`` (or the end of stdin): closes the agent (its leases are released), prints
  ``{"closed": PID}`` and exits.

Between commands the agent goes on hosting its runs (its key waiters watch the store).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from tests.programs.durable_handlers import describe, emit
from toolvisor import Agent, CallContext, Durability, Pending, RunLeasedError, Tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.testing import ScriptedModel, call, calls


def waiting_on_a_key(arguments: dict[str, Any], ctx: CallContext) -> Pending:
    ctx.completion_key()
    return Pending(deadline=600)


HOOK = Tool("hook", handler=waiting_on_a_key)


def say_what_hook_returned(request: ModelRequest) -> ModelResponse:
    (result,) = [m.content for m in request.messages if isinstance(m, ToolResultMessage)]
    return ModelResponse(text=f"hook said {result}")


SCRIPT = [calls(call("hook", id="c_hook")), say_what_hook_returned]


def serve(agent: Agent) -> None:
    for line in sys.stdin:
        command, *args = line.split(maxsplit=2)
        if command == "close":
            return
        if command == "run":
            emit({"outcome": describe(agent.run("go", wait_for=30))})
        elif command == "resume":
            try:
                emit({"outcome": describe(agent.resume_run(args[0], wait_for=30))})
            except RunLeasedError as exc:
                emit({"refused": type(exc).__name__, "message": str(exc)})
        elif command == "resolve":
            emit({"resolved": agent.resolve(args[0], ok=json.loads(args[1]))})
        else:
            raise SystemExit(f"unknown command {command!r}")


def main(store: str) -> None:
    with Agent(ScriptedModel(SCRIPT), [HOOK],
               durability=Durability(store=store, lease_ttl=30)) as agent:
        emit({"ready": os.getpid()})
        serve(agent)
    emit({"closed": os.getpid()})


if __name__ == "__main__":
    main(*sys.argv[1:])
