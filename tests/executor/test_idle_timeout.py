"""``Tool(idle_timeout=...)``: a call that shows no sign of life (no progress report, no
heartbeat) for that long ends ``timeout`` with code ``idle_timeout`` and is stopped as at its
deadline, while its total ``timeout`` is far away. The idle deadline runs on the runner's
timer and clock (a ``FakeClock`` here where the test moves time)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from tests.support import progress_handlers as ph
from toolvisor import CallContext, Err, Ok, Tool, ToolError
from toolvisor.contract import HandlerResult
from toolvisor.executor import ToolRunner
from toolvisor.isolation import prepare_process_isolation
from toolvisor.testing import FakeClock

NOTHING = Tool(name="nothing")  # no handler: its call is answered from the runner's timer


@pytest.fixture(scope="module", autouse=True)
def _process_helpers() -> None:
    prepare_process_isolation()


def poke(runner: ToolRunner) -> None:
    """Let the runner's timer look at the (fake) clock: a call of a tool without a handler is
    answered on the timer's thread, after every deadline due by now has run."""
    assert isinstance(runner.run(NOTHING, {}), Err)


def idle_error(result: HandlerResult | None) -> ToolError:
    assert isinstance(result, Err) and isinstance(result.reason, ToolError), result
    assert (result.reason.reason, result.reason.code) == ("timeout", "idle_timeout"), result
    return result.reason


class Steered:
    """A thread handler that does what the test tells it, one step at a time."""

    def __init__(self) -> None:
        self.steps: queue.Queue[Callable[[CallContext], None]] = queue.Queue()
        self.done = threading.Event()
        self.started = threading.Event()

    def __call__(self, arguments: Any, ctx: CallContext) -> Ok:
        self.started.set()
        while not ctx.cancelled.is_set():
            try:
                step = self.steps.get(timeout=0.01)
            except queue.Empty:
                continue
            step(ctx)
            self.done.set()
        return Ok("stopped")

    def do(self, step: Callable[[CallContext], None]) -> None:
        self.done.clear()
        self.steps.put(step)
        assert self.done.wait(10)


def test_idle_timeout_fires_on_the_runners_clock_and_signs_of_life_put_it_off() -> None:
    clock = FakeClock()
    handler = Steered()
    tool = Tool(name="steered", handler=handler, timeout=1000, idle_timeout=10)
    results: queue.Queue[HandlerResult] = queue.Queue()
    with ToolRunner(clock=clock) as runner:
        runner.start(tool, {}, None, results.put)
        assert handler.started.wait(10)
        clock.advance(6)
        handler.do(lambda ctx: ctx.heartbeat())          # alive at 6
        clock.advance(6)
        poke(runner)                                     # due at 10: idle 6 s only
        assert results.empty()
        clock.advance(2)
        handler.do(lambda ctx: ctx.report_progress("still at it", 0.1))  # alive at 14
        clock.advance(6)
        poke(runner)                                     # due at 16: idle 6 s only
        assert results.empty()
        clock.advance(5)
        poke(runner)                                     # due at 24: idle 10 s
        error = idle_error(results.get(timeout=10))
        assert error.cause == 10 and "no progress or heartbeat for 10 s" in error.message
        assert runner.stats.timeouts == 1


def test_an_idle_thread_call_is_given_up_with_its_token_set() -> None:
    tool = Tool(name="silent", handler=ph.silent, timeout=60, idle_timeout=0.2)
    with ToolRunner() as runner:
        idle_error(runner.run(tool, {}))  # the handler returns once its token is set


def test_an_idle_asyncio_call_is_cancelled() -> None:
    tool = Tool(name="silent", handler=ph.silent_async, timeout=60, idle_timeout=0.2)
    with ToolRunner() as runner:
        idle_error(runner.run(tool, {}))


def test_an_idle_process_call_has_its_worker_killed() -> None:
    tool = Tool(name="silent", handler=ph.silent_sleeper, isolation="process", timeout=60,
                idle_timeout=0.3)
    then = Tool(name="then", handler=ph.reports, isolation="process")
    with ToolRunner(process_workers=1) as runner:
        idle_error(runner.run(tool, {}))
        assert isinstance(runner.run(then, {}), Ok)  # on the worker that replaced it
        runner.close()
    stats = runner.stats  # counted by the pool's manager: read once it has closed
    assert (stats.workers_killed, stats.workers_replaced, stats.timeouts) == (1, 1, 1)


def test_an_idle_ray_task_is_cancelled_with_force(ray_cluster: ModuleType) -> None:
    tool = Tool(name="silent", handler=ph.silent_sleeper, isolation="ray", timeout=120,
                idle_timeout=0.5)
    with ToolRunner() as runner:
        idle_error(runner.run(tool, {}))
    assert runner.stats.workers_killed == 1


class Beats:
    """The sink a caller gives the runner: it counts the heartbeats passed on to it."""

    def __init__(self) -> None:
        self.count = 0
        self.changed = threading.Condition()

    def report(self, message: str, fraction: float | None) -> None:
        raise AssertionError("nothing reports here")

    def heartbeat(self) -> None:
        with self.changed:
            self.count += 1
            self.changed.notify_all()

    def two_more(self) -> None:
        """Wait for two more heartbeats: the second one read the clock after this call."""
        with self.changed:
            seen = self.count
            assert self.changed.wait_for(lambda: self.count >= seen + 2, 20)


def test_heartbeats_from_a_worker_process_keep_its_call_alive() -> None:
    clock = FakeClock()
    beats = Beats()
    tool = Tool(name="beating", handler=ph.heartbeats, isolation="process", timeout=1000,
                idle_timeout=10)
    results: queue.Queue[HandlerResult] = queue.Queue()
    with ToolRunner(clock=clock, process_workers=1) as runner:
        handle = runner.start(tool, {}, CallContext(progress=beats), results.put)
        beats.two_more()
        for _ in range(3):
            clock.advance(9)
            beats.two_more()                             # alive at 9, 18, 27
            poke(runner)
            assert results.empty()
        assert handle.cancel()
        assert results.get(timeout=10).reason.code == "cancelled"  # type: ignore[union-attr]


def test_idle_timeout_is_checked_as_seconds() -> None:
    with pytest.raises(ValueError, match=r"tool 't': idle_timeout must be a positive, finite "
                                         r"number of seconds or None, got 0"):
        Tool(name="t", handler=ph.silent, idle_timeout=0)
    with pytest.raises(ValueError, match="idle_timeout must be"):
        Tool(name="t", handler=ph.silent, idle_timeout=float("inf"))
