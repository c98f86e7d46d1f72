"""``thread`` isolation: sync handlers on reused pool threads; a hung one's thread is abandoned."""

from __future__ import annotations

import threading
from collections.abc import Callable

from toolvisor._logging import get_event_log
from toolvisor.contract import HandlerResult
from toolvisor.executor._calls import RunningCall
from toolvisor.executor._execute import execute
from toolvisor.executor._stats import Counters
from toolvisor.executor._thread_pool import ElasticThreadPool, PoolThread

_log = get_event_log("tool_runner", isolation="thread")


class ThreadIsolation:
    """Runs each call's handler through ``execute`` on a pool thread.

    A thread cannot be killed: at the deadline (or on cancel) the call's thread is abandoned
    (no longer counted by the pool, which starts another when work waits), and whatever the
    handler returns later is discarded by ``settle``. ``call.worker`` is the ``PoolThread``
    while the handler runs (guarded by ``call.lock``).
    """

    def __init__(
        self,
        *,
        max_threads: int,
        idle_timeout: float,
        arm: Callable[[RunningCall], None],
        settle: Callable[[RunningCall, HandlerResult], None],
        counters: Counters,
    ) -> None:
        self._pool = ElasticThreadPool(
            "toolvisor-handler", max_threads=max_threads, idle_timeout=idle_timeout
        )
        self._arm = arm
        self._settle = settle
        self._counters = counters

    def submit(self, call: RunningCall) -> None:
        self._pool.submit(lambda me: self._run(call, me))

    def _run(self, call: RunningCall, me: PoolThread) -> None:
        with call.lock:
            if call.settled:  # cancelled while it waited for a thread
                return
            call.worker = me
        self._arm(call)
        result = execute(call.tool, call.arguments, call.ctx)
        with call.lock:
            call.worker = None
        self._settle(call, result)

    def stop(self, call: RunningCall) -> None:
        """Abandon the thread still running ``call``'s handler (called once it was claimed)."""
        with call.lock:
            worker: PoolThread | None = call.worker
            if worker is not None:
                self._pool.abandon(worker)
        if worker is not None:
            self._counters.add("threads_abandoned")
            _log.warning("call_abandoned", tool_name=call.tool.name,
                         tool_call_id=call.ctx.tool_call_id, thread=worker.thread.name)

    @property
    def live_threads(self) -> int:
        return self._pool.live_threads

    @property
    def hung_threads(self) -> int:
        return len(self._pool.abandoned_threads)

    def close(self, grace: float) -> list[threading.Thread]:
        """Stop the pool; return abandoned threads still running after ``grace``."""
        return self._pool.close(grace)
