"""The OpenAI Agents SDK on Temporal for ``bench.temporal``: its Temporal plugin
(``temporalio.openai_agents``, the ``temporalio-openai-agents`` package) with each tool an
activity made a tool by ``activity_as_tool``, and a model of this module's own answering the
same script as the others (no network): ``noop N`` asks for N no-op calls at once, ``hang
FILE`` for one call of the hung tool (sleeps 3 s, then writes ``FILE``; one attempt and a 1 s
``start_to_close``); then it answers with text. The tools are sync activities, run on the
worker's thread pool.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    Model,
    ModelProvider,
    ModelResponse,
    Runner,
    Usage,
    set_tracing_disabled,
)
from openai.types.responses import ResponseFunctionToolCall
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
from temporalio.openai_agents import workflow as agents_workflow
from temporalio.openai_agents.testing import ResponseBuilders


class _Script(Model):
    """The scripted model: a function of the conversation."""

    async def get_response(self, system_instructions: str | None, input: Any,
                           *args: Any, **kwargs: Any) -> ModelResponse:
        items = [input] if isinstance(input, str) else list(input)
        if any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items):
            return ResponseBuilders.output_message("done")
        first = items[0]
        prompt = first if isinstance(first, str) else str(first.get("content"))
        kind, _, rest = prompt.partition(" ")
        if kind == "noop":
            calls = [ResponseFunctionToolCall(arguments="{}", call_id=f"c{i}", name="noop",
                                              type="function_call", id=f"i{i}",
                                              status="completed") for i in range(int(rest))]
        else:
            calls = [ResponseFunctionToolCall(arguments=f'{{"marker": "{rest}"}}',
                                              call_id="c0", name="hang",
                                              type="function_call", id="i0",
                                              status="completed")]
        return ModelResponse(output=list(calls), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class _Provider(ModelProvider):
    def get_model(self, model_name: str | None) -> Model:
        return _Script()


@activity.defn
def noop() -> str:
    """Does nothing."""
    return "ok"


@activity.defn
def hang(marker: str) -> str:
    """Hangs for 3 s, then writes ``marker``."""
    time.sleep(3)
    Path(marker).write_text("landed")
    return "finished"


@workflow.defn(name="bench_openai_agents")
class BenchWorkflow:
    """One agent run."""

    @workflow.run
    async def run(self, prompt: str) -> str:
        if prompt.startswith("hang "):
            tool = agents_workflow.activity_as_tool(
                hang, start_to_close_timeout=timedelta(seconds=1),
                retry_policy=RetryPolicy(maximum_attempts=1))
        else:
            tool = agents_workflow.activity_as_tool(noop,
                                                    start_to_close_timeout=timedelta(seconds=60))
        agent = Agent(name="bench", instructions="Run the tools.", tools=[tool])
        result = await Runner.run(agent, prompt)
        return str(result.final_output)


def plugin() -> OpenAIAgentsPlugin:
    """The SDK's plugin with the scripted model; its tracing off (no OpenAI key to export to)."""
    set_tracing_disabled(True)
    return OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=30)),
        model_provider=_Provider())


WORKFLOW = BenchWorkflow
ACTIVITIES = [noop, hang]
