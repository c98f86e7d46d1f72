"""pydantic-ai with toolvisor's adapter: the same ``FunctionModel`` turns as ``_pydantic_ai``,
the tools in a ``SupervisedToolset`` instead of ``Agent(tools=...)``."""

import asyncio
from collections.abc import Mapping

from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, RetryPromptPart, ToolReturnPart

from bench.competitors._adapted import HANG, HUNG_SETTING, READY, close_and_report, warm_up
from bench.competitors._driver import HungReport, time_async
from bench.competitors._pydantic_ai import scripted_model
from bench.competitors._tools import PROMPT, CallCounter, ToolKind, check_turns, make_tool
from toolvisor import function_tool
from toolvisor.adapters.pydantic_ai import SupervisedToolset


class PydanticAIToolvisorDriver:
    """``Agent.run`` with a ``SupervisedToolset``, one event loop per measured setting."""

    name = "pydantic-ai + toolvisor"

    def __init__(self) -> None:
        self.hung_variants: Mapping[str, str] = {"adapter": HUNG_SETTING}

    def time_turns(self, kind: ToolKind, batch: int, repeats: int) -> list[float]:
        counter = CallCounter()
        tool = function_tool(make_tool(kind, counter))
        with SupervisedToolset([tool]) as toolset:
            agent = Agent(scripted_model(tool.name, batch), toolsets=[toolset])

            async def run_turn() -> object:
                return (await agent.run(PROMPT)).output

            timings, finals = asyncio.run(time_async(run_turn, repeats))
        check_turns(self.name, counter, batch, finals)
        return timings

    def run_hung(self, variant: str, report: HungReport) -> None:
        toolset = SupervisedToolset([HANG, READY])
        agent = Agent(scripted_model(HANG.name, 1), toolsets=[toolset])
        warm_up(toolset.calls)

        async def run() -> None:
            report.start()
            result = await agent.run(PROMPT)
            tool_results = [part.content for message in result.all_messages()
                            if isinstance(message, ModelRequest) for part in message.parts
                            if isinstance(part, ToolReturnPart | RetryPromptPart)]
            report.returned(f"final output {result.output!r}; tool results {tool_results!r}")

        asyncio.run(run())
        report.emit("event_loop_closed")
        close_and_report(toolset.calls, report)


DRIVERS = (PydanticAIToolvisorDriver(),)
