"""``PooledThreadingActor``: a pykka actor whose loop runs on a reused thread.

A ``ThreadingActor`` starts a thread per actor; for one short-lived actor per tool call that
thread start is most of the cost. Here the loop runs on a thread of an :class:`ActorThreadPool`
that its owner closes. Each actor keeps its own mailbox, loop and supervision.
"""

from __future__ import annotations

from typing import Any

import pykka

from toolvisor.executor import ElasticThreadPool


class ActorThreadPool:
    """Reused threads for the loops of short-lived actors, owned (and closed) by its creator.

    ``max_threads`` bounds the actors running at once: an actor started beyond it waits for a
    thread (keep it at least the supervisor's ``max_children``). Idle threads retire after
    ``idle_timeout`` seconds.
    """

    def __init__(self, *, max_threads: int = 1024, idle_timeout: float = 30.0) -> None:
        self._pool = ElasticThreadPool("toolvisor-actor", max_threads=max_threads,
                                       idle_timeout=idle_timeout)

    def run_loop(self, actor: pykka.Actor) -> None:
        """Run ``actor``'s loop on a pool thread."""
        self._pool.submit(lambda _thread: actor._actor_loop())

    @property
    def live_threads(self) -> int:
        return self._pool.live_threads

    def close(self) -> None:
        """Wait for running actor loops to end, then stop every thread (stop the actors
        first: a loop that never ends keeps ``close`` waiting)."""
        self._pool.close(0.0)


class PooledThreadingActor(pykka.ThreadingActor):
    """A ``ThreadingActor`` whose loop runs on ``thread_pool`` instead of a thread of its own."""

    def __init__(self, *args: Any, thread_pool: ActorThreadPool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._thread_pool = thread_pool

    def _start_actor_loop(self) -> None:
        self._thread_pool.run_loop(self)
