"""The OpenAI Agents SDK driven by a scripted ``Model`` subclass.

Plain sync functions wrapped by ``function_tool``; the SDK runs the calls of one response
concurrently, each sync tool through ``asyncio.to_thread``. Its timeout option,
``function_tool(timeout=...)``, is refused for sync functions; the hung-tool case therefore also
tries what a user would write instead: an async tool awaiting ``asyncio.to_thread(sync_tool)``.
There ``asyncio.wait_for`` gives up on the awaiting task and the model sees an error string,
while the thread keeps sleeping in the loop's default executor.

Tracing stays on, as by default, with the default batching processor; only its exporter is
swapped for one that drops the batch, so no run ever reaches the network even when an API key
happens to be set. ``agents.testing.ScriptedModel`` is not used: it deep-copies every input,
which would be the test double's cost, not the SDK's.
"""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from agents import Agent, ModelResponse, Runner, Usage, function_tool, set_trace_processors
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.tool import Tool
from agents.tracing.processor_interface import TracingExporter
from agents.tracing.processors import BatchTraceProcessor
from agents.tracing.spans import Span
from agents.tracing.traces import Trace
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_prompt_param import ResponsePromptParam

from bench.competitors._driver import HungReport, time_async
from bench.competitors._tools import (
    FINAL_TEXT,
    PROMPT,
    CallCounter,
    ToolKind,
    check_turns,
    make_tool,
)

HUNG_TIMEOUT_SECONDS = 0.2


class DroppingExporter(TracingExporter):
    """Receives the default processor's batches and drops them."""

    def export(self, items: list[Trace | Span[Any]]) -> None:
        del items


TRACE_PROCESSOR = BatchTraceProcessor(DroppingExporter())
"""The default processor's kind, one for every agent: each starts its own worker thread."""


class ScriptedModel(Model):
    """Asks for ``batch`` calls to ``tool_name``; answers ``FINAL_TEXT`` once results came back."""

    def __init__(self, tool_name: str, batch: int) -> None:
        self._calls: list[TResponseOutputItem] = [
            ResponseFunctionToolCall(
                id=f"fc_{index}",
                call_id=f"call_{index}",
                type="function_call",
                name=tool_name,
                arguments="{}",
            )
            for index in range(batch)
        ]

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        saw_results = isinstance(input, list) and any(
            isinstance(item, dict) and item.get("type") == "function_call_output" for item in input
        )
        output: list[TResponseOutputItem] = [final_message()] if saw_results else list(self._calls)
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the benchmark drives Runner.run, which never streams")


def final_message() -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_final",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(text=FINAL_TEXT, type="output_text", annotations=[])],
    )


def in_thread(function: Callable[[], str]) -> Callable[[], Awaitable[str]]:
    """An async tool of the same name that runs ``function`` through ``asyncio.to_thread``."""

    async def wrapper() -> str:
        return await asyncio.to_thread(function)

    wrapper.__name__ = function.__name__
    wrapper.__doc__ = function.__doc__
    return wrapper


def build_agent(
    tool: Callable[[], str] | Callable[[], Awaitable[str]],
    batch: int,
    timeout: float | None = None,
) -> Agent[Any]:
    set_trace_processors([TRACE_PROCESSOR])
    return Agent(
        name="bench",
        tools=[function_tool(tool, timeout=timeout)],
        model=ScriptedModel(tool.__name__, batch),
    )


class OpenAIAgentsDriver:
    """``Runner.run`` inside one event loop per measured setting."""

    name = "openai-agents"

    def __init__(self) -> None:
        self.hung_variants: Mapping[str, str] = {
            "default": "function_tool defaults (no timeout)",
            "tool_timeout": f"function_tool(sync_tool, timeout={HUNG_TIMEOUT_SECONDS})",
            "async_wrapper_timeout": (
                f"function_tool(async wrapper awaiting asyncio.to_thread(sync_tool), "
                f"timeout={HUNG_TIMEOUT_SECONDS})"
            ),
        }

    def time_turns(self, kind: ToolKind, batch: int, repeats: int) -> list[float]:
        counter = CallCounter()
        agent = build_agent(make_tool(kind, counter), batch)

        async def run_turn() -> object:
            return (await Runner.run(agent, PROMPT)).final_output

        timings, finals = asyncio.run(time_async(run_turn, repeats))
        check_turns(self.name, counter, batch, finals)
        return timings

    def run_hung(self, variant: str, report: HungReport) -> None:
        function = report.tool.as_function()
        if variant == "async_wrapper_timeout":
            agent = build_agent(in_thread(function), 1, timeout=HUNG_TIMEOUT_SECONDS)
        else:
            timeout = HUNG_TIMEOUT_SECONDS if variant == "tool_timeout" else None
            agent = build_agent(function, 1, timeout=timeout)

        async def run() -> None:
            report.start()
            try:
                result = await Runner.run(agent, PROMPT)
            except Exception as error:
                report.returned(f"raised {error!r}")
                return
            tool_outputs = [
                item.get("output")
                for item in result.to_input_list()
                if isinstance(item, dict) and item.get("type") == "function_call_output"
            ]
            report.returned(f"final output {result.final_output!r}; tool outputs {tool_outputs!r}")

        asyncio.run(run())
        report.emit("event_loop_closed")


DRIVERS = (OpenAIAgentsDriver(),)
