"""toolvisor's side of the benchmarks: whole model turns through ``Agent.run``.

Every figure is the median of repeated runs in this process. A turn is: the scripted model asks
for N calls, then answers with text once it sees their results; so the per-call figure includes
each turn's fixed cost spread over N calls, as the competitors' figures do.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import _handlers
from toolvisor import Agent, Completed, Limits, Tool
from toolvisor.contract import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from toolvisor.machine import MachineConfig, TurnMachine
from toolvisor.testing import FunctionModel

Row = dict[str, Any]
ISOLATIONS = ("thread", "process", "asyncio", "ray")
MAX_PROCESS_WORKERS = 32  # worker processes for the sleeping batches (no-op batches use 2)
HANDLERS: dict[str, dict[str, Callable[..., Any]]] = {
    "no_op": {"thread": _handlers.no_op, "process": _handlers.no_op,
              "asyncio": _handlers.async_no_op, "ray": _handlers.no_op},
    "nap": {"thread": _handlers.nap, "process": _handlers.nap, "asyncio": _handlers.async_nap,
            "ray": _handlers.nap},
}


def start_ray() -> None:
    """One local Ray cluster for every ``ray`` row (else each agent would start its own)."""
    import ray  # noqa: PLC0415 - the optional extra, installed with the bench's dev extra

    root = str(Path(__file__).resolve().parent.parent)  # where workers import bench's handlers
    ray.init(include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": root}})


def batch_model(size: int, tool_name: str) -> FunctionModel:
    """Asks for ``size`` calls when the last message is the user's, else answers 'done'."""
    def respond(request: ModelRequest) -> ModelResponse:
        if isinstance(request.messages[-1], UserMessage):
            calls = tuple(ToolCall(id=f"c{i}", name=tool_name) for i in range(size))
            return ModelResponse(tool_calls=calls)
        return ModelResponse(text="done")

    return FunctionModel(respond, keep_requests=False)


def median_turn_ms(agent: Agent, repeats: int) -> tuple[float, float, float]:
    agent.run("warm up")
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        outcome = agent.run("go")
        samples.append((time.perf_counter() - start) * 1000)
        assert isinstance(outcome, Completed), outcome
    return statistics.median(samples), min(samples), max(samples)


def turn_rows(repeats: int, sizes: tuple[int, ...]) -> list[Row]:
    rows: list[Row] = []
    for kind in ("no_op", "nap"):
        for isolation in ISOLATIONS:
            tool = Tool(name=kind, handler=HANDLERS[kind][isolation], isolation=isolation)
            for size in sizes:
                workers = min(size, MAX_PROCESS_WORKERS) if kind == "nap" else 2
                with Agent(batch_model(size, kind), [tool],
                           limits=Limits(process_workers=max(2, workers))) as agent:
                    median, low, high = median_turn_ms(agent, repeats)
                rows.append({"kind": "turn", "tool": kind, "isolation": isolation,
                             "batch": size, "turn_median_ms": median, "turn_min_ms": low,
                             "turn_max_ms": high, "per_call_median_us": median * 1000 / size})
    return rows


def floor_rows(repeats: int, sizes: tuple[int, ...]) -> list[Row]:
    """The floors: a plain function call, and a ThreadPoolExecutor running the batch."""
    rows: list[Row] = []
    for size in sizes:
        plain, pooled = [], []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            for _ in range(size):
                _handlers.no_op({})
            plain.append((time.perf_counter() - start) * 1e6 / size)
            with ThreadPoolExecutor(max_workers=size) as pool:
                start = time.perf_counter()
                list(pool.map(_handlers.no_op, [{}] * size))
                pooled.append((time.perf_counter() - start) * 1e6 / size)
        rows.append({"kind": "floor", "batch": size,
                     "plain_call_us": statistics.median(plain[1:]),
                     "thread_pool_us": statistics.median(pooled[1:])})
    return rows


def hung_rows(repeats: int) -> list[Row]:
    """A hung sync tool with a 200 ms timeout: from its deadline to when the model sees
    ``timeout``; for ``process`` also when its worker was killed and replaced."""
    rows: list[Row] = []
    handlers = {"thread": _handlers.hang, "process": _handlers.hang_hard,
                "asyncio": _handlers.async_hang, "ray": _handlers.hang_hard}
    for isolation, handler in handlers.items():
        seen_at: list[float] = []

        def respond(request: ModelRequest, seen: list[float] = seen_at) -> ModelResponse:
            if isinstance(request.messages[-1], UserMessage):
                return ModelResponse(tool_calls=(ToolCall(id="h", name="hang"),))
            seen.append(time.monotonic())
            return ModelResponse(text="done")

        tool = Tool(name="hang", handler=handler, isolation=isolation, timeout=0.2)
        lateness, replaced = [], []
        with Agent(FunctionModel(respond), [tool]) as agent:
            for _ in range(repeats):
                before = agent.runner.stats.workers_replaced
                start = time.monotonic()
                agent.run("go")
                # The handler starts within microseconds of the call; its deadline is start + 0.2
                # at the latest, so this slightly overstates the lateness, never understates it.
                lateness.append((seen_at[-1] - (start + 0.2)) * 1000)
                if isolation == "process":
                    while agent.runner.stats.workers_replaced == before:
                        time.sleep(0.001)
                    replaced.append((time.monotonic() - (start + 0.2)) * 1000)
        rows.append({"kind": "hung", "isolation": isolation,
                     "deadline_to_result_ms": statistics.median(lateness),
                     "worker_replaced_ms": statistics.median(replaced) if replaced else None})
    return rows


def history(size: int) -> list[Message]:
    """A turn history of ``size`` messages: user, assistant with a call, its tool result."""
    messages: list[Message] = []
    while len(messages) < size:
        n = len(messages)
        messages.append(UserMessage(content=f"question {n}: " + "x" * 150))
        messages.append(AssistantMessage(tool_calls=(ToolCall(id=f"c{n}", name="t",
                                                              arguments={"q": n}),)))
        messages.append(ToolResultMessage(tool_call_id=f"c{n}", name="t",
                                          content='{"answer": "' + "y" * 150 + '"}'))
    return messages[:size]


def checkpoint_rows(repeats: int) -> list[Row]:
    rows: list[Row] = []
    config = MachineConfig(tools=[Tool(name="t", handler=_handlers.no_op)])
    for size in (10, 100, 1000):
        machine = TurnMachine(config)
        machine.start(history(size))
        saves, loads, text = [], [], ""
        for _ in range(repeats + 1):
            start = time.perf_counter()
            text = machine.checkpoint().to_json()
            saves.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            restored = TurnMachine.restore(config, text)
            loads.append((time.perf_counter() - start) * 1000)
        assert restored.reemit() == machine.reemit()
        rows.append({"kind": "checkpoint", "messages": size,
                     "checkpoint_ms": statistics.median(saves[1:]),
                     "restore_ms": statistics.median(loads[1:]), "bytes": len(text.encode())})
    return rows
