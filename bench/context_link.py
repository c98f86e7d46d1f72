"""What a handler pays to use its call context out of process: a ``ctx.state.get`` and a
journaled ``run_json`` step (a real SQLite store) timed inside the handler, in a thread (the
in-process floor), a worker process and a Ray task (served by the agent over their links)."""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench import _handlers
from toolvisor import CallContext, Ok, Tool, ToolCall
from toolvisor.durable import DurableEffects, SqliteRunStore
from toolvisor.executor import ToolRunner
from toolvisor.machine import StateView

ISOLATIONS = ("thread", "process", "ray")
READS = 2000
STEPS = 200


def _timed(runner: ToolRunner, handler: Any, isolation: str, count: int,
           ctx: CallContext) -> float:
    tool = Tool(name="ctx_user", handler=handler, isolation=isolation)  # type: ignore[arg-type]
    result = runner.run(tool, {"count": count}, ctx)
    assert isinstance(result, Ok), result
    return float(result.value)


def measure(repeats: int) -> list[dict[str, Any]]:
    """One row per isolation: median microseconds per state read and per journaled step."""
    rows = []
    with tempfile.TemporaryDirectory() as work, \
            SqliteRunStore(Path(work) / "runs.sqlite") as store, \
            ToolRunner(tool_timeout=120.0, process_workers=1) as runner:
        store.create_run("bench")
        for isolation in ISOLATIONS:
            reads, steps = [], []
            for attempt in range(repeats + 1):  # the first warms the worker up
                call_id = f"{isolation}-{attempt}"
                ctx = CallContext(session_id="bench", tool_call=ToolCall(id=call_id,
                                                                        name="ctx_user"),
                                  state=StateView({"city": "Lyon"}),
                                  durable=DurableEffects(store, "bench", call_id))
                read = _timed(runner, _handlers.state_reads, isolation, READS, ctx)
                step = _timed(runner, _handlers.journal_steps, isolation, STEPS, ctx)
                if attempt:
                    reads.append(read)
                    steps.append(step)
            rows.append({"isolation": isolation, "state_get_us": statistics.median(reads),
                         "run_json_step_us": statistics.median(steps)})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    floor = next(r for r in rows if r["isolation"] == "thread")
    out = ["### The call context out of process (timed in the handler, median)", "",
           "| isolation | `ctx.state.get` | x thread | journaled `run_json` step | x thread |",
           "|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['isolation']} | {r['state_get_us']:.1f} us | "
                   f"{r['state_get_us'] / floor['state_get_us']:.0f} | "
                   f"{r['run_json_step_us']:.0f} us | "
                   f"{r['run_json_step_us'] / floor['run_json_step_us']:.1f} |")
    out += ["", "(`process` and `ray` handlers reach the context over their link to the agent: "
            "one round trip per use; a step's function runs in the worker, called back.)"]
    return "\n".join(out)


if __name__ == "__main__":
    from bench._toolvisor import start_ray
    from toolvisor.isolation import prepare_process_isolation

    prepare_process_isolation()
    start_ray()
    print(table(measure(5)))
