"""Benchmark the ToolRunner and ToolCallActor: per-call overhead, concurrency, deadline accuracy.

Run: ``.venv/bin/python -m bench.bench_runner`` (prints tables; timings are wall clock, median
of several rounds, on whatever else the machine is doing).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench._handlers import (
    async_hang,
    async_nap,
    async_no_op,
    hang,
    hang_hard,
    nap,
    no_op,
)
from toolvisor import Tool, ToolCall
from toolvisor.actors import ToolCallDispatcher
from toolvisor.call import execute
from toolvisor.contract import HandlerResult
from toolvisor.executor import ToolRunner
from toolvisor.isolation import prepare_process_isolation
from toolvisor.supervisors import DynamicSupervisor

ROUNDS = 15


NO_OPS = {
    "thread": Tool(name="no_op", handler=no_op),
    "process": Tool(name="no_op", handler=no_op, isolation="process"),
    "asyncio": Tool(name="no_op", handler=async_no_op),
}


def per_call_us(run_batch: Callable[[int], Any], size: int) -> float:
    run_batch(size)  # warm up
    samples = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        run_batch(size)
        samples.append((time.perf_counter() - start) / size * 1e6)
    return statistics.median(samples)


def overhead_table(runner: ToolRunner, dispatcher: ToolCallDispatcher) -> None:
    plain = NO_OPS["thread"]
    rows: dict[str, Callable[[int], Any]] = {
        "plain execute()": lambda n: [execute(plain, {}) for _ in range(n)],
    }
    pool = ThreadPoolExecutor(max_workers=100)
    rows["ThreadPoolExecutor(100)"] = lambda n: list(pool.map(lambda _: execute(plain, {}),
                                                              range(n)))
    for isolation, tool in NO_OPS.items():
        rows[f"runner {isolation}"] = (
            lambda n, t=tool: runner.run_batch([(t, {}, None)] * n))
        rows[f"actor+supervisor {isolation}"] = (
            lambda n, t=tool: dispatcher.dispatch(
                [(t, ToolCall(id=str(i), name=t.name), None) for i in range(n)]))
    print("\nper-call overhead of a no-op handler (us per call, median of "
          f"{ROUNDS} rounds)")
    print(f"{'':32}{'batch 1':>10}{'batch 10':>10}{'batch 100':>10}")
    for label, run in rows.items():
        cells = "".join(f"{per_call_us(run, size):10.1f}" for size in (1, 10, 100))
        print(f"{label:32}{cells}")
    pool.shutdown()


def sleeping_table(runner: ToolRunner, dispatcher: ToolCallDispatcher) -> None:
    print("\n100 calls that each sleep 50 ms: wall time (ms)")
    cases = {
        "thread": Tool(name="sleep", handler=nap),
        "asyncio": Tool(name="sleep", handler=async_nap),
        "process (2 workers)": Tool(name="sleep", handler=nap, isolation="process"),
    }
    for label, tool in cases.items():
        start = time.perf_counter()
        runner.run_batch([(tool, {}, None)] * 100)
        print(f"  runner {label:29}{(time.perf_counter() - start) * 1e3:8.1f}")
    for label in ("thread", "asyncio"):
        tool = cases[label]
        start = time.perf_counter()
        dispatcher.dispatch([(tool, ToolCall(id=str(i), name=tool.name), None)
                             for i in range(100)])
        print(f"  actor+supervisor {label:19}{(time.perf_counter() - start) * 1e3:8.1f}")


def deadline_table() -> None:
    print("\nhung tool, timeout 200 ms: deadline-to-result (ms), median of 10 (runner unless "
          "named)")
    cases = {
        "thread (cooperative)": Tool(name="hang", handler=hang, timeout=0.2),
        "asyncio": Tool(name="hang", handler=async_hang, timeout=0.2),
        "process (never returns)": Tool(name="hang", handler=hang_hard, timeout=0.2,
                                        isolation="process"),
    }
    with ToolRunner(process_workers=2) as runner:
        runner.run(NO_OPS["process"], {})  # workers up
        supervisor = DynamicSupervisor.start()
        with ToolCallDispatcher(supervisor, runner) as dispatcher:
            lateness = actor_lateness(dispatcher, cases["thread (cooperative)"])
            print(f"  {'actor+supervisor thread':26}{statistics.median(lateness):8.2f}")
            supervisor.stop()
        for label, tool in cases.items():
            lateness, replaced = [], []
            for _ in range(10):
                done = threading.Event()
                finished: list[float] = []

                def on_done(result: HandlerResult, finished: list[float] = finished,
                            done: threading.Event = done) -> None:
                    finished.append(time.perf_counter())
                    done.set()

                before = runner.stats.workers_replaced
                start = time.perf_counter()
                runner.start(tool, {}, None, on_done)
                done.wait()
                lateness.append((finished[0] - start - 0.2) * 1e3)
                if tool.isolation == "process":
                    while runner.stats.workers_replaced == before:
                        time.sleep(0.0005)
                    replaced.append((time.perf_counter() - start - 0.2) * 1e3)
            line = f"  {label:26}{statistics.median(lateness):8.2f}"
            if replaced:
                line += f"   worker killed+replaced by deadline + {statistics.median(replaced):.1f}"
            print(line)


def actor_lateness(dispatcher: ToolCallDispatcher, tool: Tool) -> list[float]:
    """Deadline-to-reply (ms) of a hung call in its own ToolCallActor, 10 times."""
    lateness = []
    for i in range(10):
        done = threading.Event()
        finished: list[float] = []

        def reply_to(outcome: Any, finished: list[float] = finished,
                     done: threading.Event = done) -> None:
            finished.append(time.perf_counter())
            done.set()

        start = time.perf_counter()
        dispatcher.start_call(tool, ToolCall(id=str(i), name=tool.name), None, reply_to)
        done.wait()
        lateness.append((finished[0] - start - 0.2) * 1e3)
    return lateness


def main() -> None:
    prepare_process_isolation()
    with ToolRunner(process_workers=2) as runner:
        supervisor = DynamicSupervisor.start()
        with ToolCallDispatcher(supervisor, runner) as dispatcher:
            overhead_table(runner, dispatcher)
            sleeping_table(runner, dispatcher)
            supervisor.stop()
    deadline_table()


if __name__ == "__main__":
    main()
