"""``DeadlineTimer``: one thread that fires every call's deadline, from a heap.

A thread per call would cost a thread start per call and scale badly; one heap-driven thread
keeps the deadline path cheap and precise (the wait ends at the earliest deadline).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from toolvisor._logging import get_event_log

_log = get_event_log("deadline_timer")
_T = TypeVar("_T")
_NO_ARG: Any = object()  # a deadline whose callback takes no argument
_COMPACT_AT = 256  # rebuild the heap once this many cancelled entries are waiting in it


def _spent() -> None:
    """What a cancelled or fired deadline holds instead of its callback."""


class Deadline:
    """One scheduled callback; :meth:`cancel` drops it (it is skipped when it comes due).

    Once cancelled or fired it lets go of its callback: a callback usually refers to what holds
    the deadline (a call that keeps its deadline to cancel it), and that cycle would leave the
    call and all it refers to for the cyclic garbage collector instead of being freed at once.
    ``arg`` (if not ``_NO_ARG``) is what the callback is called with: a callback shared by many
    deadlines, each with its own argument, instead of a closure made for each.
    """

    __slots__ = ("_timer", "arg", "callback", "cancelled", "seq", "when")

    def __init__(self, when: float, seq: int, callback: Callable[..., None], arg: Any,
                 timer: DeadlineTimer) -> None:
        self.when = when
        self.seq = seq
        self.callback = callback
        self.arg = arg
        self.cancelled = False
        self._timer = timer

    def __lt__(self, other: Deadline) -> bool:
        return (self.when, self.seq) < (other.when, other.seq)

    def cancel(self) -> None:
        """Make sure the callback does not run (if it has not started yet)."""
        self._timer._cancelled(self)


class DeadlineTimer:
    """Runs callbacks at their deadlines on one lazily started thread.

    The heap, the counter of cancelled entries and the closed flag are guarded by ``_cond``;
    callbacks run on the timer thread outside the lock and must be quick (set an event,
    deliver a result, post a message).
    """

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._name = name
        self._clock = clock
        self._cond = threading.Condition()
        self._heap: list[Deadline] = []
        self._seq = itertools.count()
        self._cancelled_count = 0
        self._closed = False
        self._thread: threading.Thread | None = None

    def schedule(self, delay: float, callback: Callable[[], None]) -> Deadline:
        """Run ``callback`` on the timer thread ``delay`` seconds from now."""
        return self._schedule(delay, callback, _NO_ARG)

    def schedule_with(self, delay: float, callback: Callable[[_T], None], arg: _T) -> Deadline:
        """Run ``callback(arg)`` on the timer thread ``delay`` seconds from now (one
        callback for many deadlines, e.g. a bound method made once: no closure per deadline,
        each ~4 objects the garbage collector tracks while it waits)."""
        return self._schedule(delay, callback, arg)

    def _schedule(self, delay: float, callback: Callable[..., None], arg: Any) -> Deadline:
        with self._cond:
            if self._closed:
                raise RuntimeError(f"{self._name} is closed; no more deadlines can be scheduled")
            entry = Deadline(self._clock() + max(delay, 0.0), next(self._seq), callback, arg,
                             self)
            heapq.heappush(self._heap, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            elif self._heap[0] is entry or delay <= 0:
                # An entry due now wakes the loop even behind earlier ones: with a clock that
                # jumps (a test's FakeClock) those may be due by now too, and the wait for
                # them is in real seconds.
                self._cond.notify()
            return entry

    def _cancelled(self, entry: Deadline) -> None:
        with self._cond:
            if entry.cancelled:
                return
            entry.cancelled = True
            entry.callback, entry.arg = _spent, _NO_ARG
            self._cancelled_count += 1
            if self._cancelled_count >= _COMPACT_AT and self._cancelled_count * 2 > len(
                self._heap
            ):
                self._heap = [e for e in self._heap if not e.cancelled]
                heapq.heapify(self._heap)
                self._cancelled_count = 0

    def _loop(self) -> None:
        due: list[Deadline] = []
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    now = self._clock()
                    while self._heap and (self._heap[0].cancelled or self._heap[0].when <= now):
                        entry = heapq.heappop(self._heap)
                        if entry.cancelled:
                            self._cancelled_count -= 1
                        else:
                            entry.cancelled = True  # a late cancel() is now a no-op
                            due.append(entry)
                    if due:
                        break
                    self._cond.wait(self._heap[0].when - now if self._heap else None)
            for entry in due:
                callback, entry.callback = entry.callback, _spent
                arg, entry.arg = entry.arg, _NO_ARG
                try:
                    if arg is _NO_ARG:
                        callback()
                    else:
                        callback(arg)
                except Exception as exc:
                    _log.error("deadline_callback_failed", timer=self._name, error=repr(exc))
            due.clear()
            callback, arg = _spent, _NO_ARG

    def close(self) -> None:
        """Stop the thread; deadlines still pending are dropped."""
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
