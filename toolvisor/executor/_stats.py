"""The ``ToolRunner``'s counters and the snapshot of them it hands out."""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class RunnerStats:
    """A snapshot of what a ``ToolRunner`` has done so far (an agent's model calls run through
    its runner too, so they are counted here with its tool calls).

    * ``calls_started`` / ``calls_finished``: results delivered by the handler's own run
      (including failures ``execute`` normalised and deaths of worker processes);
    * ``timeouts`` / ``cancelled``: results delivered by the deadline or by a cancel;
    * ``late_results_discarded``: handler results that arrived after the call was settled;
    * ``threads_live``: pool threads serving calls; ``threads_abandoned``: threads given up on
      at a deadline or cancel; ``threads_hung``: abandoned threads still running (after
      ``close``: the ones still running past its grace);
    * ``workers_alive`` / ``workers_started`` / ``workers_killed`` (SIGKILL by the runner at a
      deadline or cancel) / ``workers_died`` (exited by themselves mid-call or while idle) /
      ``workers_replaced``;
    * ``ray_tasks``: Ray tasks submitted for ``ray`` calls (the calls of one tool that start
      together share tasks).
    """

    calls_started: int = 0
    calls_finished: int = 0
    timeouts: int = 0
    cancelled: int = 0
    late_results_discarded: int = 0
    threads_live: int = 0
    threads_abandoned: int = 0
    threads_hung: int = 0
    workers_alive: int = 0
    workers_started: int = 0
    workers_killed: int = 0
    workers_died: int = 0
    workers_replaced: int = 0
    ray_tasks: int = 0


_COUNTERS = tuple(f.name for f in fields(RunnerStats))


class Counters:
    """Monotonic counters bumped from any runner thread (guarded by one lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(_COUNTERS, 0)

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._values[name] += amount

    def snapshot(self, **gauges: int) -> RunnerStats:
        """The counters, with ``gauges`` (current values such as ``threads_live``) on top."""
        with self._lock:
            values = dict(self._values)
        values.update(gauges)
        return RunnerStats(**values)
