"""LangGraph with toolvisor's adapter: the same turns as ``_langgraph``, the ``ToolNode`` the
one ``SupervisedTools.node()`` makes (its calls through ``wrap_tool_call``)."""

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import tools_condition

from bench.competitors._adapted import HANG, HUNG_SETTING, READY, close_and_report, warm_up
from bench.competitors._driver import HungReport, time_sync
from bench.competitors._langgraph import (
    STANDALONE_CONFIG,
    ScriptedChatModel,
    graph_answer,
    tool_calls,
)
from bench.competitors._tools import (
    FINAL_TEXT,
    PROMPT,
    CallCounter,
    ToolKind,
    check_turns,
    make_tool,
)
from toolvisor import Tool, function_tool
from toolvisor.adapters.langgraph import SupervisedTools


def build_graph(tools: SupervisedTools, tool: Tool, batch: int
                ) -> CompiledStateGraph[Any, Any, Any, Any]:
    """``_langgraph.build_graph`` with the supervised ``ToolNode``."""
    model = ScriptedChatModel(tool_name=tool.name, requested_calls=batch)

    def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", tools.node())
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile()


class ToolNodeToolvisorDriver:
    """``invoke`` of the supervised ``ToolNode`` on one ``AIMessage`` with N tool calls."""

    name = "langgraph ToolNode + toolvisor"

    def __init__(self) -> None:
        self.hung_variants: Mapping[str, str] = {"adapter": HUNG_SETTING}

    def time_turns(self, kind: ToolKind, batch: int, repeats: int) -> list[float]:
        counter = CallCounter()
        tool = function_tool(make_tool(kind, counter))
        state = {"messages": [HumanMessage(PROMPT), tool_calls(tool.name, batch)]}
        with SupervisedTools([tool]) as tools:
            node = tools.node()

            def run_turn() -> object:
                results = node.invoke(state, STANDALONE_CONFIG)["messages"]
                return FINAL_TEXT if len(results) == batch else results

            timings, finals = time_sync(run_turn, repeats)
        check_turns(self.name, counter, batch, finals)
        return timings

    def run_hung(self, variant: str, report: HungReport) -> None:
        tools = SupervisedTools([HANG, READY])
        state = {"messages": [tool_calls(HANG.name, 1)]}
        warm_up(tools.calls)
        report.start()
        results = tools.node().invoke(state, STANDALONE_CONFIG)["messages"]
        report.returned(f"tool messages {[message.content for message in results]!r}")
        close_and_report(tools.calls, report)


class GraphToolvisorDriver:
    """``invoke`` on the compiled graph with the supervised ``ToolNode``."""

    name = "langgraph graph + toolvisor"

    def __init__(self) -> None:
        self.hung_variants: Mapping[str, str] = {"adapter": HUNG_SETTING}

    def time_turns(self, kind: ToolKind, batch: int, repeats: int) -> list[float]:
        counter = CallCounter()
        tool = function_tool(make_tool(kind, counter))
        prompt = {"messages": [HumanMessage(PROMPT)]}
        with SupervisedTools([tool]) as tools:
            graph = build_graph(tools, tool, batch)

            def run_turn() -> object:
                return graph_answer(graph.invoke(prompt))

            timings, finals = time_sync(run_turn, repeats)
        check_turns(self.name, counter, batch, finals)
        return timings

    def run_hung(self, variant: str, report: HungReport) -> None:
        tools = SupervisedTools([HANG, READY])
        graph = build_graph(tools, HANG, 1)
        warm_up(tools.calls)
        report.start()
        answer = graph_answer(graph.invoke({"messages": [HumanMessage(PROMPT)]}))
        report.returned(f"final answer {answer!r}")
        close_and_report(tools.calls, report)


DRIVERS = (ToolNodeToolvisorDriver(), GraphToolvisorDriver())
