"""In-process wake-ups for waiters on a store, so a same-process resolution is seen at once.

Waiters in other processes cannot be woken this way; they notice by polling the store. One
:class:`Notifier` exists per database path in a process, shared by every store object open on
that path. Its state (a generation counter, the listeners) is owned by its condition's lock;
listeners are called outside it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Notifier:
    """A generation counter: waiters sleep until it moves past the value they last saw."""

    __slots__ = ("_changed", "_generation", "_listeners")

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._generation = 0
        self._listeners: list[Callable[[], None]] = []

    @property
    def generation(self) -> int:
        """The current generation; read it *before* checking the store, then :meth:`wait`."""
        with self._changed:
            return self._generation

    def notify(self) -> None:
        """Something was resolved (or may be runnable): wake every waiter and listener."""
        with self._changed:
            self._generation += 1
            self._changed.notify_all()
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def listen(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on every :meth:`notify`; returns the function that stops it."""
        with self._changed:
            self._listeners.append(callback)

        def stop() -> None:
            with self._changed:
                if callback in self._listeners:
                    self._listeners.remove(callback)

        return stop

    def wait(self, seen: int, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds unless the generation already moved past ``seen``."""
        with self._changed:
            self._changed.wait_for(lambda: self._generation != seen, timeout)


_notifiers: dict[str, Notifier] = {}
_notifiers_lock = threading.Lock()  # guards _notifiers; held only to look up or add one


def notifier_for(path: str) -> Notifier:
    """The process-wide notifier of the database at ``path`` (a SQLite file's absolute,
    resolved path, or a PostgreSQL store's URL)."""
    with _notifiers_lock:
        notifier = _notifiers.get(path)
        if notifier is None:
            notifier = _notifiers[path] = Notifier()
        return notifier
