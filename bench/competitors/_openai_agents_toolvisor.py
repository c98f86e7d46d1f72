"""The OpenAI Agents SDK with toolvisor's adapter: the same scripted ``Model`` turns as
``_openai_agents``, the tools from ``SupervisedFunctionTools`` instead of ``function_tool``."""

import asyncio
from collections.abc import Mapping

from agents import Agent, Runner, set_trace_processors

from bench.competitors._adapted import HANG, HUNG_SETTING, READY, close_and_report, warm_up
from bench.competitors._driver import HungReport, time_async
from bench.competitors._openai_agents import TRACE_PROCESSOR, ScriptedModel
from bench.competitors._tools import PROMPT, CallCounter, ToolKind, check_turns, make_tool
from toolvisor import function_tool
from toolvisor.adapters.openai_agents import SupervisedFunctionTools


class OpenAIAgentsToolvisorDriver:
    """``Runner.run`` with ``SupervisedFunctionTools``, one event loop per measured setting."""

    name = "openai-agents + toolvisor"

    def __init__(self) -> None:
        self.hung_variants: Mapping[str, str] = {"adapter": HUNG_SETTING}

    def time_turns(self, kind: ToolKind, batch: int, repeats: int) -> list[float]:
        counter = CallCounter()
        tool = function_tool(make_tool(kind, counter))
        set_trace_processors([TRACE_PROCESSOR])
        with SupervisedFunctionTools([tool]) as tools:
            agent = Agent(name="bench", tools=list(tools.function_tools),
                          model=ScriptedModel(tool.name, batch))

            async def run_turn() -> object:
                return (await Runner.run(agent, PROMPT)).final_output

            timings, finals = asyncio.run(time_async(run_turn, repeats))
        check_turns(self.name, counter, batch, finals)
        return timings

    def run_hung(self, variant: str, report: HungReport) -> None:
        set_trace_processors([TRACE_PROCESSOR])
        tools = SupervisedFunctionTools([HANG, READY])
        warm_up(tools.calls)
        agent = Agent(name="bench", tools=list(tools.function_tools),
                      model=ScriptedModel(HANG.name, 1))

        async def run() -> None:
            report.start()
            result = await Runner.run(agent, PROMPT)
            outputs = [item.get("output") for item in result.to_input_list()
                       if isinstance(item, dict) and item.get("type") == "function_call_output"]
            report.returned(f"final output {result.final_output!r}; tool outputs {outputs!r}")

        asyncio.run(run())
        report.emit("event_loop_closed")
        close_and_report(tools.calls, report)


DRIVERS = (OpenAIAgentsToolvisorDriver(),)
