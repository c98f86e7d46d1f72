"""``OneShotEvent``: a ``threading.Event`` that is set once and never cleared, made cheaply.

A ``threading.Event`` builds a ``Condition`` (two locks and a waiter list) when it is made, and
``set`` takes that condition and notifies: about 6 us per event, and every tool call has several
(its cancel token, its actor's stopped flag, its supervision link's exit). Flags that only ever go
from unset to set need no lock until someone waits: the first waiter makes one, held until the
flag is set; a waiter acquires it (and gives it straight back), so it sleeps until the release.
Most of these flags are never waited on, so each is one object the garbage collector tracks
(a lock and a list beside it were two more, per flag, for every call in flight).
"""

from __future__ import annotations

import threading

_MAKING = threading.Lock()  # serializes the first waiters of any flag making its lock


class OneShotEvent(threading.Event):
    """Set once, never cleared; otherwise a ``threading.Event`` (``is_set``, ``set``, ``wait``).

    ``_armed`` holds one item until the first ``set`` pops it (a dict's pop is atomic, and a
    dict of atoms is not tracked by the collector), so exactly one ``set`` releases the lock: a
    late second ``set`` never releases a waiter's hold. The lock (``_released``) is made, held,
    by the first waiter (under ``_MAKING``), which stores it and only then looks at ``_armed``
    again: a ``set`` that popped before that look sees the flag set without sleeping; one that
    pops after it finds the lock stored and releases it. A waiter holds the lock only between
    its ``acquire`` and its ``release``, after the flag was set.
    """

    __slots__ = ("_armed", "_released")

    def __init__(self) -> None:  # no Condition: Event.__init__ is not called
        self._armed = {0: None}
        self._released: threading.Lock | None = None

    def is_set(self) -> bool:
        return not self._armed

    def set(self) -> None:
        try:
            self._armed.popitem()
        except KeyError:
            return  # already set
        released = self._released
        if released is not None:
            released.release()

    def clear(self) -> None:
        raise TypeError("a OneShotEvent is set once and never cleared")

    def wait(self, timeout: float | None = None) -> bool:
        if not self._armed:
            return True
        released = self._released
        if released is None:
            with _MAKING:
                released = self._released
                if released is None:
                    released = threading.Lock()
                    released.acquire()
                    self._released = released
        if not self._armed:  # set before the lock was stored: it may never be released
            return True
        if released.acquire(True, -1 if timeout is None else max(timeout, 0.0)):
            released.release()
            return True
        return not self._armed

    def __repr__(self) -> str:
        return f"<OneShotEvent: {'set' if self.is_set() else 'unset'}>"
