"""The agent factory of the worker benchmarks: ``python -m toolvisor.cli worker --store URL
bench._worker_agents:make_agent``.

A run's prompt picks its workload. ``half``: the model half of ``bench.model_half`` (two 100 ms
async model turns around one no-op tool call). ``hold LABEL``: one call of ``hold``, which
prints ``holding LABEL`` and, in a worker started with ``BENCH_HOLD=1``, waits until the
worker dies (elsewhere it answers at once; it is retryable). ``soak LABEL``: one batch of
``plain`` (not retryable), ``retryable`` and ``journaled`` calls, each appending its side
effect (``KIND LABEL``) to the file ``BENCH_LOG`` names and then working 0-300 ms, so that a
SIGKILL lands mid-call. ``BENCH_LEASE_TTL`` is the lease's time to live (seconds).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Any

from bench._handlers import no_op
from toolvisor import Agent, CallContext, Durability, Limits, Ok, Tool
from toolvisor.contract import ModelRequest, ToolResultMessage, UserMessage
from toolvisor.durable import RunStore
from toolvisor.testing import FunctionModel, call, calls

MODEL_SECONDS = 0.1
SOAK_KINDS = ("plain", "retryable", "journaled")


def _side_effect(kind: str, label: str) -> None:
    with open(os.environ["BENCH_LOG"], "a", encoding="utf-8") as log:
        log.write(f"{kind} {label}\n")


def _work() -> None:
    time.sleep(random.uniform(0.0, 0.3))


def plain(arguments: dict[str, Any]) -> Ok:
    _side_effect("plain", arguments["label"])
    _work()
    return Ok("plain done")


def retryable(arguments: dict[str, Any]) -> Ok:
    _side_effect("retryable", arguments["label"])
    _work()
    return Ok("retryable done")


def journaled(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    label = arguments["label"]
    ctx.durable_effects().run_json("effect", label,
                                   lambda value: _side_effect("journaled", value))
    _work()
    return Ok("journaled done")


def hold(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    print(f"holding {arguments['label']}", flush=True)
    if os.environ.get("BENCH_HOLD") == "1":
        ctx.cancelled.wait()
    return Ok("released")


TOOLS = [Tool("noop", handler=no_op), Tool("plain", handler=plain),
         Tool("retryable", handler=retryable, retryable=True),
         Tool("journaled", handler=journaled), Tool("hold", handler=hold, retryable=True)]


async def respond(request: ModelRequest) -> Any:
    prompt = str(next(m.content for m in request.messages if isinstance(m, UserMessage)))
    workload, _, label = prompt.partition(" ")
    answered = isinstance(request.messages[-1], ToolResultMessage)
    if workload == "half":
        await asyncio.sleep(MODEL_SECONDS)
        return "done" if answered else calls(call("noop", id="c1"))
    if answered:
        results = [str(m.content) for m in request.messages
                   if isinstance(m, ToolResultMessage)]
        return "done: " + " | ".join(results)
    if workload == "hold":
        return calls(call("hold", {"label": label}, id="c_hold"))
    return calls(*(call(kind, {"label": label}, id=f"c_{kind}") for kind in SOAK_KINDS))


def make_agent(store: RunStore) -> Agent:
    ttl = float(os.environ.get("BENCH_LEASE_TTL", "30"))
    return Agent(FunctionModel(respond), TOOLS, limits=Limits(turns=4),
                 durability=Durability(store=store, lease_ttl=ttl))
