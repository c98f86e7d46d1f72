"""``PooledThreadingActor``: a pykka actor whose loop runs on a reused thread.

A ``ThreadingActor`` starts a thread per actor; for one short-lived actor per tool call that
thread start is most of the cost. Here the loop runs on a thread of an :class:`ActorThreadPool`
that its owner closes. Each actor keeps its own mailbox, loop and supervision.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import pykka

from toolvisor._logging import get_event_log
from toolvisor.executor import ElasticThreadPool, PoolThread

_log = get_event_log("actor_thread_pool")


class ActorThreadPool:
    """Reused threads for the loops of short-lived actors, owned (and closed) by its creator.

    ``max_threads`` bounds the actors running at once: an actor started beyond it waits for a
    thread (keep it at least the supervisor's ``max_children``). Idle threads retire after
    ``idle_timeout`` seconds. An actor stuck in user code can have its thread abandoned
    (:meth:`PooledThreadingActor.abandon_thread`): it stops counting, a replacement starts if
    loops wait, and it exits once the actor's loop returns.
    """

    def __init__(self, *, max_threads: int = 1024, idle_timeout: float = 30.0) -> None:
        self._pool = ElasticThreadPool("toolvisor-actor", max_threads=max_threads,
                                       idle_timeout=idle_timeout)

    def run_loop(self, actor: PooledThreadingActor) -> None:
        """Run ``actor``'s loop on a pool thread."""
        self._pool.submit(actor._run_on)

    def abandon(self, thread: PoolThread) -> None:
        """Stop counting ``thread`` (stuck in an actor's loop); see :class:`ActorThreadPool`."""
        self._pool.abandon(thread)

    @property
    def live_threads(self) -> int:
        """Threads serving actor loops (idle or busy), abandoned ones excluded."""
        return self._pool.live_threads

    @property
    def threads_abandoned(self) -> int:
        """Threads abandoned so far."""
        return self._pool.abandoned_count

    @property
    def threads_hung(self) -> int:
        """Abandoned threads whose actor loop has not returned yet."""
        return len(self._pool.abandoned_threads)

    def close(self, grace: float = 1.0) -> list[threading.Thread]:
        """Wait for running actor loops to end, then stop every thread (stop the actors
        first: a loop that never ends keeps ``close`` waiting). Abandoned threads get ``grace``
        seconds to finish; the ones still running are returned and logged
        (``threads_left_hung``): they are daemons and exit when their user code returns."""
        hung = self._pool.close(grace)
        if hung:
            _log.warning("threads_left_hung", count=len(hung), threads=[t.name for t in hung])
        return hung


class PooledThreadingActor(pykka.ThreadingActor):
    """A ``ThreadingActor`` whose loop runs on ``thread_pool`` instead of a thread of its own.

    Its mailbox is a ``queue.SimpleQueue`` (pykka's ``queue.Queue`` costs three condition
    variables per actor, and this actor's loop is its only reader). ``_pool_thread`` is
    written once by the pool thread before the loop starts.
    """

    def __init__(self, *args: Any, thread_pool: ActorThreadPool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._thread_pool = thread_pool
        self._pool_thread: PoolThread | None = None

    @staticmethod
    def _create_actor_inbox() -> Any:
        return queue.SimpleQueue()

    def _start_actor_loop(self) -> None:
        self._thread_pool.run_loop(self)

    def _run_on(self, thread: PoolThread) -> None:
        self._pool_thread = thread
        self._actor_loop()

    def abandon_thread(self) -> None:
        """Give up this actor's pool thread (stuck in user code), from any thread: the pool
        stops counting it and starts a replacement if loops wait; the thread exits once this
        actor's loop returns. Only call it while the loop runs."""
        thread = self._pool_thread
        if thread is not None:
            self._thread_pool.abandon(thread)
