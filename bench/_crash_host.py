"""The host process of the soak's crash phase: durable runs that the soak SIGKILLs mid-batch.

``python -m bench._crash_host first PLAN STORE`` starts every run of the plan (a JSON
:class:`HostPlan`) on one agent with the SQLite store ``STORE``; each run is one batch of tool
calls and a final answer. In this phase the calls planned ``stuck`` block after their side
effects so far, and once every ``finish`` call's result is checkpointed and every ``stuck``
call is blocked, the host prints ``{"ready": {run name: run id}}`` and waits to be killed.
``python -m bench._crash_host resume PLAN STORE RUN_ID...`` resumes those runs in a fresh
process and prints ``{"outcome": ...}`` for each, with every tool result of its transcript.

Every handler execution appends ``<call id> exec`` to the plan's side-effect log (the
unjournaled side effect); a ``journaled`` call also runs ``step-1`` and ``step-2`` through
``ctx.durable_effects().run_json`` (``<call id> step-N``), and blocks between the two.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

from toolvisor import Agent, CallContext, Ok, Timeouts, Tool, Tracing
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from toolvisor.machine import Mode
from toolvisor.testing import FunctionModel, call, calls

Kind: TypeAlias = Literal["plain", "retryable", "journaled"]
KINDS: tuple[Kind, ...] = ("plain", "retryable", "journaled")
"""The tools: ``plain`` is not retryable, ``retryable`` is, ``journaled`` journals its steps."""

Fate: TypeAlias = Literal["finish", "stuck", "later"]
"""Where a call is when its host is killed: finished (and checkpointed), blocked mid-call, or
not started yet (``sequential`` mode: the calls after the blocked one)."""

FINAL_TEXT = "done"
RUN_TIMEOUT = 60.0
"""The hosts' tool timeout and resume wait: far beyond what a crash phase takes."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CrashCall(_Frozen):
    id: str
    kind: Kind
    fate: Fate


class CrashRun(_Frozen):
    """One run: its prompt (``name``) and the one batch its model asks for."""

    name: str
    calls: tuple[CrashCall, ...]


class HostPlan(_Frozen):
    """What one crashed host runs, and where its side-effect log is."""

    mode: Mode
    effects: str
    runs: tuple[CrashRun, ...]


def ok_text(call_id: str) -> str:
    """What every call that runs to its end returns."""
    return f"{call_id} ok"


def emit(data: dict[str, Any]) -> None:
    print(json.dumps(data), flush=True)


class Host:
    """The tools of one host process and, in the ``first`` phase, where they stop.

    ``_arrived`` is called on the calls' threads and ``on_progress`` on the orchestrator's;
    the lock orders them, and ``ready`` is printed once.
    """

    def __init__(self, plan: HostPlan, *, first: bool) -> None:
        self._plan = plan
        self._first = first
        self._run_names = {c.id: r.name for r in plan.runs for c in r.calls}
        self._lock = threading.Lock()
        planned = [c for r in plan.runs for c in r.calls] if first else []
        self._unfinished = {c.id for c in planned if c.fate == "finish"}
        self._unblocked = {c.id for c in planned if c.fate == "stuck"}
        self._stuck = frozenset(self._unblocked)
        self._run_ids: dict[str, str] = {}
        self._told = False

    def tools(self) -> list[Tool]:
        return [Tool(name="plain", handler=self.unjournaled),
                Tool(name="retryable", handler=self.unjournaled, retryable=True),
                Tool(name="journaled", handler=self.journaled)]

    def unjournaled(self, arguments: dict[str, Any], ctx: CallContext) -> Ok:
        call_id = self._executed(ctx)
        self._arrived(call_id, ctx)
        return Ok(ok_text(call_id))

    def journaled(self, arguments: dict[str, Any], ctx: CallContext) -> Ok:
        call_id = self._executed(ctx)
        effects = ctx.durable_effects()
        effects.run_json("step-1", call_id, lambda i: self._append(f"{i} step-1"))
        self._arrived(call_id, ctx)
        effects.run_json("step-2", call_id, lambda i: self._append(f"{i} step-2"))
        return Ok(ok_text(call_id))

    def on_progress(self, run_id: str, event: str, data: dict[str, Any]) -> None:
        """A ``finish`` call's result is checkpointed once ``call_finished`` is reported."""
        if self._first and event == "call_finished":
            with self._lock:
                self._unfinished.discard(data["call_id"])
                self._tell_ready()

    def _executed(self, ctx: CallContext) -> str:
        call_id = ctx.tool_call_id
        assert call_id is not None
        self._append(f"{call_id} exec")
        return call_id

    def _append(self, line: str) -> None:
        """One side effect: one line, one ``write`` of an append-only file."""
        with open(self._plan.effects, "a", encoding="utf-8") as log:
            log.write(line + "\n")

    def _arrived(self, call_id: str, ctx: CallContext) -> None:
        """In the first phase a ``stuck`` call blocks here until the process is killed."""
        if not self._first:
            return
        assert ctx.session_id is not None
        with self._lock:
            self._run_ids[self._run_names[call_id]] = ctx.session_id
            self._unblocked.discard(call_id)
            self._tell_ready()
        if call_id in self._stuck:
            threading.Event().wait()

    def _tell_ready(self) -> None:
        """Under the lock: once all are where the kill must find them, say so (once)."""
        if not (self._unfinished or self._unblocked or self._told):
            self._told = True
            emit({"ready": self._run_ids})


def model(plan: HostPlan) -> FunctionModel:
    """Asks for the run's batch (the prompt names the run), then answers ``done``."""
    batches = {r.name: r.calls for r in plan.runs}

    def respond(request: ModelRequest) -> ModelResponse | str:
        if any(isinstance(m, ToolResultMessage) for m in request.messages):
            return FINAL_TEXT
        prompt = next(m.content for m in request.messages if isinstance(m, UserMessage))
        return calls(*(call(c.kind, id=c.id) for c in batches[prompt]))

    return FunctionModel(respond)


def describe(run_id: str, outcome: Any) -> dict[str, Any]:
    """A run's outcome as the soak checks it: kind, text and every tool result."""
    return {"run_id": run_id, "kind": outcome.kind, "text": getattr(outcome, "text", None),
            "results": [[m.tool_call_id, m.is_error, m.content]
                        for m in getattr(outcome, "messages", ())
                        if isinstance(m, ToolResultMessage)]}


async def _run_all(agent: Agent, names: list[str]) -> list[Any]:
    return list(await asyncio.gather(*(agent.arun(name) for name in names)))


def main(phase: str, plan_path: str, store: str, *run_ids: str) -> None:
    with open(plan_path, encoding="utf-8") as text:
        plan = HostPlan.model_validate_json(text.read())
    host = Host(plan, first=phase == "first")
    with Agent(model(plan), host.tools(), store=store, mode=plan.mode,
               tracing=Tracing(on_progress=host.on_progress),
               timeouts=Timeouts(tool=RUN_TIMEOUT)) as agent:
        if phase == "first":  # returns only if the runs end before the kill (a failure)
            ended = asyncio.run(_run_all(agent, [r.name for r in plan.runs]))
            for outcome in ended:
                emit({"outcome": describe("", outcome)})
        else:
            for run_id in run_ids:
                emit({"outcome": describe(run_id, agent.resume_run(run_id,
                                                                   wait_for=RUN_TIMEOUT))})


if __name__ == "__main__":
    main(*sys.argv[1:])
