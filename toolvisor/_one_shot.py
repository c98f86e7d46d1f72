"""``OneShotEvent``: a ``threading.Event`` that is set once and never cleared, made cheaply.

A ``threading.Event`` builds a ``Condition`` (two locks and a waiter list) when it is made, and
``set`` takes that condition and notifies: about 6 us per event, and every tool call had four
(its cancel token, its actor's stopped flag, its supervision link's exit). Flags that only ever go
from unset to set need one lock: held from birth, released once when set; a waiter acquires it
(and gives it straight back), so it sleeps until the release. About 0.2 us.
"""

from __future__ import annotations

import threading
from typing import Any


class OneShotEvent(threading.Event):
    """Set once, never cleared; otherwise a ``threading.Event`` (``is_set``, ``set``, ``wait``).

    The lock is held from birth; exactly one ``set`` releases it: the first to pop ``_armed``
    (a list pop is atomic), so a late second ``set`` never releases a waiter's hold. A waiter
    holds the lock only between its ``acquire`` and its ``release``, after the flag was set.
    """

    __slots__ = ("_armed", "_released")

    def __init__(self) -> None:  # no Condition: Event.__init__ is not called
        self._released = threading.Lock()
        self._released.acquire()
        self._armed: list[Any] = [None]

    def is_set(self) -> bool:
        return not self._armed

    def set(self) -> None:
        try:
            self._armed.pop()
        except IndexError:
            return  # already set
        self._released.release()

    def clear(self) -> None:
        raise TypeError("a OneShotEvent is set once and never cleared")

    def wait(self, timeout: float | None = None) -> bool:
        if not self._armed:
            return True
        if self._released.acquire(True, -1 if timeout is None else max(timeout, 0.0)):
            self._released.release()
            return True
        return not self._armed

    def __repr__(self) -> str:
        return f"<OneShotEvent: {'set' if self.is_set() else 'unset'}>"
