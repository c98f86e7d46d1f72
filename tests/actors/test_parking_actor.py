"""``PooledThreadingActor`` parks when its mailbox is empty: mail from many threads is each
handled once, never two slices at a time, and a parked actor wakes for a tell, an ask or a
stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from toolvisor.actors import ActorThreadPool, PooledThreadingActor

SENDERS = 8
MESSAGES = 400


class Counter(PooledThreadingActor):
    """Counts its mail; notes it if two slices ever ran it at once."""

    def __init__(self, thread_pool: ActorThreadPool) -> None:
        super().__init__(thread_pool=thread_pool)
        self.seen: list[Any] = []
        self.overlaps = 0
        self.stopped = threading.Event()
        self._running = threading.Lock()

    def on_receive(self, message: Any) -> Any:
        if not self._running.acquire(blocking=False):
            self.overlaps += 1
            return None
        try:
            if message == "count":
                return len(self.seen), self.overlaps
            self.seen.append(message)
            time.sleep(0)  # yield the GIL inside the slice: a second slice would show here
            return None
        finally:
            self._running.release()

    def on_stop(self) -> None:
        self.stopped.set()


@pytest.fixture
def pool() -> Iterator[ActorThreadPool]:
    threads = ActorThreadPool(max_threads=4, idle_timeout=5.0)
    yield threads
    threads.close()


def test_mail_from_many_threads_is_handled_once_one_slice_at_a_time(
        pool: ActorThreadPool) -> None:
    ref = Counter.start(pool)
    go = threading.Barrier(SENDERS)

    def send(sender: int) -> None:
        go.wait()
        for n in range(MESSAGES):
            ref.tell((sender, n))

    senders = [threading.Thread(target=send, args=(s,)) for s in range(SENDERS)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join()
    assert ref.ask("count") == (SENDERS * MESSAGES, 0)
    actor = ref._actor_weakref()
    assert isinstance(actor, Counter)
    for sender in range(SENDERS):  # each sender's mail in the order it was sent
        assert [n for s, n in actor.seen if s == sender] == list(range(MESSAGES))
    ref.stop()


def test_a_parked_actor_wakes_for_an_ask_and_for_a_stop(pool: ActorThreadPool) -> None:
    ref = Counter.start(pool)
    assert ref.ask("count") == (0, 0)  # answered, then parked again
    for _ in range(3):
        ref.tell("one")
        assert ref.ask("count")[0] >= 1
    actor = ref._actor_weakref()
    assert isinstance(actor, Counter)
    ref.stop()
    assert actor.stopped.is_set() and not ref.is_alive()
    with pytest.raises(pykka.ActorDeadError):
        ref.ask("count")


class Waits(PooledThreadingActor):
    """Waits in ``on_start`` until released (as a ``thread`` handler in its first slice)."""

    def __init__(self, thread_pool: ActorThreadPool, entered: threading.Semaphore,
                 release: threading.Event) -> None:
        super().__init__(thread_pool=thread_pool)
        self._entered = entered
        self._release = release
        self.thread_name = ""

    def on_start(self) -> None:
        self.thread_name = threading.current_thread().name
        self._entered.release()
        assert self._release.wait(10)


class BriefWaits(Waits):
    """The same, declared as an actor whose slices never block (a parked call's)."""

    brief_slices = True


def test_slices_that_never_block_queue_for_the_few_brief_threads() -> None:
    """A burst of brief slices starts no thread beyond ``max_brief_threads``: one of those
    picks up the next slice at once, where more threads would only contend for the GIL."""
    pool = ActorThreadPool(max_threads=16, max_brief_threads=2, idle_timeout=5.0)
    entered = threading.Semaphore(0)
    release = threading.Event()
    refs = [BriefWaits.start(pool, entered, release) for _ in range(8)]
    try:
        assert pool.live_threads == 2  # threads start (or not) inside start()
        release.set()
        for _ in refs:
            assert entered.acquire(timeout=10)
        actors = [ref._actor_weakref() for ref in refs]
        assert all(isinstance(a, Waits) and a.thread_name.startswith("toolvisor-actor-brief-")
                   for a in actors)
    finally:
        release.set()
        for ref in refs:
            ref.stop()
        pool.close()


def test_slices_that_may_block_each_get_a_thread_at_once() -> None:
    """A slice that may block (a ``thread`` handler's) gets a thread of its own at once, up to
    ``max_threads``: eight handlers all wait at the same time."""
    pool = ActorThreadPool(max_threads=16, max_brief_threads=2, idle_timeout=5.0)
    entered = threading.Semaphore(0)
    release = threading.Event()
    refs = [Waits.start(pool, entered, release) for _ in range(8)]
    try:
        for _ in refs:  # all eight are in on_start together, before any is released
            assert entered.acquire(timeout=10)
        assert pool.live_threads == 8
    finally:
        release.set()
        for ref in refs:
            ref.stop()
        pool.close()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_max_brief_threads_must_be_a_positive_int(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_brief_threads must be an int >= 1"):
        ActorThreadPool(max_brief_threads=bad)
