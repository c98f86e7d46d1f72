"""pydantic-ai driven by its own test double, ``FunctionModel``.

Plain sync functions registered with ``Agent(tools=[...])``; pydantic-ai runs the calls of one
response concurrently, each sync tool on an anyio worker thread. Its timeout option is
``Agent(tool_timeout=...)`` (per tool: ``Tool(timeout=...)``): the model is told "Timed out
after ... seconds." and the run goes on, while the worker thread is abandoned, not stopped.
"""

import asyncio
from collections.abc import Callable, Mapping

from pydantic_ai import Agent
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


def scripted_model(tool_name: str, batch: int) -> FunctionModel:
    """Ask for ``batch`` calls to ``tool_name``; answer ``FINAL_TEXT`` once results came back."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(
            isinstance(part, ToolReturnPart | RetryPromptPart) for part in last.parts
        ):
            return ModelResponse(parts=[TextPart(FINAL_TEXT)])
        return ModelResponse(
            parts=[
                ToolCallPart(tool_name, {}, tool_call_id=f"call_{index}") for index in range(batch)
            ]
        )

    return FunctionModel(respond)


def build_agent(tool: Callable[[], str], batch: int, tool_timeout: float | None = None) -> Agent:
    return Agent(scripted_model(tool.__name__, batch), tools=[tool], tool_timeout=tool_timeout)


class PydanticAIDriver:
    """``Agent.run`` inside one event loop per measured setting."""

    name = "pydantic-ai"

    def __init__(self) -> None:
        self.hung_variants: Mapping[str, str] = {
            "default": "Agent defaults (no timeout)",
            "tool_timeout": f"Agent(tool_timeout={HUNG_TIMEOUT_SECONDS})",
        }

    def time_turns(self, kind: ToolKind, batch: int, repeats: int) -> list[float]:
        counter = CallCounter()
        agent = build_agent(make_tool(kind, counter), batch)

        async def run_turn() -> object:
            return (await agent.run(PROMPT)).output

        timings, finals = asyncio.run(time_async(run_turn, repeats))
        check_turns(self.name, counter, batch, finals)
        return timings

    def run_hung(self, variant: str, report: HungReport) -> None:
        timeout = HUNG_TIMEOUT_SECONDS if variant == "tool_timeout" else None
        agent = build_agent(report.tool.as_function(), 1, tool_timeout=timeout)

        async def run() -> None:
            report.start()
            try:
                result = await agent.run(PROMPT)
            except Exception as error:
                report.returned(f"raised {error!r}")
                return
            tool_results = [
                part.content
                for message in result.all_messages()
                if isinstance(message, ModelRequest)
                for part in message.parts
                if isinstance(part, ToolReturnPart | RetryPromptPart)
            ]
            report.returned(f"final output {result.output!r}; tool results {tool_results!r}")

        asyncio.run(run())
        report.emit("event_loop_closed")


DRIVERS = (PydanticAIDriver(),)
