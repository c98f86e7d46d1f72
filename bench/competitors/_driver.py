"""What a competitor driver offers, and the timing loops the drivers share.

A driver runs one framework with its own scripted model: the model asks for N tool calls in one
response, then answers with the final text once it sees their results. Timings include
everything between handing the framework the prompt and getting the final text back.
"""

import gc
import json
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from bench.competitors._tools import HangingTool, ToolKind


class HungReport:
    """Writes the hung-tool child's events as JSON lines on stdout, timed from ``start()``.

    Owned by the child's main thread; drivers call ``returned`` from inside their event loop,
    which runs on that same thread.
    """

    def __init__(self, tool: HangingTool) -> None:
        self.tool = tool
        self.started = False
        self._started_at = time.perf_counter()

    def start(self) -> None:
        """The turn begins now: the parent's deadline counts from here."""
        self.started = True
        self._started_at = time.perf_counter()
        self.emit("started")

    def emit(self, event: str, **fields: object) -> None:
        line = {"event": event, "t": time.perf_counter() - self._started_at, **fields}
        sys.stdout.write(json.dumps(line, default=repr) + "\n")
        sys.stdout.flush()

    def returned(self, outcome: str) -> None:
        """The framework handed control back; ``outcome`` says what it answered, briefly."""
        self.emit("returned", outcome=outcome[:200], tool_running=self.tool.still_running())


class Driver(Protocol):
    """One framework set up the way its own docs show, driven by a scripted model."""

    name: str
    hung_variants: Mapping[str, str]
    """Variant id -> what it configures, e.g. ``{"default": ..., "tool_timeout": ...}``."""

    def time_turns(self, kind: ToolKind, batch: int, repeats: int) -> list[float]:
        """Seconds per whole turn of ``batch`` calls to tool ``kind``, one warm-up not counted."""
        ...

    def run_hung(self, variant: str, report: HungReport) -> None:
        """Run one turn calling ``report.tool`` once; call ``report.returned`` when it ends.

        An exception escaping the framework is reported by the caller as its outcome.
        """
        ...


Timings = tuple[list[float], list[object]]
"""Seconds per timed turn, and what every turn (warm-up included) answered."""


def time_sync(run_turn: Callable[[], object], repeats: int) -> Timings:
    """Run ``run_turn`` once to warm up, then ``repeats`` times, timing each."""
    finals = [run_turn()]
    gc.collect()
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        final = run_turn()
        timings.append(time.perf_counter() - started)
        finals.append(final)
    return timings, finals


async def time_async(run_turn: Callable[[], Awaitable[object]], repeats: int) -> Timings:
    """``time_sync`` for a coroutine-returning turn, inside the caller's event loop."""
    finals = [await run_turn()]
    gc.collect()
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        final = await run_turn()
        timings.append(time.perf_counter() - started)
        finals.append(final)
    return timings, finals
