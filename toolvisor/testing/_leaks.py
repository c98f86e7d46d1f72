"""Checking that a block of code leaves no thread, child process or open file behind."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

_FD_DIR = "/proc/self/fd"
_tolerated: list[Callable[[int, str], bool]] = []


def tolerate_fds(predicate: Callable[[int, str], bool]) -> Callable[[], None]:
    """Let every later check ignore new file descriptors that ``predicate(fd, target)``
    accepts (``target``: ``socket:[123]``, a path): those a session-wide service opens on
    demand (a Ray cluster's connections to its workers). Returns what withdraws it."""
    _tolerated.append(predicate)
    return lambda: _tolerated.remove(predicate)


def _open_fds() -> dict[int, str]:
    """Each open file descriptor and what it points to (a number alone can be reused)."""
    try:
        listing = os.listdir(_FD_DIR)
    except FileNotFoundError:  # not Linux: file handles are not checked
        return {}
    found = {}
    for fd in listing:
        try:
            found[int(fd)] = os.readlink(f"{_FD_DIR}/{fd}")
        except OSError:
            continue  # closed while we looked: the listing's own descriptor
    return found


@dataclass
class LeakCheck:
    """A snapshot of threads, child processes and file descriptors, compared later.

    ``settle`` bounds how long :meth:`leaks` joins threads and processes that are on their
    way out (an actor's thread returns just after its stop is acknowledged).
    """

    settle: float = 2.0
    threads: set[threading.Thread] = field(default_factory=lambda: set(threading.enumerate()))
    children: set[int] = field(
        default_factory=lambda: {p.pid for p in multiprocessing.active_children() if p.pid}
    )
    fds: dict[int, str] = field(default_factory=_open_fds)

    def leaks(self) -> list[str]:
        """What was started since the snapshot and is still alive, one line each."""
        found: list[str] = []
        for thread in set(threading.enumerate()) - self.threads:
            thread.join(self.settle)
            if thread.is_alive():
                found.append(f"thread {thread.name!r} (daemon={thread.daemon})")
        for proc in multiprocessing.active_children():
            if proc.pid in self.children:
                continue
            proc.join(self.settle)
            if proc.is_alive():
                found.append(f"process {proc.name!r} pid={proc.pid}")
        for fd, target in sorted(_open_fds().items()):
            if self.fds.get(fd) == target or any(accepts(fd, target) for accepts in _tolerated):
                continue
            if _open_fds().get(fd) == target:  # not closed while we looked
                found.append(f"file descriptor {fd} -> {target}")
        return found
