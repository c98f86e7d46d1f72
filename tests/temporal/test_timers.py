"""Durable timers on the time-skipping test server: a question's expiry, a pending call's
deadline and a model retry's backoff are Temporal timers on ``workflow.now()``, so hours of
waiting pass in a moment and survive any worker."""

from __future__ import annotations

import itertools

from temporalio.api.history.v1 import History

from tests.temporal._harness import Temporal, run_id, tool_texts, working
from toolvisor import (
    AskUser,
    CallContext,
    Completed,
    Failed,
    ModelError,
    Pending,
    RetryPolicy,
    function_tool,
)
from toolvisor.temporal import TemporalAgent, outcome, start_run
from toolvisor.testing import ScriptedModel, call, calls


def _timers(history: History) -> list[float]:
    """The seconds of every timer the run started, in order."""
    return [e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta().total_seconds()
            for e in history.events if e.HasField("timer_started_event_attributes")]


@function_tool
def ship() -> AskUser:
    """Asks whether to ship; unanswered for an hour, the answer is no."""
    return AskUser("Ship it?", options=("yes", "no"), expires_in=3600, default="no")


def test_an_unanswered_question_expires_on_a_durable_timer_with_its_default(
        skipping_server: Temporal) -> None:
    model = ScriptedModel([calls(call("ship", id="c1")), "not shipped"])
    agent = TemporalAgent("expiry", model, [ship])
    with working(skipping_server, agent) as queue:
        handle = skipping_server.run(start_run(skipping_server.client, agent, "ship?",
                                               run_id=run_id(), task_queue=queue))
        done = skipping_server.run(outcome(handle))
        history = skipping_server.run(handle.fetch_history())
    assert isinstance(done, Completed) and tool_texts(done) == {"c1": "no"}
    assert _timers(history) == [3600]


@function_tool
def wire(ctx: CallContext) -> Pending:
    """Starts a transfer that must be confirmed within a day."""
    ctx.completion_key()
    return Pending(deadline=86400)


def test_a_pending_call_past_its_deadline_gets_a_timeout_for_its_policy(
        skipping_server: Temporal) -> None:
    model = ScriptedModel([calls(call("wire", id="c1")), "gave up"])
    agent = TemporalAgent("deadline", model, [wire])
    with working(skipping_server, agent) as queue:
        handle = skipping_server.run(start_run(skipping_server.client, agent, "wire",
                                               run_id=run_id(), task_queue=queue))
        done = skipping_server.run(outcome(handle))
        history = skipping_server.run(handle.fetch_history())
    assert isinstance(done, Completed) and done.text == "gave up"
    assert "timeout" in tool_texts(done)["c1"] and _timers(history) == [86400]


def test_a_failing_model_is_retried_by_the_model_policy_after_a_durable_timer(
        skipping_server: Temporal) -> None:
    model = ScriptedModel([ModelError("rate_limited", "slow down", retry_after=45), "hello"])
    agent = TemporalAgent("model-retry", model)
    with working(skipping_server, agent) as queue:
        handle = skipping_server.run(start_run(skipping_server.client, agent, "hi",
                                               run_id=run_id(), task_queue=queue))
        done = skipping_server.run(outcome(handle))
        history = skipping_server.run(handle.fetch_history())
    assert isinstance(done, Completed) and done.text == "hello"
    assert _timers(history) == [45]
    attempts = [e.activity_task_scheduled_event_attributes.retry_policy.maximum_attempts
                for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    assert attempts == [1, 1]


@function_tool
def sign(ctx: CallContext) -> Pending:
    """Waits for a signature; without one in a minute, the turn fails."""
    ctx.completion_key()
    return Pending(deadline=60, on_timeout="fail_turn")


def test_a_pending_call_that_fails_its_turn_at_its_deadline_fails_the_run(
        skipping_server: Temporal) -> None:
    agent = TemporalAgent("fail-turn", ScriptedModel([calls(call("sign", id="c1"))]), [sign])
    with working(skipping_server, agent) as queue:
        handle = skipping_server.run(start_run(skipping_server.client, agent, "sign",
                                               run_id=run_id(), task_queue=queue))
        done = skipping_server.run(outcome(handle))
    assert isinstance(done, Failed)
    assert "'c1' (sign) was not resolved before its deadline" in done.error


_runs = itertools.count(1)


@function_tool(retryable=True)
def sync_ledger() -> str:
    """Fails its first run; the retry waits five minutes."""
    if next(_runs) == 1:
        raise RuntimeError("ledger busy")
    return "synced"


def test_a_tool_retry_waits_its_backoff_on_a_durable_timer(skipping_server: Temporal) -> None:
    model = ScriptedModel([calls(call("sync_ledger", id="c1")), "synced"])
    agent = TemporalAgent("tool-retry", model, [sync_ledger],
                          on_tool_error=RetryPolicy(base_delay=300, max_delay=600, jitter=0.5))
    with working(skipping_server, agent) as queue:
        handle = skipping_server.run(start_run(skipping_server.client, agent, "sync",
                                               run_id=run_id(), task_queue=queue))
        done = skipping_server.run(outcome(handle))
        history = skipping_server.run(handle.fetch_history())
    assert tool_texts(done) == {"c1": "synced"}
    (backoff,) = _timers(history)
    assert 150 <= backoff <= 300  # base_delay, less up to half of it as jitter
