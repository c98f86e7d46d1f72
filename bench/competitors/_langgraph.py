"""LangGraph's prebuilt ``ToolNode``, invoked on its own and inside a minimal agent graph.

``ToolNode.invoke`` runs the calls of one ``AIMessage`` on a fresh thread pool per invoke, sized
by the config's ``max_concurrency`` (default: the stdlib default, ``min(32, cpus + 4)``). The
node has no timeout option; the compiled graph has ``step_timeout``, which raises
``TimeoutError`` for a step that runs too long but cannot stop the tool's thread.

The graph is the usual loop: a model node (a scripted ``BaseChatModel``) -> ``tools_condition``
-> ``ToolNode`` -> back to the model.
"""

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.runtime import Runtime

from bench.competitors._driver import HungReport, time_sync
from bench.competitors._tools import (
    FINAL_TEXT,
    PROMPT,
    CallCounter,
    ToolKind,
    check_turns,
    make_tool,
)

HUNG_STEP_TIMEOUT_SECONDS = 0.2
STANDALONE_CONFIG: RunnableConfig = {"configurable": {"__pregel_runtime": Runtime()}}
"""What ``ToolNode.invoke`` needs outside a graph (langgraph 1.x): the runtime a graph injects."""


def tool_calls(tool_name: str, batch: int) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[
            {"name": tool_name, "args": {}, "id": f"call_{index}", "type": "tool_call"}
            for index in range(batch)
        ],
    )


class ScriptedChatModel(BaseChatModel):
    """Asks for ``requested_calls`` calls to ``tool_name``, then answers ``FINAL_TEXT``."""

    tool_name: str
    requested_calls: int

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(content=FINAL_TEXT)
        else:
            reply = tool_calls(self.tool_name, self.requested_calls)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def as_langchain_tool(function: Callable[[], str]) -> BaseTool:
    return tool(function)


def build_graph(function: Callable[[], str], batch: int) -> CompiledStateGraph[Any, Any, Any, Any]:
    model = ScriptedChatModel(tool_name=function.__name__, requested_calls=batch)

    def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode([as_langchain_tool(function)]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile()


def graph_answer(result: dict[str, Any]) -> object:
    messages: Sequence[BaseMessage] = result["messages"]
    return messages[-1].content


class ToolNodeDriver:
    """``ToolNode.invoke`` on a state holding one ``AIMessage`` with N tool calls.

    There is no model turn here: the timing is the tool-execution step alone, so it is a lower
    bound for a LangGraph turn; ``GraphDriver`` measures a whole one.
    """

    name = "langgraph ToolNode"

    def __init__(self) -> None:
        self.hung_variants: Mapping[str, str] = {
            "default": "ToolNode defaults (it has no timeout option)"
        }

    def time_turns(self, kind: ToolKind, batch: int, repeats: int) -> list[float]:
        counter = CallCounter()
        function = make_tool(kind, counter)
        node = ToolNode([as_langchain_tool(function)])
        state = {"messages": [HumanMessage(PROMPT), tool_calls(function.__name__, batch)]}

        def run_turn() -> object:
            results = node.invoke(state, STANDALONE_CONFIG)["messages"]
            return FINAL_TEXT if len(results) == batch else results

        timings, finals = time_sync(run_turn, repeats)
        check_turns(self.name, counter, batch, finals)
        return timings

    def run_hung(self, variant: str, report: HungReport) -> None:
        function = report.tool.as_function()
        node = ToolNode([as_langchain_tool(function)])
        state = {"messages": [tool_calls(function.__name__, 1)]}
        report.start()
        results = node.invoke(state, STANDALONE_CONFIG)["messages"]
        report.returned(f"tool messages {[message.content for message in results]!r}")


class GraphDriver:
    """``invoke`` on a compiled StateGraph: scripted model node, ``ToolNode``, model again."""

    name = "langgraph graph"

    def __init__(self) -> None:
        self.hung_variants: Mapping[str, str] = {
            "default": "compiled graph defaults (no step timeout)",
            "step_timeout": f"graph.step_timeout = {HUNG_STEP_TIMEOUT_SECONDS}; invoke",
            "step_timeout_async": f"graph.step_timeout = {HUNG_STEP_TIMEOUT_SECONDS}; ainvoke",
        }

    def time_turns(self, kind: ToolKind, batch: int, repeats: int) -> list[float]:
        counter = CallCounter()
        graph = build_graph(make_tool(kind, counter), batch)
        prompt = {"messages": [HumanMessage(PROMPT)]}

        def run_turn() -> object:
            return graph_answer(graph.invoke(prompt))

        timings, finals = time_sync(run_turn, repeats)
        check_turns(self.name, counter, batch, finals)
        return timings

    def run_hung(self, variant: str, report: HungReport) -> None:
        graph = build_graph(report.tool.as_function(), 1)
        prompt = {"messages": [HumanMessage(PROMPT)]}
        if variant != "default":
            graph.step_timeout = HUNG_STEP_TIMEOUT_SECONDS
        if variant != "step_timeout_async":
            report.start()
            report.returned(f"final answer {graph_answer(graph.invoke(prompt))!r}")
            return

        async def run() -> None:
            report.start()
            try:
                answer = graph_answer(await graph.ainvoke(prompt))
            except Exception as error:
                report.returned(f"raised {error!r}")
                return
            report.returned(f"final answer {answer!r}")

        asyncio.run(run())
        report.emit("event_loop_closed")


DRIVERS = (ToolNodeDriver(), GraphDriver())
