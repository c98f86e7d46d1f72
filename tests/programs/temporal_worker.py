"""A Temporal worker process for the crash tests: ``python -m tests.programs.temporal_worker
TARGET TASK_QUEUE [SERVES]``, an ``AgentWorker`` for :data:`AGENT` (sticky timeout 1 s,
``serves`` ``all`` by default) until killed.

It prints ``ready PID`` once it polls. Every tool call appends ``NAME CALL_ID PID`` to the
file ``ran`` in the folder the prompt names (the side effect a test counts). In a process
started with ``TOOLVISOR_TEST_STALL=1``, ``stall`` and ``stall_again`` hang (until the
process is killed); elsewhere they answer at once. The model, a function of the transcript
(so any worker's model gives the same answers): prompt ``batch DIR`` calls ``note``,
``stall`` and ``stall_again`` at once; ``ask DIR`` calls ``note``, then ``approve`` (a
question); ``hold DIR`` calls ``hold``, which waits until the process sets :data:`RELEASE`;
then it says what the calls returned.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Literal, cast

from temporalio.client import Client

from toolvisor import (
    AskUser,
    CallAttempt,
    ContinueRun,
    Decision,
    RetryAfter,
    ToolError,
    function_tool,
)
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from toolvisor.temporal import AgentWorker, TemporalAgent
from toolvisor.testing import FunctionModel, call, calls

Serves = Literal["all", "workflows", "activities"]
_NEVER = threading.Event()  # what a stalled call waits on: nothing sets it
RELEASE = threading.Event()  # set by a test, in its own process, to let ``hold`` return


def _ran(folder: str, name: str, call_id: str) -> None:
    with open(Path(folder) / "ran", "a", encoding="utf-8") as out:
        out.write(f"{name} {call_id} {os.getpid()}\n")


@function_tool(timeout=30)
def note(folder: str, call_id: str) -> str:
    """Notes that it ran."""
    _ran(folder, "note", call_id)
    return "noted"


def _stall(folder: str, name: str, call_id: str) -> str:
    _ran(folder, name, call_id)
    if os.environ.get("TOOLVISOR_TEST_STALL") == "1":
        _NEVER.wait(60)
    return f"{name} done"


@function_tool(timeout=30)
def stall(folder: str, call_id: str) -> str:
    """Hangs in a stalling worker; not retryable."""
    return _stall(folder, "stall", call_id)


@function_tool(timeout=30, retryable=True)
def stall_again(folder: str, call_id: str) -> str:
    """Hangs in a stalling worker; retryable."""
    return _stall(folder, "stall_again", call_id)


@function_tool(timeout=30)
def hold(folder: str, call_id: str) -> str:
    """Waits until released."""
    _ran(folder, "hold", call_id)
    RELEASE.wait(30)
    return "held"


@function_tool
def approve() -> AskUser:
    """Asks whether to go on."""
    return AskUser("Go on?", options=("yes", "no"))


def respond(request: ModelRequest) -> ModelResponse:
    """The script, decided by the transcript alone."""
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    prompt = str(next(m.content for m in request.messages if isinstance(m, UserMessage)))
    kind, _, folder = prompt.partition(" ")
    if kind == "batch" and not results:
        return calls(*(call(name, {"folder": folder, "call_id": cid}, id=cid)
                       for name, cid in (("note", "c1"), ("stall", "c2"),
                                         ("stall_again", "c3"))))
    if kind == "hold" and not results:
        return calls(call("hold", {"folder": folder, "call_id": "c1"}, id="c1"))
    if kind == "ask" and not results:
        return calls(call("note", {"folder": folder, "call_id": "c1"}, id="c1"))
    if kind == "ask" and len(results) == 1:
        return calls(call("approve", id="c2"))
    said = sorted(f"{m.tool_call_id}={m.content}" for m in results)
    return ModelResponse(text="; ".join(said))


def on_tool_error(attempt: CallAttempt, error: object) -> Decision:
    """Retry a retryable call its worker lost; any other failure goes to the model."""
    lost = isinstance(error, ToolError) and error.code == "worker_lost"
    return RetryAfter(0) if lost and attempt.retryable else ContinueRun()


AGENT = TemporalAgent("crashes", FunctionModel(respond),
                      [note, stall, stall_again, hold, approve], on_tool_error=on_tool_error,
                      heartbeat_timeout=1.0)
STICKY_TIMEOUT = 1.0  # a killed worker's runs go on elsewhere after this


async def main(target: str, task_queue: str, serves: Serves) -> None:
    client = await Client.connect(target)
    async with AgentWorker(client, [AGENT], task_queue=task_queue, process_workers=1,
                           serves=serves, sticky_timeout=STICKY_TIMEOUT):
        print(f"ready {os.getpid()}", flush=True)
        await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], cast(Serves, (sys.argv[3:] or ["all"])[0])))
