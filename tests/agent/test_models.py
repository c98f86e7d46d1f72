"""The model half of the turn, supervised: concurrent, async-native, with deadlines, retries
and cancellation. Real actors and threads; events and barriers, never sleeps, to wait."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.runs import cancel_arun_once, close_while_running
from toolvisor import (
    Agent,
    Completed,
    Failed,
    ModelError,
    OrchestratorStopped,
    Timeouts,
    Tracing,
    function_tool,
)
from toolvisor.contract import ModelRequest, ModelResponse, UserMessage
from toolvisor.durable import SqliteRunStore
from toolvisor.machine import ModelRetryPolicy, RetryAfter
from toolvisor.testing import FunctionModel, ScriptedModel, call, calls, capture_events

QUICK_RETRY = ModelRetryPolicy(base_delay=0.0, jitter=0.0)


def prompt_of(request: ModelRequest) -> str:
    first = request.messages[0]
    assert isinstance(first, UserMessage)
    return first.content


@function_tool
def noop() -> str:
    """Does nothing."""
    return "ok"


def test_two_runs_whose_sync_models_block_are_in_flight_at_once() -> None:
    both_in = threading.Barrier(2, timeout=10)  # breaks (the run fails) unless both arrive

    def model(request: ModelRequest) -> str:
        both_in.wait()
        return f"answer to {prompt_of(request)}"

    with Agent(FunctionModel(model), on_model_error="fail") as agent:
        outcomes: dict[str, Any] = {}
        threads = [threading.Thread(target=lambda p=p: outcomes.__setitem__(p, agent.run(p)))
                   for p in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert {p: o.text for p, o in outcomes.items()} == {"a": "answer to a", "b": "answer to b"}


def test_async_models_run_concurrently_on_the_runtimes_loop() -> None:
    arrived: list[str] = []
    all_in: list[asyncio.Event] = []

    async def model(request: ModelRequest) -> str:
        if not all_in:
            all_in.append(asyncio.Event())
        arrived.append(prompt_of(request))
        if len(arrived) == 3:
            all_in[0].set()
        await asyncio.wait_for(all_in[0].wait(), 10)
        return "done"

    async def main(agent: Agent) -> list[Any]:
        return list(await asyncio.gather(*(agent.arun(p) for p in ("a", "b", "c"))))

    before = threading.active_count()
    with Agent(FunctionModel(model), on_model_error="fail") as agent:
        outcomes = asyncio.run(main(agent))
        assert agent.runner.stats.threads_live <= 1  # no thread per model call
    assert [type(o) for o in outcomes] == [Completed] * 3
    assert threading.active_count() <= before


def test_a_hung_model_does_not_delay_another_run_and_times_out_through_the_policy() -> None:
    started = threading.Event()
    release = threading.Event()

    def model(request: ModelRequest) -> str:
        if prompt_of(request) == "hang":
            started.set()
            release.wait(10)
            return "too late"
        return "quick"

    with capture_events() as events, Agent(FunctionModel(model), timeouts=Timeouts(model=0.2),
                                           on_model_error="fail") as agent:
        hung: list[Any] = []
        runner = threading.Thread(target=lambda: hung.append(agent.run("hang")))
        runner.start()
        assert started.wait(10)
        quick = agent.run("fast")  # while the other model hangs
        assert isinstance(quick, Completed) and quick.text == "quick"
        runner.join()
        release.set()
    outcome = hung[0]
    assert isinstance(outcome, Failed) and outcome.model_error is not None
    assert (outcome.model_error.reason, outcome.model_error.attempts) == ("timeout", 1)
    assert agent.runner.stats.threads_abandoned == 1
    assert any(e["event"] == "model_call_failed" and e.get("reason") == "timeout"
               for e in events)


def test_a_rate_limited_model_is_retried_after_retry_after_then_succeeds() -> None:
    model = ScriptedModel([ModelError("rate_limited", "429", retry_after=0.01, status=429),
                           calls(call("noop")), "done"])
    with capture_events() as events, model, Agent(model, [noop],
                                                  on_model_error=QUICK_RETRY) as agent:
        outcome = agent.run("go")
    assert isinstance(outcome, Completed) and outcome.turns == 2
    scheduled = [e for e in events if e["event"] == "model_retry_scheduled"]
    assert [(e["attempt"], e["seconds"]) for e in scheduled] == [(2, 0.01)]
    first, again = model.requests[:2]  # the same conversation, asked again
    assert first.messages == again.messages and (first.attempt, again.attempt) == (1, 2)


def test_a_non_retryable_model_error_fails_the_run_with_its_reason_and_transcript() -> None:
    model = ScriptedModel([calls(call("noop", id="c1")),
                           ModelError("rejected", "invalid api key", status=401)])
    with model, Agent(model, [noop]) as agent:  # the default policy never retries rejected
        outcome = agent.run("go")
    assert isinstance(outcome, Failed) and outcome.model_error is not None
    assert outcome.model_error.reason == "rejected" and outcome.model_error.status == 401
    assert "invalid api key" in outcome.error
    assert [m.role for m in outcome.messages] == ["user", "assistant", "tool"]


def test_a_model_that_raises_or_answers_nonsense_is_a_model_error() -> None:
    class Flaky:
        def __init__(self) -> None:
            self.answers: Iterator[Any] = iter([RuntimeError("socket closed"), {"text": "?"}])

        def respond(self, request: ModelRequest) -> ModelResponse:
            answer = next(self.answers)
            if isinstance(answer, Exception):
                raise answer
            return answer  # type: ignore[no-any-return]

    with Agent(Flaky(), on_model_error="fail") as agent:
        raised, nonsense = agent.run("a"), agent.run("b")
    assert isinstance(raised, Failed) and raised.model_error is not None
    assert raised.model_error.reason == "raised"
    assert raised.model_error.cause == {"type": "RuntimeError", "message": "socket closed"}
    assert isinstance(nonsense, Failed) and nonsense.model_error is not None
    assert nonsense.model_error.reason == "invalid_response"


def test_cancelling_a_run_during_its_model_call_cancels_the_call() -> None:
    entered = threading.Event()
    saw_cancel = threading.Event()

    async def model(request: ModelRequest) -> str:
        entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            saw_cancel.set()
            raise
        return "never"

    with Agent(FunctionModel(model)) as agent:
        cancel_arun_once(agent, entered)
        assert saw_cancel.wait(10)  # the model's task was cancelled for real
        assert agent.runner.stats.cancelled == 1


def test_closing_the_agent_cancels_a_model_call_in_flight() -> None:
    entered = threading.Event()
    gate = threading.Event()

    def blocking(request: ModelRequest) -> str:
        entered.set()
        gate.wait(10)
        return "late"

    agent = Agent(FunctionModel(blocking))
    assert isinstance(close_while_running(agent, entered), OrchestratorStopped)
    gate.set()


def test_a_durable_run_restored_during_a_model_backoff_continues(
        store: SqliteRunStore) -> None:
    backing_off = threading.Event()
    run_ids: list[str] = []

    def on_progress(run_id: str, event: str, data: dict[str, Any]) -> None:
        if event == "model_failed":
            run_ids.append(run_id)
            backing_off.set()

    script = [ModelError("unavailable", status=503), "recovered"]
    first = Agent(ScriptedModel(script), store=store, on_model_error=lambda e: RetryAfter(0.2),
                  tracing=Tracing(on_progress=on_progress))
    stopped = close_while_running(first, backing_off)  # the host dies during the backoff
    assert isinstance(stopped, OrchestratorStopped)
    assert store.get_run(run_ids[0]).status == "running"  # type: ignore[union-attr]

    second_model = ScriptedModel(script)  # the run goes on at its turn's second attempt
    with second_model, Agent(second_model, store=store,
                             on_model_error=lambda e: RetryAfter(0.2)) as second:
        outcome = second.resume_run(run_ids[0], wait_for=10)
    assert isinstance(outcome, Completed) and outcome.text == "recovered"


def test_resume_run_tries_the_model_again_for_a_run_that_failed_on_it(
        store: SqliteRunStore) -> None:
    with Agent(ScriptedModel([ModelError("unavailable")]), store=store,
               on_model_error="fail") as agent:
        failed = agent.run("go")
        assert isinstance(failed, Failed)
        run_id = store.runs()[0].run_id
    model = ScriptedModel(["second time lucky"])  # retry_model() asks from attempt 1 again
    with model, Agent(model, store=store) as agent:
        outcome = agent.resume_run(run_id)
    assert isinstance(outcome, Completed) and outcome.text == "second time lucky"


def test_model_settings_are_checked() -> None:
    with pytest.raises(TypeError, match="async arespond"):
        Agent(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Timeouts\.model must be a positive"):
        Agent(ScriptedModel([]), timeouts=Timeouts(model=0))
    with pytest.raises(TypeError, match="a model policy is"):
        Agent(ScriptedModel([]), on_model_error=3)  # type: ignore[arg-type]
