"""Background processes (``ctx.processes``) for the tests: their functions, the tools that
start and read them, and a host program a test SIGKILLs.

Functions and tools are module-level, so a ``process`` worker imports them by name. The host
program (``python -m tests.programs.process_host SCENARIO PHASE STORE WORKDIR [RUN_ID]``) prints
one JSON object a line: ``{"run_id": ...}``, ``{"blocked": ...}`` where the test kills it, and
``{"outcome": ...}``.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from toolvisor import Agent, CallContext, Err, Ok, Tool, Tracing, function_tool
from toolvisor.contract import ModelResponse
from toolvisor.testing import ScriptedModel, call, calls

QUARTER = {"type": "object", "properties": {"quarter": {"type": "string"},
                                            "log": {"type": "string"}}}
OPEN = {"type": "object"}

GATE = threading.Event()  # what gated processes wait for (set by a test)
BLOCK = threading.Event()  # set in a host's first phase: its processes and holds block
STARTED = threading.Semaphore(0)  # released by each blocking process once it ran its effect


def append_line(path: str, line: str) -> None:
    """A process's side effect: one line per execution, so a test can count executions."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")


def runs(workdir: Path, line: str) -> int:
    """How many times the process that appends ``line`` really ran."""
    log = workdir / "steps.log"
    return log.read_text(encoding="utf-8").splitlines().count(line) if log.exists() else 0


# --- what processes run ----------------------------------------------------------------------


def build_report(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """The long report: one line in the log per execution, a process event with a store."""
    if arguments.get("log"):
        append_line(arguments["log"], "build")
    if ctx.durable is not None:
        ctx.durable.emit_process_event("report_built", {"quarter": arguments["quarter"]})
    return Ok(f"report {arguments['quarter']}")


def reporting(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Reports its progress twice, then ends."""
    ctx.report_progress("half", 0.5)
    ctx.report_progress("all", 1.0)
    return Ok("reported")


@function_tool
def summary(quarter: str) -> str:
    """A short report, as a function tool (its own schema checks the arguments).

    Args:
        quarter: which quarter
    """
    return f"summary {quarter}"


async def build_report_async(arguments: dict[str, Any]) -> Ok:
    """The report, as a coroutine (``asyncio`` isolation)."""
    return Ok(f"report {arguments['quarter']}")


def until_cancelled(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Runs until its process is cancelled."""
    ctx.cancelled.wait()
    return Ok("stopped")


def gated(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Runs until the test opens ``GATE`` (or it is cancelled)."""
    while not GATE.wait(0.01):
        if ctx.cancelled.is_set():
            return Ok("cancelled")
    return Ok("opened")


def slow_once(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """A side effect that must not run twice, then (first phase) blocks until killed."""
    append_line(arguments["log"], "once")
    _block(ctx)
    return Ok("once done")


def slow_retry(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """The same, for a function started ``retryable``: it may run again after a crash."""
    append_line(arguments["log"], "retry")
    _block(ctx)
    return Ok("retry done")


def _block(ctx: CallContext) -> None:
    if BLOCK.is_set():
        STARTED.release()
        ctx.cancelled.wait()  # until the test SIGKILLs this process


# --- the tools that start and read them --------------------------------------------------------


def start_report(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Starts the report in the background; the run's state keeps its handle."""
    handle = ctx.processes.start(build_report, arguments)
    assert ctx.state is not None
    ctx.state.set("report", handle)
    return Ok("the report is being built")


def start_report_in(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Starts the report in the isolation the arguments name."""
    isolation = arguments["isolation"]
    fn: Any = {"asyncio": build_report_async, "tool": summary}.get(isolation, build_report)
    fn = reporting if arguments.get("reporting") else fn
    isolation = None if isolation == "tool" else isolation
    handle = ctx.processes.start(fn, {"quarter": arguments["quarter"]}, isolation=isolation)
    assert ctx.state is not None
    ctx.state.set("report", handle)
    return Ok("the report is being built")


def read_report(arguments: dict[str, Any], ctx: CallContext) -> Ok | Err | None:
    """What the report process returned (waits for it)."""
    assert ctx.state is not None
    return ctx.processes.wait(ctx.state.get("report"))


async def read_report_async(arguments: dict[str, Any], ctx: CallContext) -> Ok | Err | None:
    """The same, from an ``async def`` handler."""
    assert ctx.state is not None
    return await ctx.processes.wait_async(ctx.state.get("report"))


def chat(arguments: dict[str, Any]) -> Ok:
    """A turn in between."""
    return Ok("meanwhile")


def start_two(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Starts ``slow_once`` (plain) and ``slow_retry`` (``retryable``)."""
    assert ctx.state is not None
    log = {"log": arguments["log"]}
    ctx.state.set("once", ctx.processes.start(slow_once, log))
    ctx.state.set("retry", ctx.processes.start(slow_retry, log, retryable=True))
    return Ok("started")


def hold(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Waits for the report, if there is one; (first phase) says it is blocked once the
    processes ran their effects, and blocks."""
    assert ctx.state is not None
    if ctx.state.get("report") is not None:
        ctx.processes.wait(ctx.state.get("report"))
    if BLOCK.is_set():
        for _ in range(arguments.get("wait_for", 0)):
            STARTED.acquire()
        emit({"blocked": "hold"})
        threading.Event().wait()  # until the test SIGKILLs this process
    return Ok("held")


def read_both(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """How each of ``start_two``'s processes ended."""
    assert ctx.state is not None
    ended = {name: ctx.processes.wait(ctx.state.get(name)) for name in ("once", "retry")}
    return Ok({name: result.value if isinstance(result, Ok) else result.reason.code
               for name, result in ended.items() if result is not None})


def start_varying(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Starts the report for a quarter that differs between phases (blocked in the first until
    killed): run again after the crash, it starts another process where it started one."""
    handle = ctx.processes.start(build_report, {"quarter": "Q1" if BLOCK.is_set() else "Q2"})
    if BLOCK.is_set():
        emit({"blocked": "varying"})
        threading.Event().wait()  # until the test SIGKILLs this process
    return Ok(handle)


TOOLS = [Tool(name="start_report", handler=start_report, input_schema=QUARTER),
         Tool(name="start_varying", handler=start_varying, input_schema=OPEN, retryable=True),
         Tool(name="start_report_in", handler=start_report_in, input_schema=OPEN),
         Tool(name="start_report_remote", handler=start_report, input_schema=QUARTER,
              isolation="process"),
         Tool(name="read_report", handler=read_report, input_schema=OPEN),
         Tool(name="read_report_async", handler=read_report_async, input_schema=OPEN),
         Tool(name="read_report_remote", handler=read_report, input_schema=OPEN,
              isolation="process"),
         Tool(name="chat", handler=chat, input_schema=OPEN),
         Tool(name="start_two", handler=start_two, input_schema=OPEN),
         Tool(name="hold", handler=hold, input_schema=OPEN, retryable=True),
         Tool(name="read_both", handler=read_both, input_schema=OPEN)]


# --- the host program -------------------------------------------------------------------------


def emit(data: dict[str, Any]) -> None:
    print(json.dumps(data), flush=True)


def script(scenario: str, log: str) -> list[ModelResponse]:
    """``report``: the report started, a hold (where the first phase is killed), the report
    read; ``interrupted``: two processes started, a hold while they run, both read."""
    if scenario == "varying":
        return [calls(call("start_varying", {}, id="c_read")), ModelResponse(text="done")]
    if scenario == "report":
        return [calls(call("start_report", {"quarter": "Q3", "log": log}, id="c_start")),
                calls(call("hold", {}, id="c_hold")),
                calls(call("read_report", {}, id="c_read")),
                ModelResponse(text="done")]
    return [calls(call("start_two", {"log": log}, id="c_start")),
            calls(call("hold", {"wait_for": 2}, id="c_hold")),
            calls(call("read_both", {}, id="c_read")),
            ModelResponse(text="done")]


def main(scenario: str, phase: str, store: str, workdir: str, run_id: str | None = None) -> None:
    """Run until killed (``first``), or resume the run (``resume``)."""
    if phase == "first":
        BLOCK.set()

    def on_progress(started: str, event: str, data: dict[str, Any]) -> None:
        if event == "turn_started" and data.get("turn") == 1 and phase == "first":
            emit({"run_id": started})

    model = ScriptedModel(script(scenario, str(Path(workdir) / "steps.log")))
    with Agent(model, TOOLS, store=store, tracing=Tracing(on_progress=on_progress)) as agent:
        if phase == "resume":
            assert run_id is not None
            outcome = agent.resume_run(run_id, wait_for=60)
        else:
            outcome = agent.run("go", wait_for=60)
        read = [m.content for m in outcome.messages if getattr(m, "tool_call_id", None)
                == "c_read"]
        emit({"outcome": {"kind": outcome.kind, "read": read}})


if __name__ == "__main__":
    main(*sys.argv[1:])
