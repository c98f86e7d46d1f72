"""The model half of a turn: N concurrent runs on one agent, each two 100 ms model turns around
one no-op tool call, with an async model (``asyncio.sleep``) and a sync one (``time.sleep``);
pydantic-ai on the same workload; and how long a quick run takes while another run's model hangs.

Each measurement runs in a child process of its own, so its peak RSS and thread count are its
own. ``python -m bench.model_half`` prints the table; ``make bench`` includes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._handlers import no_op
from toolvisor import Agent, Completed, Limits, Tool
from toolvisor.contract import ModelRequest, ToolResultMessage, UserMessage
from toolvisor.testing import FunctionModel, call, calls

MODEL_SECONDS = 0.1
HANG_SECONDS = 5.0
RUNS = (1, 10, 100, 1000)
TARGETS = {"x100": 1.5, "x1000": 3.0, "rss_mib_1000": 512.0, "threads_1000": 100,
           "hung_delay_ms": 10.0}


class PeakThreads:
    """Samples the live thread count every 2 ms on a daemon thread of its own (not counted)."""

    def __init__(self) -> None:
        self.peak = threading.active_count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, threading.active_count() - 1)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def _peak_rss_mib() -> float:
    """This process's peak RSS. ``VmHWM`` starts afresh at ``exec``; ``ru_maxrss`` would keep
    the peak of the (much larger) parent that forked the child."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def toolvisor_runs(kind: str, runs: int) -> dict[str, Any]:
    """``runs`` concurrent runs of the workload on one toolvisor agent."""
    def answer(request: ModelRequest) -> Any:
        if isinstance(request.messages[-1], ToolResultMessage):
            return "done"
        return calls(call("noop", id="c1"))

    async def async_model(request: ModelRequest) -> Any:
        await asyncio.sleep(MODEL_SECONDS)
        return answer(request)

    def sync_model(request: ModelRequest) -> Any:
        time.sleep(MODEL_SECONDS)
        return answer(request)

    model = FunctionModel(async_model if kind == "async" else sync_model, keep_requests=False)
    with Agent(model, [Tool("noop", handler=no_op)], limits=Limits(turns=4)) as agent:
        asyncio.run(_gather(agent.arun, 1))  # warm up: threads, loop, imports
        threads = PeakThreads()
        started = time.perf_counter()
        outcomes = asyncio.run(_gather(agent.arun, runs))
        wall = time.perf_counter() - started
        peak = threads.stop()
    assert all(isinstance(o, Completed) and o.turns == 2 for o in outcomes), outcomes[:1]
    return {"framework": "toolvisor", "model": kind, "runs": runs, "wall_ms": wall * 1e3,
            "peak_rss_mib": _peak_rss_mib(), "peak_threads": peak}


def pydantic_ai_runs(kind: str, runs: int) -> dict[str, Any]:
    """The same workload in pydantic-ai: an async ``FunctionModel``, ``asyncio.gather``."""
    from pydantic_ai import Agent  # noqa: PLC0415
    from pydantic_ai.messages import (  # noqa: PLC0415
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: PLC0415

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(MODEL_SECONDS)
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart)
                                                  for p in last.parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("noop", {}, tool_call_id="c1")])

    def noop() -> None:
        """Does nothing."""

    agent = Agent(FunctionModel(respond), tools=[noop])

    async def run(prompt: str) -> Any:
        return (await agent.run(prompt)).output

    asyncio.run(_gather(run, 1))
    threads = PeakThreads()
    started = time.perf_counter()
    outputs = asyncio.run(_gather(run, runs))
    wall = time.perf_counter() - started
    peak = threads.stop()
    assert outputs == ["done"] * runs
    return {"framework": "pydantic-ai", "model": kind, "runs": runs, "wall_ms": wall * 1e3,
            "peak_rss_mib": _peak_rss_mib(), "peak_threads": peak}


async def _gather(run: Callable[[str], Any], runs: int) -> list[Any]:
    return list(await asyncio.gather(*(run(f"run {i}") for i in range(runs))))


def hung_neighbour() -> dict[str, Any]:
    """A quick run's wall time alone, and while another run's sync model hangs 5 s."""
    in_model = threading.Event()

    def model(request: ModelRequest) -> str:
        first = request.messages[0]
        if isinstance(first, UserMessage) and first.content == "hang":
            in_model.set()
            time.sleep(HANG_SECONDS)
        return "done"

    def quick(agent: Agent) -> float:
        samples = []
        for _ in range(7):
            started = time.perf_counter()
            agent.run("quick")
            samples.append(time.perf_counter() - started)
        return sorted(samples)[3] * 1e3

    with Agent(FunctionModel(model)) as agent:
        alone = quick(agent)
        hung = threading.Thread(target=lambda: agent.run("hang", wait_for=1.0), daemon=True)
        hung.start()
        in_model.wait()
        beside = quick(agent)
    return {"quick_alone_ms": alone, "quick_beside_hung_ms": beside,
            "delay_ms": beside - alone}


def _child(args: list[str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "bench.model_half", "--child", *args],
                          capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-300:]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(runs: tuple[int, ...] = RUNS, *, competitors: bool = True) -> list[dict[str, Any]]:
    rows = [_child(["toolvisor", kind, str(n)]) for kind in ("async", "sync") for n in runs]
    if competitors:
        rows += [_child(["pydantic-ai", "async", str(n)]) for n in runs]
    rows.append({"kind": "hung", **_child(["hung"])})
    return rows


def _verdict(ok: bool, target: str) -> str:
    return f"met ({target})" if ok else f"MISSED ({target})"


def table(rows: list[dict[str, Any]]) -> str:
    out = ["### The model half: N concurrent runs of two 100 ms model turns around one no-op "
           "tool", "", "| framework | model | runs | wall ms | x one run | peak RSS MiB | "
           "peak threads | target |", "|---|---|---|---|---|---|---|---|"]
    ones = {(r["framework"], r["model"]): r["wall_ms"] for r in rows
            if r.get("runs") == 1 and "wall_ms" in r}
    walls = {(r["framework"], r["model"], r["runs"]): r["wall_ms"] for r in rows
             if "wall_ms" in r}
    for r in rows:
        if "error" in r and r.get("kind") != "hung":
            out.append(f"| ? | ? | ? | error: {r['error']} | | | | |")
            continue
        if "wall_ms" not in r:
            continue
        ratio = r["wall_ms"] / ones[(r["framework"], r["model"])]
        target = ""
        if r["framework"] == "toolvisor" and r["runs"] == 100:
            target = _verdict(ratio <= TARGETS["x100"], "<= 1.5x")
        elif r["framework"] == "toolvisor" and r["runs"] == 1000:
            checks = [_verdict(ratio <= TARGETS["x1000"], "<= 3x")]
            if r["model"] == "async":
                checks += [_verdict(r["peak_rss_mib"] < TARGETS["rss_mib_1000"], "< 512 MiB"),
                           _verdict(r["peak_threads"] < TARGETS["threads_1000"],
                                    "< 100 threads")]
                theirs = walls.get(("pydantic-ai", "async", 1000))
                if theirs is not None:
                    checks.append(_verdict(r["wall_ms"] < theirs, "faster than pydantic-ai"))
            target = "; ".join(checks)
        out.append(f"| {r['framework']} | {r['model']} | {r['runs']} | {r['wall_ms']:.0f} | "
                   f"{ratio:.2f} | {r['peak_rss_mib']:.0f} | {r['peak_threads']} | {target} |")
    hung = next(r for r in rows if r.get("kind") == "hung")
    out += ["", "### A quick run while another run's sync model hangs for 5 s", ""]
    if "error" in hung:
        out.append(f"error: {hung['error']}")
    else:
        out += ["| quick run alone | beside the hung model | delay | target |",
                "|---|---|---|---|",
                f"| {hung['quick_alone_ms']:.2f} ms | {hung['quick_beside_hung_ms']:.2f} ms | "
                f"{hung['delay_ms']:+.2f} ms | "
                f"{_verdict(hung['delay_ms'] <= TARGETS['hung_delay_ms'], '<= 10 ms')} |"]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.model_half", description=__doc__)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, nargs="+", default=list(RUNS))
    parser.add_argument("--no-competitors", action="store_true")
    args = parser.parse_args()
    if args.child:
        what = args.child
        if what[0] == "hung":
            result = hung_neighbour()
        elif what[0] == "toolvisor":
            result = toolvisor_runs(what[1], int(what[2]))
        else:
            result = pydantic_ai_runs(what[1], int(what[2]))
        print(json.dumps(result))
        return
    print(table(measure(tuple(args.runs), competitors=not args.no_competitors)))


if __name__ == "__main__":
    main()
