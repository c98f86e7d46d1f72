"""``PooledThreadingActor``: a pykka actor whose loop runs on reused threads, only while it has
mail.

A ``ThreadingActor`` holds a thread of its own for its whole life; for one short-lived actor
per tool call, that thread's start is most of the cost, and a call that waits (on an event
loop, a worker process, a Ray task) holds it for nothing. Here the loop runs in slices on the
threads of an :class:`ActorThreadPool` that its owner closes: a slice handles the mail there
is and, when the mailbox is empty, gives its thread back (the actor *parks*); the next message
starts a new slice. Each actor keeps its own mailbox, loop and supervision, and one slice at a
time runs it, so its state still has one owner at a time, as under Erlang's schedulers.
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

import pykka

from toolvisor._logging import get_event_log
from toolvisor._one_shot import OneShotEvent
from toolvisor.contract import ToolvisorError
from toolvisor.isolation import ElasticThreadPool, PoolThread

_log = get_event_log("actor_thread_pool")
class _Urns:
    """Where pooled actors' URNs come from: this process's random part (74 random bits),
    drawn again in a forked child (it would repeat its parent's URNs), then a count (``next``
    on a count is atomic: no lock)."""

    prefix = uuid.uuid4().urn[:-12]
    count = itertools.count()

    @classmethod
    def redraw(cls) -> None:
        cls.prefix = uuid.uuid4().urn[:-12]


os.register_at_fork(after_in_child=_Urns.redraw)


def _next_urn() -> str:
    """A UUID URN unique to one pooled actor: the process's random part, then a count."""
    return f"{_Urns.prefix}{next(_Urns.count) & 0xFFFF_FFFF_FFFF:012x}"


class ActorThreadPool:
    """Reused threads for the loops of short-lived actors, owned (and closed) by its creator.

    Two sets of threads, each growing on demand and retiring after ``idle_timeout`` idle
    seconds. Slices that may block (a ``thread`` tool's handler runs in its actor's first
    slice) run on up to ``max_threads`` threads: a slice beyond it waits for a thread, so keep
    it at least the supervisor's ``max_children``. Slices that never block
    (``PooledThreadingActor.brief_slices``: they start work elsewhere, reply, stop, and park)
    run on up to ``max_brief_threads`` (default: the cores, at least 2, at most
    ``max_threads``): one of those picks up the next queued slice within microseconds, so a
    burst of thousands queues there instead of starting threads that would only contend for
    the GIL. An actor stuck in user code can have its thread abandoned
    (:meth:`PooledThreadingActor.abandon_thread`): it stops counting, a replacement starts if
    loops wait, and it exits once the actor's loop returns.
    """

    def __init__(self, *, max_threads: int = 1024, idle_timeout: float = 30.0,
                 max_brief_threads: int | None = None) -> None:
        if max_brief_threads is None:
            max_brief_threads = min(max_threads, max(2, os.cpu_count() or 2))
        elif isinstance(max_brief_threads, bool) or not isinstance(max_brief_threads, int) \
                or max_brief_threads < 1:
            raise ValueError("max_brief_threads must be an int >= 1 (or None: the cores), "
                             f"got {max_brief_threads!r}")
        self._pool = ElasticThreadPool("toolvisor-actor", max_threads=max_threads,
                                       idle_timeout=idle_timeout)
        self._brief = ElasticThreadPool("toolvisor-actor-brief", max_threads=max_brief_threads,
                                        idle_timeout=idle_timeout)

    def run_loop(self, actor: PooledThreadingActor) -> None:
        """Run ``actor``'s loop on a pool thread (a brief one if its slices never block)."""
        (self._brief if actor.brief_slices else self._pool).submit(actor._run_on)

    def abandon(self, thread: PoolThread) -> None:
        """Stop counting ``thread`` (stuck in an actor's loop); see :class:`ActorThreadPool`.
        (The set that does not hold ``thread`` ignores it.)"""
        self._pool.abandon(thread)
        self._brief.abandon(thread)

    @property
    def live_threads(self) -> int:
        """Threads serving actor loops (idle or busy), abandoned ones excluded."""
        return self._pool.live_threads + self._brief.live_threads

    @property
    def threads_abandoned(self) -> int:
        """Threads abandoned so far."""
        return self._pool.abandoned_count + self._brief.abandoned_count

    @property
    def threads_hung(self) -> int:
        """Abandoned threads whose actor loop has not returned yet."""
        return len(self._pool.abandoned_threads) + len(self._brief.abandoned_threads)

    def close(self, grace: float = 1.0) -> list[threading.Thread]:
        """Wait for running actor loops to end, then stop every thread (stop the actors
        first: a loop that never ends keeps ``close`` waiting). Abandoned threads get ``grace``
        seconds to finish; the ones still running are returned and logged
        (``threads_left_hung``): they are daemons and exit when their user code returns."""
        hung = self._pool.close(grace) + self._brief.close(grace)
        if hung:
            _log.warning("threads_left_hung", count=len(hung), threads=[t.name for t in hung])
        return hung


class _Empty(ToolvisorError):
    """Raised by an empty mailbox's ``get``: the slice's loop returns, to park or go on. It
    never leaves the slice."""


class ParkingMailbox:
    """An actor's mailbox that starts a slice of its loop when mail comes to a parked actor.

    ``_items``, ``_parked`` and ``_closed`` are guarded by ``_lock``. A slice parks only once
    its loop has fully returned, and only if no mail came meanwhile (:meth:`park`, one step
    under the lock); mail put to a parked actor starts the next slice (``wake``, set once
    before the actor starts, dropped at close), so at most one slice runs an actor at a time. A
    closed mailbox (the actor's loop ended) keeps late mail unread, as pykka does for a dead
    actor.
    """

    __slots__ = ("_closed", "_items", "_lock", "_parked", "wake")

    wake: Callable[[], None]

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: collections.deque[Any] = collections.deque()
        self._parked = False  # a new actor's first slice is on its way
        self._closed = False

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        with self._lock:
            self._items.append(item)
            wake, self._parked = self._parked and not self._closed, False
        if wake:
            self.wake()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """The next message; with none, raise ``_Empty`` (the loop returns)."""
        with self._lock:
            if self._items:
                return self._items.popleft()
        raise _Empty

    def empty(self) -> bool:
        with self._lock:
            return not self._items

    def park(self) -> bool:
        """Park if there is no mail (the slice then ends); ``False``: run the loop again."""
        with self._lock:
            self._parked = not self._items
            return self._parked

    def close(self) -> None:
        """The actor's loop ended: keep later mail unread, and let go of ``wake`` (it holds
        the actor, which holds this mailbox: a cycle per actor for the garbage collector)."""
        with self._lock:
            self._closed = True
            del self.wake


class PooledThreadingActor(pykka.ThreadingActor):
    """A ``ThreadingActor`` whose loop runs in slices on ``thread_pool`` (see the module).

    pykka's loop runs unchanged inside each slice; only the mailbox's ``get`` differs: on an
    empty mailbox the loop returns instead of blocking, and the slice parks. ``on_start`` runs
    in the first slice, the teardown in the slice that sees the actor stopped. ``_pool_thread``
    and ``_loop_began`` are written by the slice that runs the actor (one at a time).

    Its fields are pykka's (``Actor.__init__``'s four, set here instead), made for one actor
    per call: ``actor_stopped`` is a ``OneShotEvent`` (an actor stops once; a
    ``threading.Event`` costs ~20x as much to make and set) and ``actor_urn`` a UUID URN whose
    random part is drawn once per process, its last 48 bits counting actors (no ``os.urandom``
    per actor).

    ``brief_slices``: set it in a subclass whose slices never block (no user code, no
    waiting): they then run on the pool's few brief threads.
    """

    brief_slices: ClassVar[bool] = False

    def __init__(self, *args: Any, thread_pool: ActorThreadPool, **kwargs: Any) -> None:
        # pykka.Actor.__init__'s four fields (it is not called: it would build an Event)
        self.actor_urn = _next_urn()
        self.actor_inbox = self._create_actor_inbox()
        self.actor_stopped = OneShotEvent()
        self._actor_ref = pykka.ActorRef(self)
        self._thread_pool = thread_pool
        self._pool_thread: PoolThread | None = None
        self._loop_began = False
        inbox = self.actor_inbox
        assert isinstance(inbox, ParkingMailbox)
        inbox.wake = self._start_actor_loop  # its next slice

    @staticmethod
    def _create_actor_inbox() -> Any:
        return ParkingMailbox()

    @classmethod
    def start(cls, *args: Any, **kwargs: Any) -> pykka.ActorRef[Any]:
        """Build, register and start the actor as ``pykka.Actor.start`` does, without its
        debug line (an f-string of the actor built for every call, logged or not)."""
        actor = cls(*args, **kwargs)
        pykka.ActorRegistry.register(actor.actor_ref)
        actor._start_actor_loop()
        return actor.actor_ref

    def _start_actor_loop(self) -> None:
        self._thread_pool.run_loop(self)
    def _run_on(self, thread: PoolThread) -> None:
        """One slice, on a pool thread: the loop until the mail runs out, then park (or go
        on, if mail came while the loop was returning)."""
        self._pool_thread = thread
        inbox = self.actor_inbox
        assert isinstance(inbox, ParkingMailbox)
        while True:
            self._actor_loop()
            if self.actor_stopped.is_set():
                inbox.close()
                return
            if inbox.park():
                return

    def _actor_loop(self) -> None:
        """``on_start`` if this is the first slice, then the mail there is; once the actor has
        stopped, the teardown (pending asks answered)."""
        if not self._loop_began:
            self._loop_began = True
            self._actor_loop_setup()
        try:
            self._actor_loop_running()
        except _Empty:
            return
        self._actor_loop_teardown()

    def abandon_thread(self) -> None:
        """Give up this actor's pool thread (stuck in user code), from any thread: the pool
        stops counting it and starts a replacement if loops wait; the thread exits once this
        actor's loop returns. Only call it while the loop runs."""
        thread = self._pool_thread
        if thread is not None:
            self._thread_pool.abandon(thread)
