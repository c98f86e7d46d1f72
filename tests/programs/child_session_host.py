"""A host program whose writer agent runs a researcher agent as a child session, for the crash
tests: ``python -m tests.programs.child_session_host SCENARIO PHASE STORE WORKDIR [RUN_ID]``.

``running``: the first host blocks inside the child's ``dig`` call (after its side effect);
``finished``: it blocks in the parent's handler after the child completed. Either way the test
kills it, then ``resume`` re-attaches the parent to the same child. Each side effect and each
model request of the child appends a line to ``steps.log``, so the test counts them.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from toolvisor import Agent, CallContext, Ok, Tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.testing import FunctionModel, call, calls


def emit(data: dict[str, Any]) -> None:
    print(json.dumps(data), flush=True)


def append_line(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write(line + "\n")


def seen(request: ModelRequest) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in request.messages
            if isinstance(m, ToolResultMessage)}


def agents(scenario: str, phase: str, store: str, workdir: str) -> tuple[Agent, Agent]:
    """The researcher (the child's host) and the writer (the parent's), on one store."""
    log = Path(workdir) / "steps.log"
    block = phase == "first"

    def researcher_model(request: ModelRequest) -> ModelResponse:
        results = seen(request)
        append_line(log, f"child-model-{len(results) + 1}")
        if not results:
            return calls(call("dig", id="c_dig"))
        return ModelResponse(text=f"found: {results['c_dig']}")

    def dig(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        append_line(log, "dig")
        if block and scenario == "running":
            emit({"blocked": "dig", "child": ctx.session_id})
            threading.Event().wait()
        return Ok("gold")

    def delegate(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert ctx.sessions is not None
        emit({"parent": ctx.session_id})
        outcome = ctx.sessions.start_turn("research", agent=researcher)
        if block and scenario == "finished":
            emit({"blocked": "after-child", "child": outcome.run_id})
            threading.Event().wait()
        return Ok(f"{outcome.run_id} {outcome.text}")

    def writer_model(request: ModelRequest) -> ModelResponse:
        results = seen(request)
        if not results:
            return calls(call("delegate", id="c_delegate"))
        return ModelResponse(text=f"done: {results['c_delegate']}")

    researcher = Agent(FunctionModel(researcher_model), [Tool(name="dig", handler=dig)],
                       store=store, name="researcher")
    writer = Agent(FunctionModel(writer_model), [Tool(name="delegate", handler=delegate)],
                   store=store, name="writer")
    return researcher, writer


def main(scenario: str, phase: str, store: str, workdir: str, run_id: str | None = None) -> None:
    researcher, writer = agents(scenario, phase, store, workdir)
    with researcher, writer:
        if run_id is None:
            outcome = writer.run("write", wait_for=60)
        else:
            outcome = writer.resume_run(run_id, wait_for=60)
        emit({"outcome": outcome.text})


if __name__ == "__main__":
    main(*sys.argv[1:])
