"""Determinism: the recorded histories of runs with every kind of effect (model calls, a
model retry's timer, tool calls, a tool retry's backoff, a question answered and a pending
call completed by updates) replay against the workflow code without a failure; a worker
whose agent differs does not replay them."""

from __future__ import annotations

import itertools

import pytest
from temporalio.client import WorkflowHistory
from temporalio.workflow import NondeterminismError

from tests.temporal._harness import Temporal, eventually, run_id, working
from toolvisor import (
    AskUser,
    CallContext,
    Completed,
    ModelError,
    Pending,
    RetryPolicy,
    function_tool,
)
from toolvisor.temporal import (
    TemporalAgent,
    answer,
    complete,
    outcome,
    pending_calls,
    questions,
    replay,
    start_run,
)
from toolvisor.testing import ScriptedModel, call, calls

_tries = itertools.count(1)


@function_tool(retryable=True)
def wobbly() -> str:
    """Fails every other run."""
    if next(_tries) % 2:
        raise RuntimeError("wobble")
    return "steady"


@function_tool
def ask() -> AskUser:
    """Asks for a colour."""
    return AskUser("Which colour?", options=("red", "blue"))


@function_tool
def order(ctx: CallContext) -> Pending:
    """Orders paint; the shop confirms later."""
    ctx.completion_key()
    return Pending(deadline=600)


SCRIPTS = {
    "retry": [ModelError("unavailable", "try again"), calls(call("wobbly", id="w1")), "done"],
    "ask": [calls(call("ask", id="a1")), "painted"],
    "order": [calls(call("order", id="o1")), "ordered"],
}


def _agent(*extra: object) -> TemporalAgent:
    return TemporalAgent("replayed", ScriptedModel(SCRIPTS), [wobbly, ask, order, *extra],
                         on_tool_error={"wobbly": RetryPolicy(base_delay=0.05)})


def test_histories_of_every_effect_kind_replay_without_a_failure(dev_server: Temporal) -> None:
    agent = _agent()
    histories: list[WorkflowHistory] = []
    with working(dev_server, agent) as queue:
        handles = {prompt: dev_server.run(start_run(dev_server.client, agent, prompt,
                                                    run_id=run_id(), task_queue=queue))
                   for prompt in SCRIPTS}
        eventually(lambda: dev_server.run(questions(handles["ask"])), "the question")
        dev_server.run(answer(handles["ask"], "a1", "blue"))
        eventually(lambda: dev_server.run(pending_calls(handles["order"])), "the pending call")
        dev_server.run(complete(handles["order"], "o1", "confirmed"))
        for handle in handles.values():
            assert isinstance(dev_server.run(outcome(handle)), Completed)
            histories.append(dev_server.run(handle.fetch_history()))
    kinds = {e.WhichOneof("attributes") for h in histories for e in h.events}
    assert {"timer_started_event_attributes", "workflow_execution_update_accepted_event_attributes",
            "activity_task_completed_event_attributes"} <= kinds
    dev_server.run(replay(histories, [agent]))

    @function_tool
    def extra() -> str:
        """A tool the runs did not have."""
        return "new"

    with pytest.raises(NondeterminismError):
        dev_server.run(replay(histories[:1], [_agent(extra)]))
