"""A host program for the crash test of direct completions.

``python -m tests.programs.completion_host PHASE STORE WORKDIR [RUN_ID]`` runs (``first``) or
resumes (``resume``) a durable run whose one tool ranks with a completion and then, in the first
phase, blocks until the test SIGKILLs the process. Every completion the model really answers
appends a line to ``WORKDIR/paid.log``, so a test counts the tokens paid. One JSON object per
line on stdout: ``{"blocked": ...}`` in the first phase, ``{"outcome": ...}`` on resume.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from toolvisor import Agent, CallContext, Completed, function_tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage, Usage
from toolvisor.testing import FunctionModel, call, calls

RANK_PROMPT = "Rank: otp, cooking, actors"


def emit(data: object) -> None:
    print(json.dumps(data), flush=True)


def main(phase: str, store: str, workdir: str, run_id: str | None = None) -> None:
    paid = Path(workdir) / "paid.log"

    def model(request: ModelRequest) -> ModelResponse:
        first = request.messages[0].content
        if first == RANK_PROMPT:
            with paid.open("a", encoding="utf-8") as out:
                out.write("rank\n")
            return ModelResponse(text="otp, actors, cooking",
                                 usage=Usage(input_tokens=20, output_tokens=5))
        if not any(isinstance(m, ToolResultMessage) for m in request.messages):
            return calls(call("rank", id="r1"))
        return ModelResponse(text="done")

    @function_tool
    def rank(ctx: CallContext) -> str:
        """Ranks with one completion, then (first phase) waits to be killed."""
        ranking = ctx.direct_completions.complete(RANK_PROMPT, source="rank").text or ""
        if phase == "first":
            emit({"blocked": ranking})
            threading.Event().wait()  # until the test SIGKILLs this process
        return ranking

    with Agent(FunctionModel(model), [rank], store=store) as agent:
        if phase == "first":
            agent.run("rank the results")
            return
        assert run_id is not None
        outcome = agent.resume_run(run_id)
        assert isinstance(outcome, Completed)
        results = [m.content for m in outcome.messages if isinstance(m, ToolResultMessage)]
        emit({"outcome": {"text": outcome.text, "tool": results,
                          "usage": outcome.usage.model_dump()}})


if __name__ == "__main__":
    main(*sys.argv[1:])
