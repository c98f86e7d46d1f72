"""One turn of many concurrent ``asyncio`` tools that each await 0.5 s: wall time, peak threads
and peak RSS, each size in a child process of its own (the issue's target: 10,000 calls within
2 s, under 512 MiB). A waiting call's actor parks, so the threads stay few."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

from bench._toolvisor import batch_model
from bench.model_half import PeakThreads, _peak_rss_mib
from toolvisor import Agent, Completed, Limits, Ok, Timeouts, Tool
from toolvisor.contract import ToolResultMessage

SIZES = (1000, 10000)
TARGET_S = 2.0  # 10,000 calls


async def half_second(arguments: dict[str, Any]) -> Ok:
    await asyncio.sleep(0.5)
    return Ok(None)


def one_turn(size: int) -> dict[str, Any]:
    tool = Tool(name="nap", handler=half_second, isolation="asyncio")
    # every call at once: the default max_concurrent_calls (1,024) would end the rest at once
    # as not_started, and the turn would time a few real calls among thousands refused
    with Agent(batch_model(size, "nap"), [tool], timeouts=Timeouts(tool=60.0),
               limits=Limits(concurrent_calls=size)) as agent:
        agent.run("warm up", wait_for=120)
        threads = PeakThreads()
        start = time.perf_counter()
        outcome = agent.run("go", wait_for=120)
        wall = time.perf_counter() - start
        peak = threads.stop()
    assert isinstance(outcome, Completed), outcome
    failed = [m.content for m in outcome.messages if isinstance(m, ToolResultMessage)
              and m.is_error]
    assert not failed, f"{len(failed)} calls failed, the first: {failed[0]}"
    return {"calls": size, "wall_s": wall, "peak_threads": peak,
            "peak_rss_mib": _peak_rss_mib()}


def measure() -> list[dict[str, Any]]:
    rows = []
    for size in SIZES:
        done = subprocess.run([sys.executable, "-m", "bench.wide_batch", str(size)],
                              capture_output=True, text=True, check=False, timeout=600)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0
                    else {"calls": size, "error": done.stderr.strip()[-300:]})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = ["### One turn of N concurrent asyncio tools awaiting 0.5 s", "",
           "| calls | wall | peak threads | peak RSS | target (10,000: <= 2 s, < 512 MiB) |",
           "|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['calls']} | failed: {r['error']} | | | |")
            continue
        target = ""
        if r["calls"] == 10000:
            met = r["wall_s"] <= TARGET_S and r["peak_rss_mib"] < 512
            target = "met" if met else f"MISSED ({r['wall_s']:.2f} s)"
        out.append(f"| {r['calls']} | {r['wall_s']:.2f} s | {r['peak_threads']} | "
                   f"{r['peak_rss_mib']:.0f} MiB | {target} |")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(json.dumps(one_turn(int(sys.argv[1]))))
    else:
        print(table(measure()))
