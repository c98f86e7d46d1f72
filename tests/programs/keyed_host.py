"""A host program whose tools write down their ``ctx.idempotency_key``, for the crash test.

``python -m tests.programs.keyed_host PHASE STORE WORKDIR [RUN_ID]``: turn 1 calls ``charge``
(retryable: a restored run runs it again) and ``notify``; each appends ``<tool> <key>`` to
``keys.log`` in WORKDIR. In phase ``first`` ``charge`` then waits for ``notify``'s key, prints
``{"blocked": "charge"}``
and waits until the test SIGKILLs the process; in phase ``resume`` the run is resumed by its
id and its outcome printed. Lines on stdout are JSON: ``{"run_id"}``, ``{"blocked"}``,
``{"outcome"}``.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from toolvisor import Agent, CallContext, Ok, Tool, Tracing
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.testing import FunctionModel, call, calls


def emit(data: dict[str, Any]) -> None:
    print(json.dumps(data), flush=True)


def keyed_agent(phase: str, store: str, workdir: str) -> Agent:
    log = Path(workdir) / "keys.log"
    notified = threading.Event()

    def write_down(name: str, ctx: CallContext) -> str:
        key = ctx.idempotency_key
        assert key is not None
        with log.open("a", encoding="utf-8") as out:
            out.write(f"{name} {key}\n")
        return key

    def charge(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        key = write_down("charge", ctx)
        if phase == "first":
            notified.wait()  # both keys are written down before the test kills the host
            emit({"blocked": "charge"})
            threading.Event().wait()  # until the test SIGKILLs this process
        return Ok(key)

    def notify(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        key = write_down("notify", ctx)
        notified.set()
        return Ok(key)

    def respond(request: ModelRequest) -> ModelResponse:
        seen = {m.tool_call_id: m.content for m in request.messages
                if isinstance(m, ToolResultMessage)}
        if not seen:
            return calls(call("charge", {}, id="c1"), call("notify", {}, id="c2"))
        return ModelResponse(text=json.dumps(seen, sort_keys=True))

    def on_progress(run_id: str, event: str, data: dict[str, Any]) -> None:
        if event == "turn_started" and data.get("turn") == 1 and phase == "first":
            emit({"run_id": run_id})

    schema = {"type": "object"}
    tools = [Tool(name="charge", handler=charge, input_schema=schema, retryable=True),
             Tool(name="notify", handler=notify, input_schema=schema)]
    return Agent(FunctionModel(respond), tools, store=store,
                 tracing=Tracing(on_progress=on_progress))


def main(phase: str, store: str, workdir: str, run_id: str | None = None) -> None:
    with keyed_agent(phase, store, workdir) as agent:
        if phase == "resume":
            assert run_id is not None
            outcome = agent.resume_run(run_id, wait_for=60)
        else:
            outcome = agent.run("go", wait_for=60)
        emit({"outcome": {"kind": outcome.kind, "text": getattr(outcome, "text", None)}})


if __name__ == "__main__":
    main(*sys.argv[1:])
