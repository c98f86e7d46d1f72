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
