"""A tool asks the model once (``ctx.direct_completions``) through the agent's supervised model
path: the run's model or a named one, its retries and policy, cancellation with the call, the
run's usage, and a clear error for each refusal. Real actors, runner and models from
``toolvisor.testing``; events, never sleeps, to wait."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.event_table import documented_events
from tests.support.runs import cancel_arun_once
from toolvisor import Agent, CallContext, Completed, ModelError, Ok, Timeouts, function_tool
from toolvisor.contract import (
    CapabilityError,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from toolvisor.durable import DurableError, SqliteRunStore
from toolvisor.executor import DeadlineTimer, ToolRunner
from toolvisor.host import ModelCalls
from toolvisor.host.models import CompletionModel, Completions
from toolvisor.machine import CallToRun, ModelRetryPolicy
from toolvisor.testing import FunctionModel, ScriptedModel, call, calls, capture_events, execute

QUICK_RETRY = ModelRetryPolicy(base_delay=0.0, jitter=0.0)
RANK_PROMPT = "Rank by relevance to 'supervision': otp, cooking, actors"


def ranked(text: str, tokens: tuple[int, int] = (12, 3)) -> ModelResponse:
    return ModelResponse(text=text, finish_reason="stop",
                         usage=Usage(input_tokens=tokens[0], output_tokens=tokens[1]))


@function_tool
def rank(ctx: CallContext) -> str:
    """Ranks three results with one completion of the run's model."""
    return ctx.direct_completions.complete(RANK_PROMPT, source="rank").text or ""


def check_documented(events: list[dict[str, Any]]) -> None:
    """Each completion event is a row of the observability guide's table, with its fields."""
    rows = documented_events()
    for event in (e for e in events if e["event"].startswith("completion_")):
        row = rows[event["event"]]
        assert event["component"] in row["components"] and event["level"] in row["levels"]
        assert set(event) - {"event", "level", "component"} <= row["fields"], event


def tool_result(outcome: Any) -> str:
    results = [m for m in outcome.messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 1, outcome.messages
    return results[0].content


def test_a_tool_ranks_with_the_runs_model_and_its_tokens_join_the_runs_usage() -> None:
    model = ScriptedModel({
        "find supervision docs": [calls(call("rank")), ranked("done", (100, 10))],
        RANK_PROMPT: [ranked("otp, actors, cooking")],
    })
    with model, Agent(model, [rank]) as agent:
        outcome = agent.run("find supervision docs")
    assert isinstance(outcome, Completed)
    assert tool_result(outcome) == "otp, actors, cooking"
    # the run's two model calls had no usage but the last; the completion's 12 + 3 count too
    assert outcome.usage == Usage(input_tokens=112, output_tokens=13)


def test_a_request_names_one_of_the_agents_models_and_gets_it() -> None:
    asked: list[ModelRequest] = []

    def cheap(request: ModelRequest) -> ModelResponse:
        asked.append(request)
        return ranked("cheap says hi", (5, 1))

    @function_tool
    def classify(ctx: CallContext) -> str:
        """Asks the cheap model."""
        request = ModelRequest(messages=(SystemMessage(content="classify"),
                                         UserMessage(content="hello")), model="cheap")
        return ctx.direct_completions.complete(request).text or ""

    model = ScriptedModel([calls(call("classify")), "done"])
    with model, Agent(model, [classify], models={"cheap": FunctionModel(cheap)}) as agent:
        outcome = agent.run("go")
    assert tool_result(outcome) == "cheap says hi"
    assert [r.model for r in asked] == ["cheap"]
    assert outcome.usage == Usage(input_tokens=5, output_tokens=1)


def test_a_rate_limited_completion_is_retried_by_on_model_error() -> None:
    model = ScriptedModel({
        "go": [calls(call("rank")), "done"],
        RANK_PROMPT: [ModelError("rate_limited", "slow down", retry_after=0.0),
                      ModelError("unavailable", "503"), ranked("otp")],
    })
    with model, capture_events() as events, \
            Agent(model, [rank], on_model_error=QUICK_RETRY) as agent:
        outcome = agent.run("go")
    assert tool_result(outcome) == "otp"
    assert [r.attempt for r in model.requests if r.messages[0].content == RANK_PROMPT] \
        == [1, 2, 3]
    check_documented(events)
    retries = [e for e in events if e["event"] == "completion_retry_scheduled"]
    assert [(e["attempt"], e["reason"]) for e in retries] \
        == [(2, "rate_limited"), (3, "unavailable")]


def test_a_completion_the_policy_gives_up_on_raises_its_model_error_in_the_handler() -> None:
    seen: list[BaseException] = []

    @function_tool
    def careful(ctx: CallContext) -> str:
        """Reports the completion's failure."""
        try:
            ctx.direct_completions.complete("classify this")
        except ModelError as exc:
            seen.append(exc)
            return f"no ranking: {exc.reason} after {exc.attempt}"
        return "unexpected"

    model = ScriptedModel({"go": [calls(call("careful")), "done"],
                           "classify this": [ModelError("rejected", "bad request")]})
    with model, Agent(model, [careful], on_model_error=QUICK_RETRY) as agent:
        outcome = agent.run("go")
    assert tool_result(outcome) == "no ranking: rejected after 1"  # rejected is never retried


def test_on_model_error_fail_gives_up_at_the_first_failure() -> None:
    model = ScriptedModel({"go": [calls(call("rank")), "done"],
                           RANK_PROMPT: [ModelError("rate_limited", "slow down")]})
    with model, Agent(model, [rank], on_model_error="fail") as agent:
        outcome = agent.run("go")
    assert "handler_raised: ModelError: slow down" in tool_result(outcome)
    assert len(model.requests) == 3  # the run's two, and the completion's one attempt


def test_the_model_timeout_bounds_each_attempt() -> None:
    release = threading.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        if request.messages[0].content == "go":
            return calls(call("rank")) if len(request.messages) == 1 else ranked("done")
        if request.attempt == 1:
            await asyncio.Event().wait()  # never answers: the deadline cancels it
        release.set()
        return ranked("on time")

    with Agent(FunctionModel(slow), [rank], timeouts=Timeouts(model=0.5),
               on_model_error=QUICK_RETRY) as agent:
        outcome = agent.run("go")
    assert release.is_set()
    assert tool_result(outcome) == "on time"


def test_the_call_timing_out_cancels_its_completion() -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def model(request: ModelRequest) -> ModelResponse:
        if request.messages[0].content == "go":
            return calls(call("rank")) if len(request.messages) == 1 else ranked("done")
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return ranked("never")

    @function_tool(name="rank", timeout=1.0)
    def slow_rank(ctx: CallContext) -> str:
        """Ranks, within a short timeout."""
        return ctx.direct_completions.complete(RANK_PROMPT).text or ""

    with capture_events() as events, Agent(FunctionModel(model), [slow_rank]) as agent:
        outcome = agent.run("go")
        assert cancelled.wait(10)
    assert started.is_set()
    assert "timeout" in tool_result(outcome)
    check_documented(events)
    finished = [e for e in events if e["event"] == "completion_finished"]
    assert [e["outcome"] for e in finished] == ["completion_cancelled"]


def test_cancelling_the_run_cancels_the_completion_in_flight() -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def model(request: ModelRequest) -> ModelResponse:
        if request.messages[0].content == "go":
            return calls(call("rank"))
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return ranked("never")

    with capture_events() as events, Agent(FunctionModel(model), [rank]) as agent:
        cancel_arun_once(agent, started)
        assert cancelled.wait(10)
    check_documented(events)
    finished = [e for e in events if e["event"] == "completion_finished"]
    assert [e["outcome"] for e in finished] == ["completion_cancelled"]


def test_an_async_handler_awaits_its_completion_without_blocking_the_loop() -> None:
    @function_tool
    async def summarise(ctx: CallContext) -> str:
        """Summarises, twice at once on the one loop."""
        first, second = await asyncio.gather(
            ctx.direct_completions.acomplete("summarise a"),
            ctx.direct_completions.acomplete("summarise b"))
        return f"{first.text} {second.text}"

    both = asyncio.Event()
    arrived: list[str] = []

    async def model(request: ModelRequest) -> ModelResponse:
        prompt = request.messages[0].content
        if prompt == "go":
            return calls(call("summarise")) if len(request.messages) == 1 \
                else ModelResponse(text="done")
        arrived.append(str(prompt))
        if len(arrived) == 2:
            both.set()
        await both.wait()  # each answers only once both are in flight: nothing blocks
        return ranked(str(prompt)[-1])

    with Agent(FunctionModel(model), [summarise]) as agent:
        outcome = agent.run("go")
    assert tool_result(outcome) == "a b"
    assert outcome.usage == Usage(input_tokens=24, output_tokens=6)


# --- refusals, each with a clear error ------------------------------------------------------


def refusal(handler: Any, model: Any = None, **agent: Any) -> CapabilityError:
    """Run ``handler`` as a tool of an agent and return the ``CapabilityError`` it raised."""
    raised: list[CapabilityError] = []

    @function_tool
    def asks(ctx: CallContext) -> str:
        """Asks the model."""
        try:
            handler(ctx)
        except CapabilityError as exc:
            raised.append(exc)
        return "asked"

    scripted = model or ScriptedModel([calls(call("asks")), "done"])
    with Agent(scripted, [asks], **agent) as run_agent:
        run_agent.run("go")
    assert len(raised) == 1
    return raised[0]


def test_a_call_outside_an_agent_has_no_model_to_ask() -> None:
    @function_tool
    def asks(ctx: CallContext) -> str:
        """Asks the model."""
        return ctx.direct_completions.complete("hi").text or ""

    result = execute(asks, {})
    error = result.reason.cause  # type: ignore[union-attr]
    assert isinstance(error, CapabilityError)
    assert error.code == "direct_completions_unavailable"
    assert "Agent" in error.message


def test_a_request_naming_a_model_the_agent_lacks_is_refused_naming_its_models() -> None:
    error = refusal(lambda ctx: ctx.direct_completions.complete(
        ModelRequest(messages=(UserMessage(content="hi"),), model="gpt-9")),
        models={"cheap": FunctionModel(lambda request: "x")})
    assert error.code == "completion_unknown_model"
    assert "'gpt-9'" in error.message and "['cheap']" in error.message


@pytest.mark.parametrize(("request_", "source", "says"), [
    (42, None, "got int"),
    ("", None, "empty"),
    (ModelRequest(messages=()), None, "no messages"),
    ("hi", "", "non-empty str"),
    ("hi", "#1", "ordinals"),
])
def test_a_bad_request_is_refused_saying_what_is_wrong(request_: Any, source: Any,
                                                      says: str) -> None:
    error = refusal(lambda ctx: ctx.direct_completions.complete(request_, source))
    assert error.code == "completion_bad_request"
    assert says in error.message


def test_a_source_used_twice_in_one_call_is_refused() -> None:
    def twice(ctx: CallContext) -> None:
        ctx.direct_completions.complete("a", source="same")
        ctx.direct_completions.complete("b", source="same")

    model = ScriptedModel({"go": [calls(call("asks")), "done"], "a": ["A"]})
    error = refusal(twice, model)
    assert error.code == "completion_bad_request"
    assert "'same' was already used" in error.message


def test_a_completion_from_a_call_that_already_ended_is_refused() -> None:
    kept: list[CallContext] = []

    @function_tool
    def keeps(ctx: CallContext) -> str:
        """Keeps its context for later."""
        kept.append(ctx)
        return "kept"

    model = ScriptedModel([calls(call("keeps")), "done"])
    with model, Agent(model, [keeps]) as agent:
        agent.run("go")
        with pytest.raises(CapabilityError) as raised:
            kept[0].direct_completions.complete("too late")
    assert raised.value.code == "call_finished"


def test_a_blocking_complete_in_an_async_handler_points_to_acomplete() -> None:
    raised: list[CapabilityError] = []

    @function_tool
    async def blocks(ctx: CallContext) -> str:
        """Calls the blocking method on the event loop."""
        try:
            ctx.direct_completions.complete("hi")
        except CapabilityError as exc:
            raised.append(exc)
        return "done"

    model = ScriptedModel([calls(call("blocks")), "done"])
    with model, Agent(model, [blocks]) as agent:
        agent.run("go")
    assert raised[0].code == "completion_blocks_event_loop"
    assert "acomplete" in raised[0].message


def test_a_named_model_that_is_no_model_is_refused_when_the_agent_is_built() -> None:
    with pytest.raises(TypeError, match=r"models\['cheap'\] must have respond"):
        Agent(ScriptedModel(["hi"]), models={"cheap": 42})  # type: ignore[dict-item]


def test_an_async_handler_timing_out_cancels_the_completion_it_awaits() -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def model(request: ModelRequest) -> ModelResponse | str:
        if request.messages[0].content == "go":
            return calls(call("summarise")) if len(request.messages) == 1 else "done"
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    @function_tool(timeout=1.0)
    async def summarise(ctx: CallContext) -> str:
        """Awaits a completion that never comes."""
        return (await ctx.direct_completions.acomplete("summarise")).text or ""

    with Agent(FunctionModel(model), [summarise]) as agent:
        outcome = agent.run("go")
        assert cancelled.wait(10)
    assert started.is_set()
    assert "timeout" in tool_result(outcome)


def test_a_replayed_completion_is_read_from_the_journal_and_must_ask_the_same(
        tmp_path: Path) -> None:
    """Three executions of one durable call: the first asks the model and journals the
    answer, the second (a replay) reads it back without asking, the third asks something
    else under the same source and is refused."""
    asked: list[ModelRequest] = []

    def model(request: ModelRequest) -> ModelResponse:
        asked.append(request)
        return ranked("otp")

    @function_tool
    def ranks_query(query: str, ctx: CallContext) -> str:
        """Ranks for ``query``.

        Args:
            query: what to rank for.
        """
        return ctx.direct_completions.complete(f"rank for {query}", source="rank").text or ""

    with SqliteRunStore(tmp_path / "runs.sqlite") as store, ToolRunner() as runner:
        timer = DeadlineTimer("test-completions")
        shared = Completions(
            {None: CompletionModel.of(ModelCalls(FunctionModel(model), runner, 5.0))},
            "fail", 1, 0, timer, None, store)
        store.create_run("run-1")
        planned = CallToRun(call=call("ranks_query", {"query": "supervision"}, id="c1"),
                            turn=1, attempt=1, state={})

        def execution(query: str) -> Any:
            ctx = CallContext(direct_completions=shared.for_call("run-1", planned, "1.1.c1",
                                                                 None))
            return execute(ranks_query, {"query": query}, ctx)

        try:
            assert execution("supervision") == Ok("otp")
            assert execution("supervision") == Ok("otp")  # replayed: the model not asked
            refused = execution("cooking")
        finally:
            timer.close()
    assert [r.messages[0].content for r in asked] == ["rank for supervision"]
    error = refused.reason.cause
    assert isinstance(error, DurableError) and error.code == "durable_effect_replay_mismatch"
    assert "rank for supervision" in error.message and "rank for cooking" in error.message
