"""toolvisor on Temporal for ``bench.temporal``: the same script as pydantic-ai's
(``noop N``: N no-op calls at once; ``hang FILE`` / ``hang_thread FILE``: one call of a tool
that sleeps 3 s, then writes ``FILE``, with a 1 s timeout), then text."""

from __future__ import annotations

import time
from pathlib import Path

from toolvisor import function_tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from toolvisor.temporal import TemporalAgent
from toolvisor.testing import FunctionModel, call, calls


@function_tool(timeout=5)
def noop() -> str:
    """Does nothing."""
    return "ok"


def _hang(marker: str) -> str:
    time.sleep(3)
    Path(marker).write_text("landed")
    return "finished"


@function_tool(timeout=1, isolation="process")
def hang(marker: str) -> str:
    """Hangs for 3 s in a worker process, then writes ``marker``."""
    return _hang(marker)


@function_tool(timeout=1)
def hang_thread(marker: str) -> str:
    """Hangs for 3 s on a thread, then writes ``marker``."""
    return _hang(marker)


def _respond(request: ModelRequest) -> ModelResponse:
    if any(isinstance(m, ToolResultMessage) for m in request.messages):
        return ModelResponse(text="done")
    prompt = str(next(m.content for m in request.messages if isinstance(m, UserMessage)))
    kind, _, rest = prompt.partition(" ")
    if kind == "noop":
        return calls(*(call("noop", id=f"c{i}") for i in range(int(rest))))
    return calls(call(kind, {"marker": rest}, id="c0"))


AGENT = TemporalAgent("bench_toolvisor", FunctionModel(_respond, keep_requests=False),
                      [noop, hang, hang_thread])
