"""``thread`` isolation: sync handlers on reused pool threads (or on the caller's own thread);
a hung one's thread is abandoned."""

from __future__ import annotations

import threading
from collections.abc import Callable

from toolvisor._logging import get_event_log
from toolvisor.call import execute
from toolvisor.contract import HandlerResult
from toolvisor.executor._calls import RunningCall
from toolvisor.executor._stats import Counters
from toolvisor.executor._thread_pool import ElasticThreadPool, PoolThread

_log = get_event_log("tool_runner", isolation="thread")

GiveUp = Callable[[], None]
"""Called when the runner abandons a caller's thread stuck in a handler (see ``run_here``)."""


class _CallerThread:
    """The caller's thread while it runs a handler for ``run_here``, and how to give it up."""

    __slots__ = ("give_up", "thread")

    def __init__(self, give_up: GiveUp) -> None:
        self.thread = threading.current_thread()
        self.give_up = give_up


class ThreadIsolation:
    """Runs each call's handler through ``execute`` on a pool thread.

    A thread cannot be killed: at the deadline (or on cancel) the call's thread is abandoned
    (no longer counted by the pool, which starts another when work waits), and whatever the
    handler returns later is discarded by ``settle``. ``call.worker`` is the ``PoolThread``
    (or, for :meth:`run_here`, the ``_CallerThread``) while the handler runs (guarded by
    ``call.lock``).
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

    def run_here(self, call: RunningCall, give_up: GiveUp) -> None:
        """Run ``call``'s handler on the calling thread, which the caller owns.

        Saves the hops to a pool thread and back. Abandoning works as for a pool thread, except
        that the runner cannot replace a thread it does not own: it calls ``give_up()`` (on the
        claiming thread, under ``call.lock``: quick, no waiting for the handler), and the caller
        must stop counting on this thread.
        """
        self._run(call, _CallerThread(give_up))

    def _run(self, call: RunningCall, me: PoolThread | _CallerThread) -> None:
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
            worker: PoolThread | _CallerThread | None = call.worker
            if isinstance(worker, PoolThread):
                self._pool.abandon(worker)
            elif worker is not None:
                try:
                    worker.give_up()
                except Exception as exc:
                    _log.error("give_up_failed", **call.log_fields(), error=repr(exc))
        if worker is not None:
            self._counters.add("threads_abandoned")
            _log.warning("call_abandoned", **call.log_fields(), thread=worker.thread.name)

    @property
    def live_threads(self) -> int:
        return self._pool.live_threads

    @property
    def hung_threads(self) -> int:
        return len(self._pool.abandoned_threads)

    def close(self, grace: float) -> list[threading.Thread]:
        """Stop the pool; return abandoned threads still running after ``grace``."""
        return self._pool.close(grace)
