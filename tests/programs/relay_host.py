"""A host program whose writer agent relays its researcher child's question or key, for the
restart tests:
``python -m tests.programs.relay_host SCENARIO PHASE STORE WORKDIR [RUN_ID or ANSWER]``.

``question``: the child asks which year, then records the answer with its ``record`` tool;
``key``: the child's ``hook`` tool waits on a completion key. Phase ``first`` runs the writer
until it suspends on what its child relays, prints it, and blocks (the test kills it);
``answer`` resumes the parent with an answer (2025, or the last argument) in a new process
(``answer-blocks``: the child's ``record`` then blocks, for the test to kill that host too),
``resolve`` resolves the child's key there, and ``cancel`` cancels the parent. Each model
request and side effect of the child appends a line to ``steps.log``, so the test counts them.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from toolvisor import Agent, AskUser, CallContext, Ok, Pending, Suspended, Tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.testing import FunctionModel, call, calls


def emit(data: dict[str, Any]) -> None:
    print(json.dumps(data), flush=True)


def append_line(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write(line + "\n")


def results(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if isinstance(m, ToolResultMessage)]


def agents(scenario: str, store: str, workdir: str,
           block: bool = False) -> tuple[Agent, Agent]:
    """The researcher (the child's host) and the writer, whose tool names the researcher;
    with ``block``, the child's ``record`` blocks after its side effect."""
    log = Path(workdir) / "steps.log"

    def researcher_model(request: ModelRequest) -> ModelResponse:
        got = results(request)
        append_line(log, f"child-model-{len(got) + 1}")
        if scenario == "key":
            return calls(call("hook", id="h")) if not got else \
                ModelResponse(text=f"hook said {got[0]}")
        if not got:
            return calls(call("ask", id="q"))
        if len(got) == 1:
            return calls(call("record", {"year": got[0]}, id="rec"))
        return ModelResponse(text=f"report for {got[0]}")

    def ask(arguments: dict[str, Any]) -> AskUser:
        return AskUser("Which year?", options=("2024", "2025"))

    def record(arguments: dict[str, Any]) -> Ok:
        append_line(log, f"record {arguments['year']}")
        if block:
            emit({"blocked": "record"})
            threading.Event().wait()
        return Ok("recorded")

    def hook(arguments: dict[str, Any], ctx: CallContext) -> Pending:
        append_line(log, "hook")
        ctx.completion_key()
        return Pending()

    def writer_model(request: ModelRequest) -> ModelResponse:
        got = results(request)
        return calls(call("research", {"prompt": "dig"}, id="r")) if not got else \
            ModelResponse(text=f"wrote: {got[0]}")

    researcher = Agent(FunctionModel(researcher_model),
                       [Tool(name="ask", handler=ask), Tool(name="record", handler=record),
                        Tool(name="hook", handler=hook)], store=store, name="researcher")
    writer = Agent(FunctionModel(writer_model),
                   [researcher.as_tool(name="research", description="dig")], store=store,
                   name="writer")
    return researcher, writer


def main(scenario: str, phase: str, store: str, workdir: str, run_id: str = "") -> None:
    researcher, writer = agents(scenario, store, workdir, block=phase == "answer-blocks")
    saved = Path(workdir) / "suspended.json"
    with researcher, writer:
        if phase == "first":
            outcome = writer.run("write", wait_for=60)
            assert isinstance(outcome, Suspended)
            saved.write_text(outcome.model_dump_json(), encoding="utf-8")
            (child,) = [r.run_id for r in researcher.store.runs()  # type: ignore[union-attr]
                        if r.run_id != outcome.run_id]
            emit({"parent": outcome.run_id, "child": child, "keys": outcome.keys,
                  "questions": [q.question for q in outcome.questions]})
            threading.Event().wait()
        elif phase.startswith("answer"):  # the Suspended the first host gave, kept
            asked = Suspended.model_validate_json(saved.read_text(encoding="utf-8"))
            emit({"outcome": writer.resume(asked, run_id or "2025", wait_for=60).text})
        elif phase == "resolve":
            waiting = writer.resume_run(run_id, wait_for=60)
            assert isinstance(waiting, Suspended)
            (key,) = waiting.keys.values()
            emit({"keys": waiting.keys, "resolved": writer.resolve(key, ok="pong")})
            emit({"outcome": writer.resume_run(run_id, wait_for=60).text})
        else:
            cancelled = writer.cancel_run(run_id, wait_for=60)
            child = json.loads(Path(workdir, "child").read_text(encoding="utf-8"))
            emit({"parent": cancelled.status,
                  "child": researcher.resume_run(child, wait_for=60).status})


if __name__ == "__main__":
    main(*sys.argv[1:])
