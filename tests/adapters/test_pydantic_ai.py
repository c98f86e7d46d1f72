"""``toolvisor.adapters.pydantic_ai`` end to end through ``Agent.run``, with pydantic-ai's own
``FunctionModel``: each of toolvisor's results on pydantic-ai's channels."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.support.adapter_tools import tools
from toolvisor import Breaker, Err, Ok, Resilience
from toolvisor.adapters.pydantic_ai import SupervisedToolset, ToolHalted
from toolvisor.durable import SqliteRunStore
from toolvisor.testing import capture_events


def one_call(name: str, args: dict[str, Any]) -> FunctionModel:
    """Calls ``name`` once, then answers with what came back (content, outcome)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        back = [p for p in last.parts if isinstance(p, ToolReturnPart | RetryPromptPart)]
        if back:
            part = back[0]
            outcome = getattr(part, "outcome", "retry")
            return ModelResponse(parts=[TextPart(f"{outcome}: {part.content}")])
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id="call_1")])

    return FunctionModel(respond)


def killed(events: list[dict[str, Any]]) -> list[str]:
    """The calls whose worker process was killed (by its deadline, at the latest by close)."""
    return [e["tool_call_id"] for e in events if e["event"] == "worker_killed"
            and e["tool_call_id"] is not None]


@pytest.fixture
def toolset() -> Iterator[SupervisedToolset]:
    with SupervisedToolset(tools, tool_timeout=10) as made:
        yield made


def run(toolset: SupervisedToolset, name: str, args: dict[str, Any], **agent: Any) -> Any:
    return asyncio.run(Agent(one_call(name, args), toolsets=[toolset], **agent).run("go"))


def test_a_call_runs_under_supervision_and_returns_its_value(toolset: SupervisedToolset) -> None:
    assert run(toolset, "add", {"a": 2, "b": 3}).output == "success: 5"


def test_a_hung_sync_tool_returns_at_its_deadline_and_its_worker_is_killed() -> None:
    with capture_events() as events, SupervisedToolset(tools) as toolset:
        output = run(toolset, "hang", {}).output
    assert output.startswith("failed: ") and '"reason":"timeout"' in output
    assert killed(events) == ["call_1"]


def test_a_crash_and_a_reported_error_are_tool_failures(toolset: SupervisedToolset) -> None:
    crashed = run(toolset, "crash", {}).output
    assert crashed.startswith("failed: ") and '"reason":"handler_raised"' in crashed
    assert "the disk is full" in crashed
    assert run(toolset, "refuse", {}).output == 'failed: {"error":"not today"}'


def test_refused_arguments_ask_the_model_to_retry(toolset: SupervisedToolset) -> None:
    output = run(toolset, "add", {"a": "x"}).output
    assert output.startswith("retried: ") and '"reason":"invalid_arguments"' in output


def test_the_error_policy_picks_the_channel() -> None:
    with SupervisedToolset(tools, on_error="retry") as retrying:
        assert run(retrying, "refuse", {}).output.startswith("retried: ")
    with pytest.raises(TypeError, match="on_error must be 'retry', 'fail'"):
        SupervisedToolset(tools, on_error="maybe")


def test_a_question_suspends_the_run_and_its_answer_resumes_it(
        toolset: SupervisedToolset) -> None:
    agent = Agent(one_call("deploy", {"target": "prod"}), toolsets=[toolset],
                  output_type=[str, DeferredToolRequests])
    first = asyncio.run(agent.run("go"))
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    assert requests.metadata["call_1"] == {"toolvisor": "ask_user", "question": "Deploy to prod?",
                                           "options": ["yes", "no"]}
    with pytest.raises(ValueError, match=r"must be one of \['yes', 'no'\]"):
        toolset.deferred_results(requests, {"call_1": "maybe"})
    with pytest.raises(ValueError, match="calls still waiting: call_1 \\(a question"):
        toolset.deferred_results(requests)
    resumed = asyncio.run(agent.run(message_history=first.all_messages(),
                                    deferred_tool_results=toolset.deferred_results(
                                        requests, {"call_1": "yes"})))
    assert resumed.output == "success: yes"
    denied = toolset.deferred_results(requests, {"call_1": Err("denied")})
    assert denied.calls["call_1"] == ToolFailed('{"error":"denied"}')


def test_a_wrong_answer_changes_nothing_and_an_ok_is_checked_by_its_value(
        toolset: SupervisedToolset) -> None:
    """An answer off the options, of another type, or an ``Ok`` of one, is refused before the
    run resumes (it stays resumable); ``Ok(option)`` answers as the option does."""
    agent = Agent(one_call("deploy", {"target": "prod"}), toolsets=[toolset],
                  output_type=[str, DeferredToolRequests])
    first = asyncio.run(agent.run("go"))
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    for wrong in ("maybe", Ok("maybe"), 1):
        with pytest.raises(ValueError, match=r"must be one of \['yes', 'no'\]"):
            toolset.deferred_results(requests, {"call_1": wrong})
    resumed = asyncio.run(agent.run(message_history=first.all_messages(),
                                    deferred_tool_results=toolset.deferred_results(
                                        requests, {"call_1": Ok("no")})))
    assert resumed.output == "success: no"


def test_a_pending_call_carries_its_key_and_resumes_once_it_is_resolved(
        tmp_path: Path) -> None:
    with SqliteRunStore(tmp_path / "runs.db") as store, \
            SupervisedToolset(tools, store=store, run_id="session-1") as toolset:
        agent = Agent(one_call("review", {"doc": "plan.md"}), toolsets=[toolset],
                      output_type=[str, DeferredToolRequests])
        first = asyncio.run(agent.run("go"))
        requests = first.output
        assert isinstance(requests, DeferredToolRequests)
        meta = requests.metadata["call_1"]
        assert meta["toolvisor"] == "pending" and meta["deadline"] == 3600
        with pytest.raises(ValueError, match="call_1 \\(pending on its completion key\\)"):
            toolset.deferred_results(requests)
        assert store.resolve(meta["completion_key"], ok={"approved": True}) == "accepted"
        results = toolset.deferred_results(requests)
        resumed = asyncio.run(agent.run(message_history=first.all_messages(),
                                        deferred_tool_results=results))
        assert resumed.output == "success: {'approved': True}"


def test_a_halt_ends_the_run(toolset: SupervisedToolset) -> None:
    with pytest.raises(ToolHalted, match="halted the run: enough"):
        run(toolset, "stop", {})


def test_an_open_breaker_refuses_the_call_without_running_it() -> None:
    guard = Resilience(breaker=Breaker(consecutive_failures=1, open_for=60))
    with SupervisedToolset(tools, resilience={"crash": guard}) as toolset:
        assert '"reason":"handler_raised"' in run(toolset, "crash", {}).output
        refused = run(toolset, "crash", {}).output
        assert '"code":"circuit_open"' in refused
        assert toolset.calls.stats.calls_started == 1


def test_approval_before_running_is_pydantic_ais_own_wrapper(toolset: SupervisedToolset) -> None:
    agent = Agent(one_call("add", {"a": 1, "b": 1}), toolsets=[toolset.approval_required()],
                  output_type=[str, DeferredToolRequests])
    first = asyncio.run(agent.run("go"))
    assert isinstance(first.output, DeferredToolRequests) and first.output.approvals
    resumed = asyncio.run(agent.run(message_history=first.all_messages(),
                                    deferred_tool_results=DeferredToolResults(
                                        approvals={"call_1": True})))
    assert resumed.output == "success: 2"


def test_calls_and_settings_are_not_given_together(toolset: SupervisedToolset) -> None:
    with pytest.raises(ValueError, match="give either calls"):
        SupervisedToolset(tools, calls=toolset.calls)
