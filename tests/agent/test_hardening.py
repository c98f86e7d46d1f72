"""Hardening of the agent's surface: answers that do not fit, waits that time out, cancelled runs'
calls, overdue waits. Each test is the regression test of one found problem."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.runs import cancel_arun_once
from toolvisor import (
    Agent,
    AskUser,
    CallContext,
    Completed,
    Ok,
    Pending,
    Suspended,
    Tool,
    function_tool,
)
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.durable import SqliteRunStore
from toolvisor.testing import FunctionModel, ScriptedModel, call, calls


@function_tool
def ask() -> AskUser:
    """Asks."""
    return AskUser("go on?")


def answered(request: ModelRequest) -> ModelResponse:
    results = {m.tool_call_id: m.content for m in request.messages
               if isinstance(m, ToolResultMessage)}
    if results:
        return ModelResponse(text=json.dumps(results, sort_keys=True))
    return calls(call("ask", id="q1"), call("ask", id="q2"))


def test_answers_for_unknown_or_missing_call_ids_are_refused_and_change_nothing() -> None:
    with Agent(FunctionModel(answered), [ask]) as agent:
        suspended = agent.run("go")
        assert isinstance(suspended, Suspended)
        with pytest.raises(ValueError, match=r"unknown call ids \['wrong_id'\].*\['q1', 'q2'\]"):
            agent.resume(suspended, {"wrong_id": "yes"})
        with pytest.raises(ValueError, match=r"no answer for calls \['q2'\]"):
            agent.resume(suspended, {"q1": "yes"})
        with pytest.raises(ValueError, match="pass a mapping from call id"):
            agent.resume(suspended, "yes")
        outcome = agent.resume(suspended, {"q1": "a", "q2": "b"})  # the same suspension
    assert isinstance(outcome, Completed)
    assert json.loads(outcome.text or "") == {"q1": "a", "q2": "b"}


def test_a_mapping_answer_for_one_call_must_be_keyed_or_wrapped() -> None:
    model = ScriptedModel([calls(call("ask", id="q1")), "done"])  # each run follows it
    with model, Agent(model, [ask]) as agent:
        suspended = agent.run("go")
        assert isinstance(suspended, Suspended)
        with pytest.raises(ValueError, match="wrap it as Ok"):
            agent.resume(suspended, {"approved": True})
        assert isinstance(agent.resume(suspended, Ok({"approved": True})), Completed)
        again = agent.run("go")
        assert isinstance(again, Suspended)
        assert isinstance(agent.resume(again, {"q1": {"approved": True}}), Completed)


def test_a_timeout_while_waiting_never_cancels_a_durable_run(store: SqliteRunStore) -> None:
    gate = threading.Event()
    started = threading.Event()
    run_ids: list[str] = []

    def slow(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        run_ids.append(ctx.session_id or "")  # the run's id: its calls' session
        started.set()
        gate.wait(10)
        return Ok("done")

    model = ScriptedModel([calls(call("slow", id="c1")), "finished"])
    with model, Agent(model, [Tool("slow", handler=slow)], store=store) as agent:
        with pytest.raises(TimeoutError, match="it goes on"):
            agent.run("go", wait_for=0.05)
        assert started.wait(10)  # the run went on after the wait stopped
        with pytest.raises(TimeoutError, match="it goes on"):
            agent.resume_run(run_ids[0], wait_for=0.05)
        gate.set()
        outcome = agent.resume_run(run_ids[0], wait_for=10)
    assert isinstance(outcome, Completed) and outcome.text == "finished"


def test_cancelling_a_run_sets_its_running_calls_ctx_cancelled_at_once() -> None:
    running = threading.Event()
    saw_cancel = threading.Event()

    def patient(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        running.set()
        if ctx.cancelled.wait(10):
            saw_cancel.set()
        return Ok("stopped")

    model = ScriptedModel([calls(call("patient", id="c1"))])
    with Agent(model, [Tool("patient", handler=patient, timeout=30)]) as agent:
        cancel_arun_once(agent, running)
        assert saw_cancel.wait(10)  # set by the cancel, long before the call's 30 s timeout


def test_a_wait_overdue_while_no_process_hosted_the_run_resolves_on_resume(
        tmp_path: Path) -> None:
    now = [1000.0]
    path = tmp_path / "runs.sqlite"

    def pending(arguments: dict[str, Any], ctx: CallContext) -> Pending:
        ctx.completion_key()
        return Pending(deadline=60)

    def model() -> FunctionModel:
        return FunctionModel(lambda r: "saw: " + r.messages[-1].content  # type: ignore[union-attr]
                             if isinstance(r.messages[-1], ToolResultMessage)
                             else calls(call("hook", id="c1")))

    with SqliteRunStore(path, clock=lambda: now[0], poll_interval=0.01) as store, \
            Agent(model(), [Tool("hook", handler=pending)], store=store) as agent:
        suspended = agent.run("go")
        assert isinstance(suspended, Suspended) and suspended.run_id is not None
    now[0] += 61  # the deadline passes while no process hosts the run
    with SqliteRunStore(path, clock=lambda: now[0], poll_interval=0.01) as store, \
            Agent(model(), [Tool("hook", handler=pending)], store=store) as agent:
        outcome = agent.resume_run(suspended.run_id, wait_for=10)
    assert isinstance(outcome, Completed), outcome
    assert "pending_deadline_exceeded" in (outcome.text or "")


def test_the_agent_is_usable_and_closable_inside_a_running_event_loop() -> None:
    @function_tool
    async def pause() -> str:
        """Awaits."""
        await asyncio.sleep(0)
        return "paused"

    async def main() -> list[Any]:
        outcomes = []
        async with Agent(ScriptedModel([calls(call("pause")), "done"]), [pause]) as agent:
            outcomes.append(await agent.arun("go"))
        with Agent(ScriptedModel([calls(call("pause")), "done"]), [pause]) as agent:
            outcomes.append(await agent.arun("go"))  # and closed by a plain with, in the loop
        return outcomes

    assert [type(o) for o in asyncio.run(main())] == [Completed, Completed]
