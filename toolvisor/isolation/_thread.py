"""``thread`` isolation: sync handlers on reused pool threads (or on the caller's own thread);
a hung one's thread is abandoned."""

from __future__ import annotations

import threading

from toolvisor._logging import get_event_log
from toolvisor.call import execute
from toolvisor.isolation._backend import GiveUp, IsolationBackend, Runtime
from toolvisor.isolation._running import RunningCall
from toolvisor.isolation._thread_pool import ElasticThreadPool, PoolThread

_log = get_event_log("tool_runner", isolation="thread")


class _CallerThread:
    """The caller's thread while it runs a handler for ``run_here``, and how to give it up."""

    __slots__ = ("give_up", "thread")

    def __init__(self, give_up: GiveUp) -> None:
        self.thread = threading.current_thread()
        self.give_up = give_up


class ThreadBackend(IsolationBackend):
    """Runs each call's handler through ``execute`` on a pool thread (``max_threads`` busy at
    most, idle ones retiring after ``thread_idle_timeout``), or on the caller's own thread.

    A thread cannot be killed: at the deadline (or on cancel) the call's thread is abandoned
    (no longer counted by the pool, which starts another when work waits), and whatever the
    handler returns later is discarded by ``settle``. ``call.worker`` is the ``PoolThread``
    (or, for :meth:`run_here`, the ``_CallerThread``) while the handler runs (guarded by
    ``call.lock``).
    """

    default = True
    runs_here = True

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self._pool = ElasticThreadPool("toolvisor-handler", max_threads=runtime.max_threads,
                                       idle_timeout=runtime.thread_idle_timeout)
        self._hung_at_close: int | None = None  # written once by close

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
        self.runtime.arm(call)
        result = execute(call.tool, call.arguments, call.ctx)
        with call.lock:
            call.worker = None
        self.runtime.settle(call, result)

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
            self.runtime.count("threads_abandoned")
            _log.warning("call_abandoned", **call.log_fields(), thread=worker.thread.name)

    def gauges(self) -> dict[str, int]:
        hung = self._hung_at_close
        return {"threads_live": self._pool.live_threads,
                "threads_hung": len(self._pool.abandoned_threads) if hung is None else hung}

    def close(self, grace: float) -> None:
        """Stop the pool; abandoned threads still running after ``grace`` are counted in
        ``threads_hung`` and logged (``threads_left_hung``): a thread cannot be stopped."""
        hung = self._pool.close(grace)
        self._hung_at_close = len(hung)
        if hung:
            _log.warning("threads_left_hung", count=len(hung), threads=[t.name for t in hung])
