"""One supervised run against a real model: a crashing tool, a slow tool and a question.

The model is OpenAI's (``OPENAI_API_KEY``), any OpenAI-compatible server's (``OPENAI_BASE_URL``:
Ollama, vLLM, LM Studio, llama.cpp's server; ``OPENAI_MODEL`` names its model) or Anthropic's
(``ANTHROPIC_API_KEY``). The answer streams; each tool call runs in its own supervised actor,
and the lines below say what the supervisors and the policies did (only what happened). A run
that fails says why and exits 1. Without a key it says how to point it at a local server and
exits 0. Run it with ``python -m examples.real_model``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from pydantic import BaseModel

from toolvisor import (
    Agent,
    AskUser,
    CallContext,
    Failed,
    ModelRetryPolicy,
    Ok,
    RetryPolicy,
    Suspended,
    Tracing,
    tool,
)
from toolvisor.models import AnthropicModel, OpenAIChatModel, ProviderModel
from toolvisor.testing import capture_events

HOW_TO = """No model to talk to: set one of
  OPENAI_API_KEY=sk-...              OpenAI (OPENAI_MODEL, default gpt-4.1-mini)
  ANTHROPIC_API_KEY=sk-ant-...       Anthropic (ANTHROPIC_MODEL, default claude-sonnet-4-5)
or point it at a local OpenAI-compatible server, no key needed:
  ollama serve & ollama pull qwen3:8b
  OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=qwen3:8b python -m examples.real_model
(vLLM: http://localhost:8000/v1, LM Studio: http://localhost:1234/v1, llama.cpp: :8080/v1)"""

PROMPT = ("Get the stock of warehouse 'north', the price of 'widget', and order 3 widgets. "
          "Call all three tools at once, then say in one sentence what happened.")


class Warehouse(BaseModel):
    warehouse: str


class Item(BaseModel):
    item: str


class Order(BaseModel):
    item: str
    quantity: int


crashes = {"left": 1}


@tool(retryable=True)
def stock(arguments: Warehouse) -> Ok:
    """How many widgets a warehouse holds (its backend drops the first connection)."""
    if crashes["left"]:
        crashes["left"] -= 1
        raise ConnectionError("inventory backend reset the connection")
    return Ok({"warehouse": arguments.warehouse, "widgets": 40})


@tool(timeout=0.3)
def price(arguments: Item, ctx: CallContext) -> Ok:
    """An item's price (the pricing service hangs today)."""
    ctx.cancelled.wait(30)  # gives up as soon as the runtime cancels it
    return Ok("never seen")


@tool
def order(arguments: Order) -> AskUser:
    """Place an order; a human approves it first."""
    return AskUser(f"Order {arguments.quantity} x {arguments.item}?", ("yes", "no"))


def pick_model() -> ProviderModel | None:
    """The model the environment points at, streaming, or ``None``."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return OpenAIChatModel(os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"), stream=True,
                               api_key=os.environ.get("OPENAI_API_KEY") or "not-needed")
    if os.environ.get("ANTHROPIC_API_KEY"):
        return AnthropicModel(os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5"),
                              stream=True)
    return None


def narrate(run_id: str, event: str, data: dict[str, Any]) -> None:
    """Print what happened, as the run reports it."""
    if event == "model_text_delta":
        print(data["text"], end="", flush=True)
    elif event == "turn_started":
        print(f"\n-- turn {data['turn']}: asking the model")
    elif event == "model_replied":
        usage = data["usage"] or {}
        print(f"\n   {data['model']} answered ({data['finish_reason']}, "
              f"{usage.get('input_tokens', '?')} in / {usage.get('output_tokens', '?')} out)")
    elif event == "model_failed":
        print(f"\n   model call {data['attempt']} failed ({data['reason']}: {data['error']}); "
              "on_model_error decides")
    elif event == "call_finished":
        print(f"   {data['tool']:<6} attempt {data['attempt']}: {data['status']}")


def main() -> int:
    model = pick_model()
    if model is None:
        print(HOW_TO)
        return 0
    print(f"toolvisor against {model!r}\n{PROMPT}")
    with capture_events() as events, Agent(
            model, [stock, price, order], tracing=Tracing(on_progress=narrate),
            on_tool_error=RetryPolicy(max_attempts=2, base_delay=0.1),
            on_model_error=ModelRetryPolicy(max_attempts=3)) as agent:
        outcome = agent.run(PROMPT)
        while isinstance(outcome, Suspended):
            for question in outcome.questions:
                print(f"\n   {question.tool} asks: {question.question} -> the human says yes")
            outcome = agent.resume(outcome, {q.call_id: "yes" for q in outcome.questions})
        stats = agent.runner.stats
    print(f"\n\n{type(outcome).__name__} after {outcome.turns} turns; "
          f"{outcome.usage.input_tokens} input and {outcome.usage.output_tokens} output tokens")
    if isinstance(outcome, Failed):
        print(f"the run failed: {outcome.error}")
    for line in summary(events, stats.timeouts):
        print(line)
    return 1 if isinstance(outcome, Failed) else 0


def summary(events: list[dict[str, Any]], timeouts: int) -> list[str]:
    """What the supervisors and the policies did in the run, as its ``events`` tell it: only
    what happened (a run whose model never answered ran no tool)."""
    exits = [e["reason"] for e in events
             if e["event"] == "child_exited" and e.get("supervisor_id") == "tool_calls"]
    retried = sum(len(e["call_ids"]) for e in events if e["event"] == "retry_scheduled")
    lines = []
    if exits:
        lines.append(f"supervisor: {len(exits)} tool calls, each in its own actor, exited "
                     f"{sorted(set(exits))}")
    if retried:
        lines.append(f"policies: {retried} crashed call(s) retried in a fresh actor "
                     "(RetryPolicy)")
    if timeouts:
        lines.append(f"timeouts: {timeouts} call(s) past their deadline; the thread was given "
                     "up and the timeout went back to the model as the call's result (continue)")
    return lines


if __name__ == "__main__":
    sys.exit(main())
