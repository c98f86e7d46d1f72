"""``ElasticThreadPool``: reused threads that grow on demand, retire when idle, can be abandoned.

A ``ThreadPoolExecutor`` has a fixed ceiling that queues work, and a hung task holds its thread
forever. Tool calls need every call of a batch running at once, and a hung handler's thread given
up on (abandoned) and replaced, so the pool keeps serving.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable

from toolvisor.contract import check_seconds

Task = Callable[["PoolThread"], None]


class PoolThread:
    """One pool thread. ``abandoned`` is set (under the pool lock) when the pool gives up on it:
    it no longer counts toward the pool's size and exits once its current task returns."""

    __slots__ = ("abandoned", "thread")

    def __init__(self, name: str, work: Callable[[PoolThread], None]) -> None:
        self.thread = threading.Thread(target=work, args=(self,), name=name, daemon=True)
        self.abandoned = False


class ElasticThreadPool:
    """Runs tasks on reused threads: a new thread only when no idle one is free.

    At most ``max_threads`` threads run tasks at once (abandoned ones not counted); beyond that,
    tasks wait in FIFO order. A thread idle for ``idle_timeout`` seconds retires.

    Ownership: ``_tasks`` is a thread-safe queue; ``_lock`` guards ``_idle`` (idle threads not
    yet claimed by a submitter: a submitter claims one instead of starting a thread, the same
    scheme as ``ThreadPoolExecutor``), ``_live``, ``_abandoned``, ``_abandoned_ever`` and
    ``_closed``.
    """

    def __init__(self, name: str, *, max_threads: int, idle_timeout: float) -> None:
        if max_threads < 1:
            raise ValueError(f"max_threads must be >= 1, got {max_threads!r}")
        check_seconds("idle_timeout", idle_timeout, positive=True)
        self._name = name
        self._max_threads = max_threads
        self._idle_timeout = idle_timeout
        self._tasks: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._live: set[PoolThread] = set()
        self._abandoned: set[PoolThread] = set()
        self._abandoned_ever = 0
        self._closed = False
        self._counter = itertools.count()

    def submit(self, task: Task) -> None:
        """Run ``task(pool_thread)`` on an idle thread, a new one, or the next one free."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name} is closed")
            self._tasks.put(task)
            worker = None if self._claim_idle() else self._new_thread()
        if worker is not None:
            worker.thread.start()

    def _claim_idle(self) -> bool:
        """Under ``_lock``: claim an idle thread for a task just queued."""
        if self._idle:
            self._idle -= 1
            return True
        return False

    def _new_thread(self) -> PoolThread | None:
        """Under ``_lock``: a new (not yet started) thread, unless the pool is full."""
        if self._closed or len(self._live) >= self._max_threads:
            return None
        worker = PoolThread(f"{self._name}-{next(self._counter)}", self._work)
        self._live.add(worker)
        return worker

    def _work(self, me: PoolThread) -> None:
        task = self._tasks.get()
        while task is not None:
            task(me)
            with self._lock:
                if me.abandoned:
                    self._abandoned.discard(me)
                    return
                self._idle += 1
            while True:
                try:
                    task = self._tasks.get(timeout=self._idle_timeout)
                    break
                except queue.Empty:
                    with self._lock:
                        if self._claim_idle():  # nobody claimed an idle thread: retire
                            self._live.discard(me)
                            return
        with self._lock:
            self._live.discard(me)

    def abandon(self, worker: PoolThread) -> None:
        """Stop counting ``worker`` (stuck in a task); start a replacement if tasks wait."""
        with self._lock:
            if worker.abandoned or worker not in self._live:
                return
            worker.abandoned = True
            self._live.discard(worker)
            self._abandoned.add(worker)
            self._abandoned_ever += 1
            replacement = None if self._tasks.empty() or self._claim_idle() \
                else self._new_thread()
        if replacement is not None:
            replacement.thread.start()

    @property
    def live_threads(self) -> int:
        """Threads serving the pool (idle or busy), abandoned ones excluded."""
        with self._lock:
            return len(self._live)

    @property
    def abandoned_count(self) -> int:
        """Threads abandoned so far (finished or not)."""
        with self._lock:
            return self._abandoned_ever

    @property
    def abandoned_threads(self) -> list[threading.Thread]:
        """Abandoned threads whose task has not returned yet."""
        with self._lock:
            return [w.thread for w in self._abandoned]

    def close(self, grace: float) -> list[threading.Thread]:
        """Stop every thread once queued tasks ran; wait up to ``grace`` for abandoned ones.

        Returns the abandoned threads still running after the grace (they are daemons and
        exit when their task returns).
        """
        with self._lock:
            self._closed = True
            live = [w.thread for w in self._live]
        for _ in live:
            self._tasks.put(None)
        for thread in live:
            if thread is not threading.current_thread():
                thread.join()
        hung = self.abandoned_threads
        for thread in hung:
            thread.join(grace)
        return [t for t in hung if t.is_alive()]
