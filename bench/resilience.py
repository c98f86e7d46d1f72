"""What a circuit breaker saves when a tool's dependency is down.

100 runs, 10 at a time (a client's pool), each asking the model once; the model calls
``lookup``, whose dependency hangs: every call that runs times out at 1 s. Without a breaker
every run's call goes out and waits its second; with one, the breaker opens after 5 timeouts
in a row and every later call is answered at once (``circuit_open``) without running; hiding
the tool while open also spares the model the turn spent reading that error.
``python -m bench.resilience`` prints the table; ``make bench`` includes it.
"""

from __future__ import annotations

import argparse
import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from toolvisor import Agent, CallContext, Completed, Limits, Ok, Tool
from toolvisor.contract import ModelRequest, ToolResultMessage
from toolvisor.resilience import Breaker, Resilience
from toolvisor.testing import FunctionModel, call, calls

RUNS = 100
AT_ONCE = 10
TIMEOUT = 1.0
SETUPS: dict[str, Resilience | None] = {
    "no breaker": None,
    "breaker (5 in a row, open 60 s)": Resilience(
        breaker=Breaker(consecutive_failures=5, open_for=60)),
    "breaker, tool hidden while open": Resilience(
        breaker=Breaker(consecutive_failures=5, open_for=60, hide_while_open=True)),
}


def measure_one(label: str, resilience: Resilience | None) -> dict[str, Any]:
    """``RUNS`` runs against the down dependency, ``AT_ONCE`` at a time."""
    made = itertools.count()
    turns = itertools.count()
    lock = threading.Lock()

    def lookup(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        with lock:
            next(made)
        while not ctx.cancelled.is_set():  # the dependency hangs: short sleeps as work
            time.sleep(0.01)
        return Ok("too late")

    def respond(request: ModelRequest) -> Any:
        with lock:
            next(turns)
        offered = any(spec.name == "lookup" for spec in request.tools)
        if isinstance(request.messages[-1], ToolResultMessage) or not offered:
            return "the price service is down; try later"
        return calls(call("lookup", {"symbol": "ACME"}))

    guard = None if resilience is None else {"lookup": resilience}
    with Agent(FunctionModel(respond), [Tool("lookup", handler=lookup, timeout=TIMEOUT)],
               limits=Limits(per_tool=guard, concurrent_calls=RUNS)) as agent, \
            ThreadPoolExecutor(AT_ONCE) as pool:
        started = time.perf_counter()
        outcomes = list(pool.map(lambda i: agent.run(f"price of ACME, run {i}"), range(RUNS)))
        wall = time.perf_counter() - started
    assert all(isinstance(o, Completed) for o in outcomes), outcomes[:1]
    refused = sum('"circuit_open"' in m.content for o in outcomes for m in o.messages
                  if isinstance(m, ToolResultMessage))
    return {"setup": label, "runs": RUNS, "wall_s": wall, "calls_made": next(made),
            "calls_refused": refused, "model_turns": next(turns)}


def measure() -> list[dict[str, Any]]:
    return [measure_one(label, resilience) for label, resilience in SETUPS.items()]


def table(rows: list[dict[str, Any]]) -> str:
    out = [f"### When a tool's dependency is down: {RUNS} runs, {AT_ONCE} at a time, each "
           f"call timing out at {TIMEOUT:g} s", "",
           "| setup | wall s | calls made (each waited 1 s) | calls refused at once | "
           "model turns |", "|---|---|---|---|---|"]
    out += [f"| {r['setup']} | {r['wall_s']:.2f} | {r['calls_made']} | {r['calls_refused']} "
            f"| {r['model_turns']} |" for r in rows]
    return "\n".join(out)


def main() -> None:
    argparse.ArgumentParser(prog="python -m bench.resilience", description=__doc__).parse_args()
    print(table(measure()))


if __name__ == "__main__":
    main()
