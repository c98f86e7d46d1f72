"""pydantic-ai on Temporal for ``bench.temporal``: its own ``TemporalDurability`` capability and
a workflow of the shape its docs show, driven by its test double ``FunctionModel``.

A prompt ``noop N`` asks for N calls of the no-op tool at once, ``hang FILE`` for one call of
the hung tool (sleeps 3 s, then writes ``FILE``); then the model answers with text. The
no-op agent has pydantic-ai's default activity settings; the hung tool's agent gives every
activity one attempt and a 1 s ``start_to_close`` (Temporal's timeout is the tool's).
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import (
    PydanticAIPlugin,
    PydanticAIWorkflow,
    TemporalDurability,
)
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio import workflow
from temporalio.common import RetryPolicy


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returned = [p for m in messages for p in getattr(m, "parts", ())
                if isinstance(p, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart("done")])
    prompt = str(messages[0].parts[0].content)  # type: ignore[union-attr]
    kind, _, rest = prompt.partition(" ")
    if kind == "noop":
        return ModelResponse(parts=[ToolCallPart("noop", {}, tool_call_id=f"c{i}")
                                    for i in range(int(rest))])
    return ModelResponse(parts=[ToolCallPart("hang", {"marker": rest}, tool_call_id="c0")])


agent = Agent(FunctionModel(_respond), name="bench_pa",
              capabilities=[TemporalDurability()])
hung_agent = Agent(FunctionModel(_respond), name="bench_pa_hung", capabilities=[
    TemporalDurability(activity_config={"start_to_close_timeout": timedelta(seconds=1),
                                        "retry_policy": RetryPolicy(maximum_attempts=1)})])


@agent.tool_plain
def noop() -> str:
    """Does nothing."""
    return "ok"


@hung_agent.tool_plain
def hang(marker: str) -> str:
    """Hangs for 3 s, then writes ``marker``."""
    time.sleep(3)
    Path(marker).write_text("landed")
    return "finished"


@workflow.defn(name="bench_pydantic_ai")
class BenchWorkflow(PydanticAIWorkflow):
    """One agent run."""

    __pydantic_ai_agents__ = (agent, hung_agent)

    @workflow.run
    async def run(self, prompt: str) -> str:
        chosen = hung_agent if prompt.startswith("hang ") else agent
        result = await chosen.run(prompt)
        return str(result.output)


PLUGIN = PydanticAIPlugin
WORKFLOW = BenchWorkflow
