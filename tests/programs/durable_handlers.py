"""Tools, a model and a small host program for the durable-run tests.

The host program runs in a subprocess (``python -m tests.programs.durable_handlers SCENARIO PHASE
STORE WORKDIR [RUN_ID]``) so a test can SIGKILL it mid-run and resume the run in a new process.
It prints one JSON object per line on stdout: ``{"run_id": ...}`` when the run starts,
``{"blocked": ...}`` when it reached the point where the test kills it, and ``{"outcome": ...}``.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolvisor import Agent, CallContext, Ok, Pending, Suspended, Tool, Tracing
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.testing import FunctionModel, call, calls

RECORD_SCHEMA = {"type": "object", "required": ["log"], "properties": {"log": {"type": "string"}}}


def append_line(path: str, line: str) -> None:
    """A step's side effect: one line per execution, so a test can count executions."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")


def step_runs(path: Path, step: str) -> int:
    """How many times ``step`` really ran (its fn appended a line)."""
    if not path.exists():
        return 0
    return path.read_text(encoding="utf-8").splitlines().count(step)


def fast(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Finishes at once, after one journaled step."""
    log = arguments["log"]
    ctx.durable_effects().run_json("fast", log, lambda p: append_line(p, "fast"))
    return Ok("fast done")


class Gate:
    """Where ``slow`` waits: after its first step, until ``fast``'s outcome is checkpointed
    (``ordered``: so a crashed and an uninterrupted run take the same steps), and in the first
    phase until killed (``block``)."""

    def __init__(self, *, ordered: bool, block: bool) -> None:
        self.ordered = ordered
        self.block = block
        self.fast_saved = threading.Event()  # set once fast's outcome is checkpointed

    def slow(self, arguments: dict[str, Any], ctx: CallContext) -> Ok:
        log = arguments["log"]
        effects = ctx.durable_effects()
        effects.run_json("slow-before", log, lambda p: append_line(p, "slow-before"))
        if self.ordered:
            self.fast_saved.wait()
        if self.block:
            emit({"blocked": "slow"})
            threading.Event().wait()  # until the test SIGKILLs this process
        effects.run_json("slow-after", log, lambda p: append_line(p, "slow-after"))
        return Ok("slow done")


class Once:
    """The at-most-once batch: a side effect of a plain tool (``charge``), of a retryable one
    (``fetch``) and a journaled one (``ship``); in the first phase each blocks after its side
    effect until the process is killed, and ``{"blocked": "once"}`` is printed once all three
    have run theirs."""

    def __init__(self, block: bool) -> None:
        self.block = block
        self.arrived = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._count = 0

    def _hold(self) -> None:
        if not self.block:
            return
        with self._lock:
            self._count += 1
            if self._count == 3:
                emit({"blocked": "once"})
        threading.Event().wait()  # until the test SIGKILLs this process

    def charge(self, arguments: dict[str, Any]) -> Ok:
        append_line(arguments["log"], "charge")
        self._hold()
        return Ok("charged")

    def fetch(self, arguments: dict[str, Any]) -> Ok:
        append_line(arguments["log"], "fetch")
        self._hold()
        return Ok("fetched")

    def ship(self, arguments: dict[str, Any], ctx: CallContext) -> Ok:
        log = arguments["log"]
        ctx.durable_effects().run_json("ship", log, lambda p: append_line(p, "ship"))
        self._hold()
        return Ok("shipped")


def once_model(log: str) -> Any:
    """Turn 1: ``charge``, ``fetch`` and ``ship`` in one batch; turn 2: what each returned."""
    def respond(request: ModelRequest) -> ModelResponse:
        seen = results(request)
        if not seen:
            return calls(*(call(name, {"log": log}, id=f"c_{name}")
                           for name in ("charge", "fetch", "ship")))
        return ModelResponse(text=json.dumps(seen, sort_keys=True))
    return respond


def webhook(arguments: dict[str, Any], ctx: CallContext) -> Pending:
    """Registers a webhook (journaled) and parks the call until it is resolved."""
    key = ctx.completion_key()
    log = arguments["log"]
    ctx.durable_effects().run_json("register", [log, key], lambda a: append_line(a[0],
                                                                                 "register"))
    return Pending(deadline=600)


def remote(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Runs in a worker process: a journaled step, then (while the FIFO ``blocked.fifo`` is
    beside the log) says so through the FIFO and waits until the call is cancelled (its host
    killed), then a second journaled step."""
    log = arguments["log"]
    effects = ctx.durable_effects()
    effects.run_json("remote-before", log, lambda p: append_line(p, "remote-before"))
    fifo = Path(log).parent / "blocked.fifo"
    if fifo.exists():
        fifo.write_text("blocked", encoding="utf-8")
        ctx.cancelled.wait()
    effects.run_json("remote-after", log, lambda p: append_line(p, "remote-after"))
    return Ok("remote done")


def results(request: ModelRequest) -> dict[str, str]:
    """The tool results the model was shown, by call id."""
    return {m.tool_call_id: m.content for m in request.messages
            if isinstance(m, ToolResultMessage)}


def batch_model(log: str) -> Any:
    """Turn 1: ``fast`` and ``slow`` in one parallel batch; turn 2: the final answer."""
    def respond(request: ModelRequest) -> ModelResponse:
        seen = results(request)
        if not seen:
            return calls(call("fast", {"log": log}, id="c_fast"),
                         call("slow", {"log": log}, id="c_slow"))
        return ModelResponse(text=f"done: {seen['c_fast']} / {seen['c_slow']}")
    return respond


def one_call_model(tool: str, call_id: str, answer: str) -> Callable[[str], Any]:
    """Turn 1: ``tool`` once (as ``call_id``); turn 2: ``answer`` and what it returned."""
    def model(log: str) -> Any:
        def respond(request: ModelRequest) -> ModelResponse:
            seen = results(request)
            if not seen:
                return calls(call(tool, {"log": log}, id=call_id))
            return ModelResponse(text=f"{answer} {seen[call_id]}")
        return respond
    return model


webhook_model = one_call_model("webhook", "c_hook", "hook said")
remote_model = one_call_model("remote", "c_remote", "done:")


def emit(data: dict[str, Any]) -> None:
    print(json.dumps(data), flush=True)


def describe(outcome: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"kind": outcome.kind}
    if isinstance(outcome, Suspended):
        data.update(run_id=outcome.run_id, keys=outcome.keys)
    else:
        data["text"] = outcome.text if outcome.status == "completed" \
            else getattr(outcome, "error", None)
    return data


def scenario_agent(scenario: str, phase: str, store: str, workdir: str) -> Agent:
    """The agent of ``scenario`` in ``phase``: its host program's, or a test's resuming one."""
    log = str(Path(workdir) / "steps.log")
    gate = Gate(ordered=phase in ("first", "straight") and scenario == "batch",
                block=phase == "first" and scenario == "batch")

    def on_progress(started: str, event: str, data: dict[str, Any]) -> None:
        if event == "turn_started" and data.get("turn") == 1 and phase != "resume":
            emit({"run_id": started})
        if event == "call_finished" and data.get("call_id") == "c_fast":
            gate.fast_saved.set()

    models = {"batch": batch_model, "webhook": webhook_model, "once": once_model,
              "remote": remote_model}
    model = FunctionModel(models[scenario](log))
    once = Once(block=phase == "first" and scenario == "once")
    tools = [Tool(name="fast", handler=fast, input_schema=RECORD_SCHEMA),
             Tool(name="slow", handler=gate.slow, input_schema=RECORD_SCHEMA),
             Tool(name="webhook", handler=webhook, input_schema=RECORD_SCHEMA),
             Tool(name="charge", handler=once.charge, input_schema=RECORD_SCHEMA),
             Tool(name="fetch", handler=once.fetch, input_schema=RECORD_SCHEMA, retryable=True),
             Tool(name="ship", handler=once.ship, input_schema=RECORD_SCHEMA),
             Tool(name="remote", handler=remote, input_schema=RECORD_SCHEMA,
                  isolation="process")]
    return Agent(model, tools, store=store, tracing=Tracing(on_progress=on_progress))


def main(scenario: str, phase: str, store: str, workdir: str, run_id: str | None = None) -> None:
    """Run (``first``: until killed; ``straight``: uninterrupted) or resume (``resume``)."""
    with scenario_agent(scenario, phase, store, workdir) as agent:
        if phase == "resume":
            assert run_id is not None
            outcome = agent.resume_run(run_id, wait_for=60)
        else:
            outcome = agent.run("go", wait_for=60)
        emit({"outcome": describe(outcome)})
        if phase == "first" and scenario == "webhook":
            emit({"blocked": "suspended"})
            threading.Event().wait()  # a host waiting for the resolution, until killed


if __name__ == "__main__":
    main(*sys.argv[1:])
