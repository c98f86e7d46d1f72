"""``toolvisor.adapters.openai_agents`` end to end through ``Runner.run``, with a fake ``Model``
of the SDK's own interface: each of toolvisor's results on the SDK's channels."""

from __future__ import annotations

import asyncio
import json
import queue
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, ModelResponse, RunConfig, Runner, Usage, UserError
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.tool import Tool as SdkTool
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_prompt_param import ResponsePromptParam

from tests.support.adapter_tools import tools
from toolvisor import CallContext, Pending, function_tool
from toolvisor.adapters.openai_agents import SupervisedFunctionTools, ToolHalted
from toolvisor.durable import SqliteRunStore
from toolvisor.testing import capture_events

NO_TRACING = RunConfig(tracing_disabled=True)


class OneCall(Model):
    """Calls ``name`` once with ``arguments`` (JSON text), then answers with the output the
    call came back with."""

    def __init__(self, name: str, arguments: str) -> None:
        self._call = ResponseFunctionToolCall(id="fc_1", call_id="call_1", type="function_call",
                                              name=name, arguments=arguments)

    async def get_response(
        self, system_instructions: str | None, input: str | list[TResponseInputItem],
        model_settings: ModelSettings, tools: list[SdkTool],
        output_schema: AgentOutputSchemaBase | None, handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing, *, previous_response_id: str | None,
        conversation_id: str | None, prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        outputs = [item["output"] for item in input if isinstance(item, dict)
                   and item.get("type") == "function_call_output"] if isinstance(input, list) \
            else []
        answer: list[TResponseOutputItem] = [ResponseOutputMessage(
            id="msg_1", type="message", role="assistant", status="completed",
            content=[ResponseOutputText(text=str(outputs[-1]), type="output_text",
                                        annotations=[])])] if outputs else [self._call]
        return ModelResponse(output=answer, usage=Usage(), response_id=None)

    def stream_response(
        self, system_instructions: str | None, input: str | list[TResponseInputItem],
        model_settings: ModelSettings, tools: list[SdkTool],
        output_schema: AgentOutputSchemaBase | None, handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing, *, previous_response_id: str | None,
        conversation_id: str | None, prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("these tests drive Runner.run, which never streams")


@pytest.fixture
def supervised() -> Iterator[SupervisedFunctionTools]:
    with SupervisedFunctionTools(tools, tool_timeout=10) as made:
        yield made


def run(supervised: SupervisedFunctionTools, name: str, arguments: dict[str, Any]) -> Any:
    agent = Agent(name="a", model=OneCall(name, json.dumps(arguments)),
                  tools=list(supervised.function_tools))
    return asyncio.run(Runner.run(agent, "go", run_config=NO_TRACING)).final_output


def test_a_call_runs_under_supervision(supervised: SupervisedFunctionTools) -> None:
    assert run(supervised, "add", {"a": 2, "b": 3}) == "5"


def test_a_hung_sync_tool_returns_at_its_deadline_and_its_worker_is_killed() -> None:
    with capture_events() as events, SupervisedFunctionTools(tools) as supervised:
        assert '"reason":"timeout"' in run(supervised, "hang", {})
    assert [e["tool_call_id"] for e in events if e["event"] == "worker_killed"
            and e["tool_call_id"] is not None] == ["call_1"]


def test_a_crash_and_a_reported_error_are_the_failure_output(
        supervised: SupervisedFunctionTools) -> None:
    crashed = json.loads(run(supervised, "crash", {}))
    assert crashed["error"]["reason"] == "handler_raised"
    assert run(supervised, "refuse", {}) == '{"error":"not today"}'
    assert '"reason":"invalid_arguments"' in run(supervised, "add", {"a": "x"})


def test_an_approval_suspends_the_run_and_the_approved_call_runs_supervised() -> None:
    with SupervisedFunctionTools(tools, needs_approval={"add"}) as supervised:
        agent = Agent(name="a", model=OneCall("add", '{"a": 1, "b": 1}'),
                      tools=list(supervised.function_tools))

        async def suspend_then_resume(approve: bool) -> Any:
            first = await Runner.run(agent, "go", run_config=NO_TRACING)
            (item,) = first.interruptions
            assert item.name == "add"
            early = await Runner.run(agent, first.to_state(), run_config=NO_TRACING)
            (item,) = early.interruptions  # resumed before a decision: still waiting
            state = early.to_state()
            if approve:
                state.approve(item)
            else:
                state.reject(item)
            return (await Runner.run(agent, state, run_config=NO_TRACING)).final_output

        assert asyncio.run(suspend_then_resume(True)) == "2"
        assert asyncio.run(suspend_then_resume(False)) == "Tool execution was not approved."
        assert supervised.calls.stats.calls_started == 1


def test_a_question_asked_mid_call_is_a_failure_naming_needs_approval(
        supervised: SupervisedFunctionTools) -> None:
    asked = json.loads(run(supervised, "deploy", {"target": "prod"}))
    assert (asked["error"]["reason"], asked["error"]["code"]) == ("invalid_return", "cannot_ask")
    assert "declare the tool with needs_approval" in asked["error"]["message"]


def test_a_pending_call_waits_for_its_key_to_be_resolved(tmp_path: Path) -> None:
    keys: queue.SimpleQueue[str] = queue.SimpleQueue()

    @function_tool
    def review(doc: str, ctx: CallContext) -> Pending:
        """Sends ``doc`` for review."""
        keys.put(ctx.completion_key())
        return Pending(deadline=3600)

    with SqliteRunStore(tmp_path / "s.db") as store, \
            SupervisedFunctionTools([review], store=store, run_id="session-1") as supervised:
        agent = Agent(name="a", model=OneCall("review", '{"doc": "plan.md"}'),
                      tools=list(supervised.function_tools))

        async def run_and_resolve() -> Any:
            running = asyncio.ensure_future(Runner.run(agent, "go", run_config=NO_TRACING))
            key = await asyncio.to_thread(keys.get, True, 10)
            assert store.resolve(key, ok={"approved": True}) == "accepted"
            return (await running).final_output

        assert asyncio.run(run_and_resolve()) == '{"approved":true}'


def test_a_halt_ends_the_run(supervised: SupervisedFunctionTools) -> None:
    with pytest.raises(UserError, match="Error running tool stop") as raised:
        run(supervised, "stop", {})
    assert isinstance(raised.value.__cause__, ToolHalted)
    assert raised.value.__cause__.halt.reason == "enough"


def test_needs_approval_names_given_tools() -> None:
    with pytest.raises(ValueError, match=r"tools that are not given: \['nope'\]"):
        SupervisedFunctionTools(tools, needs_approval={"nope"})
