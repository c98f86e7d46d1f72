"""What ``isolation="sandbox"`` costs per call, against ``process``: a fresh sandbox per call
(back to back, so each call waits for its sandbox to start; and spaced out, so a sandbox
started ahead is ready), reused sandboxes, and a hung sandboxed tool killed at its deadline.

Run alone with ``python -m bench.sandbox``; ``make bench`` runs it with the rest.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench import _handlers
from toolvisor import Err, Ok, Tool, ToolError
from toolvisor.executor import ToolRunner

CALLS = 15
COLD_CALLS = 7
SPACING = 2.0  # seconds between spaced calls: a sandbox started ahead is ready by then
HUNG_TIMEOUT = 0.2


def _tool(handler: Any, isolation: str, timeout: float | None = None,
          **options: Any) -> Tool:
    return Tool(name="t", handler=handler, isolation=isolation,  # type: ignore[arg-type]
                options=options or None, timeout=timeout)


def _call_ms(runner: ToolRunner, tool: Tool) -> float:
    start = time.perf_counter()
    result = runner.run(tool, {})
    elapsed = (time.perf_counter() - start) * 1000
    assert isinstance(result, Ok), result
    return elapsed


def _median_ms(runner: ToolRunner, tool: Tool, calls: int, spacing: float = 0.0) -> float:
    _call_ms(runner, tool)  # the pool starts on its first call
    times = []
    for _ in range(calls):
        if spacing:
            time.sleep(spacing)
        times.append(_call_ms(runner, tool))
    return statistics.median(times)


def measure(repeats: int = 5) -> list[dict[str, Any]]:
    """One row per way of running a no-op call, and the hung-tool row."""
    rows: list[dict[str, Any]] = []
    cases = [
        ("process", "a pooled worker process", _tool(_handlers.no_op, "process"), CALLS, 0.0),
        ("sandbox, reused", "a pooled sandbox, reused (`reuse=True`)",
         _tool(_handlers.no_op, "sandbox", reuse=True), CALLS, 0.0),
        ("sandbox, fresh per call, spaced", f"a fresh sandbox started ahead ({SPACING:g} s "
         "between calls)", _tool(_handlers.no_op, "sandbox"), COLD_CALLS, SPACING),
        ("sandbox, fresh per call, back to back", "a fresh sandbox, each call waiting for its "
         "start", _tool(_handlers.no_op, "sandbox"), COLD_CALLS, 0.0),
    ]
    for name, what, tool, calls, spacing in cases:
        with ToolRunner(tool_timeout=60.0, process_workers=1) as runner:
            rows.append({"kind": "call", "case": name, "what": what,
                         "call_ms": _median_ms(runner, tool, calls, spacing)})
    hung = _tool(_handlers.hang_hard, "sandbox", timeout=HUNG_TIMEOUT, reuse=True)
    after = _tool(_handlers.no_op, "sandbox", reuse=True)
    lateness, serving = [], []
    with ToolRunner(tool_timeout=60.0, process_workers=1) as runner:
        _call_ms(runner, after)
        for _ in range(repeats):
            start = time.perf_counter()
            result = runner.run(hung, {})
            seen = time.perf_counter()
            assert isinstance(result, Err) and isinstance(result.reason, ToolError)
            assert result.reason.reason == "timeout", result
            _call_ms(runner, after)  # waits for the killed sandbox's replacement
            lateness.append((seen - start - HUNG_TIMEOUT) * 1000)
            serving.append((time.perf_counter() - start - HUNG_TIMEOUT) * 1000)
    rows.append({"kind": "hung", "deadline_to_result_ms": statistics.median(lateness),
                 "replaced_and_serving_ms": statistics.median(serving)})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    calls = [r for r in rows if r["kind"] == "call"]
    floor = next(r for r in calls if r["case"] == "process")["call_ms"]
    out = ["### Sandboxed calls: one no-op call at a time (`ToolRunner.run`, median)", "",
           "| isolation | what runs the call | per call | x process |", "|---|---|---|---|"]
    for r in calls:
        out.append(f"| {r['case']} | {r['what']} | {r['call_ms']:.2f} ms | "
                   f"{r['call_ms'] / floor:.1f} |")
    hung = next(r for r in rows if r["kind"] == "hung")
    out += ["", f"A hung sandboxed tool with a {HUNG_TIMEOUT * 1000:.0f} ms timeout: the call "
            f"sees `timeout` +{hung['deadline_to_result_ms']:.1f} ms after its deadline; the "
            "sandbox is killed (its pid namespace with it) and a new one serves the next call "
            f"+{hung['replaced_and_serving_ms']:.0f} ms after the deadline."]
    return "\n".join(out)


if __name__ == "__main__":
    from toolvisor.isolation import prepare_process_isolation

    prepare_process_isolation()
    print(table(measure()))
