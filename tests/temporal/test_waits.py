"""A run waiting in place on Temporal: ``AskUser`` answered and ``Pending`` completed through
validated updates; a refused update leaves the run's history as it was."""

from __future__ import annotations

import base64
import json

import pytest

from tests.temporal._harness import Temporal, eventually, run_id, tool_texts, working
from toolvisor import AskUser, CallContext, Completed, Pending, function_tool
from toolvisor.temporal import (
    TemporalAgent,
    UpdateRefusedError,
    answer,
    complete,
    complete_key,
    outcome,
    pending_calls,
    questions,
    start_or_answer,
    start_run,
)
from toolvisor.testing import ScriptedModel, call, calls


@function_tool
def approve() -> AskUser:
    """Asks whether to ship."""
    return AskUser("Ship it?", options=("yes", "no"))


@function_tool
def pay(ctx: CallContext) -> Pending:
    """Starts a payment whose receipt arrives later."""
    ctx.completion_key()
    return Pending(deadline=600)


def test_a_question_is_answered_by_an_update_and_a_wrong_answer_is_refused(
        dev_server: Temporal) -> None:
    model = ScriptedModel([calls(call("approve", id="c1")), "shipped"])
    agent = TemporalAgent("approvals", model, [approve])
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "ship?", run_id=run_id(),
                                          task_queue=queue))
        asked = eventually(lambda: dev_server.run(questions(handle)), "the question")
        assert [(q.call_id, q.question, q.options) for q in asked] == [
            ("c1", "Ship it?", ("yes", "no"))]
        before = dev_server.run(handle.fetch_history()).events
        with pytest.raises(UpdateRefusedError, match="not one of its options"):
            dev_server.run(answer(handle, "c1", "maybe"))
        with pytest.raises(UpdateRefusedError, match="'c9' asks no open question"):
            dev_server.run(answer(handle, "c9", "yes"))
        assert dev_server.run(handle.fetch_history()).events == before
        dev_server.run(answer(handle, "c1", "yes"))
        done = dev_server.run(outcome(handle))
    assert isinstance(done, Completed) and done.text == "shipped"
    assert tool_texts(done) == {"c1": "yes"}


def test_a_pending_call_is_completed_by_an_update_and_only_while_it_waits(
        dev_server: Temporal) -> None:
    model = ScriptedModel([calls(call("pay", id="c1")), "paid"])
    agent = TemporalAgent("payments", model, [pay])
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "pay", run_id=run_id(),
                                          task_queue=queue))
        waiting = eventually(lambda: dev_server.run(pending_calls(handle)), "the pending call")
        assert [(p.call_id, p.deadline) for p in waiting] == [("c1", 600)]
        before = dev_server.run(handle.fetch_history()).events
        with pytest.raises(UpdateRefusedError, match="'c2' is not waiting for a completion"):
            dev_server.run(complete(handle, "c2", {"receipt": 1}))
        assert dev_server.run(handle.fetch_history()).events == before
        dev_server.run(complete(handle, "c1", {"receipt": 7}))
        done = dev_server.run(outcome(handle))
        with pytest.raises(UpdateRefusedError):
            dev_server.run(complete(handle, "c1", {"receipt": 8}))
    assert isinstance(done, Completed) and done.text == "paid"
    assert tool_texts(done) == {"c1": '{"receipt":7}'}


KEYS: dict[str, str] = {}  # stands in for the shop the key is sent to


@function_tool
def invoice(ctx: CallContext) -> Pending:
    """Sends an invoice; the shop completes the call with the key when it is paid."""
    KEYS["invoice"] = ctx.completion_key()
    return Pending(deadline=600)


def _other_attempt(key: str) -> str:
    """The key of the same call's second attempt (a key the run does not wait on)."""
    run, turn, _, call_id = json.loads(base64.urlsafe_b64decode(key[len("tvt1."):]))
    text = json.dumps([run, turn, 2, call_id], separators=(",", ":"))
    return "tvt1." + base64.urlsafe_b64encode(text.encode()).decode()


def test_a_pending_call_is_completed_with_its_key_alone(dev_server: Temporal) -> None:
    KEYS.clear()
    model = ScriptedModel([calls(call("invoice", id="c1")), "invoiced"])
    agent = TemporalAgent("invoices", model, [invoice])
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "bill", run_id=run_id(),
                                          task_queue=queue))
        eventually(lambda: dev_server.run(pending_calls(handle)), "the pending call")
        key = KEYS["invoice"]
        with pytest.raises(ValueError, match="is no completion key of a run on Temporal"):
            dev_server.run(complete_key(dev_server.client, "c1", "paid"))
        with pytest.raises(UpdateRefusedError, match="the key is for turn 1, attempt 2"):
            dev_server.run(complete_key(dev_server.client, _other_attempt(key), "paid"))
        dev_server.run(complete_key(dev_server.client, key, error="card declined"))
        done = dev_server.run(outcome(handle))
    assert isinstance(done, Completed) and "card declined" in tool_texts(done)["c1"]


def test_a_front_end_starts_or_answers_a_run_by_its_id_alone(dev_server: Temporal) -> None:
    model = ScriptedModel([calls(call("approve", id="c1")), "shipped"])
    agent = TemporalAgent("front-end", model, [approve])
    conversation = run_id()
    with working(dev_server, agent) as queue:

        def say(text: str) -> str:
            return dev_server.run(start_or_answer(dev_server.client, agent, text,
                                                  run_id=conversation, task_queue=queue))

        assert say("ship?") == "started"
        handle = dev_server.client.get_workflow_handle(conversation)
        eventually(lambda: dev_server.run(questions(handle)), "the question")
        before = dev_server.run(handle.fetch_history()).events
        with pytest.raises(UpdateRefusedError, match="not one of its options"):
            say("maybe")
        assert dev_server.run(handle.fetch_history()).events == before
        assert say("yes") == "answered"
        done = dev_server.run(outcome(handle))
        assert isinstance(done, Completed) and tool_texts(done) == {"c1": "yes"}
        with pytest.raises(ValueError, match="prompt as a non-empty str"):
            say("")


def test_a_message_to_a_run_that_asks_nothing_is_refused(dev_server: Temporal) -> None:
    model = ScriptedModel([calls(call("pay", id="c1")), "paid"])
    agent = TemporalAgent("busy", model, [pay])
    with working(dev_server, agent) as queue:
        handle = dev_server.run(start_run(dev_server.client, agent, "pay", run_id=run_id(),
                                          task_queue=queue))
        eventually(lambda: dev_server.run(pending_calls(handle)), "the pending call")
        with pytest.raises(UpdateRefusedError, match="asks 0 open questions"):
            dev_server.run(start_or_answer(dev_server.client, agent, "hello",
                                           run_id=handle.id, task_queue=queue))
        dev_server.run(complete(handle, "c1", "receipt"))
        assert isinstance(dev_server.run(outcome(handle)), Completed)
