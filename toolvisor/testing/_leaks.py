"""Checking that a block of code leaves no thread, child process or open file behind."""

from __future__ import annotations

import multiprocessing
import os
import threading
from dataclasses import dataclass, field

_FD_DIR = "/proc/self/fd"


def _open_fds() -> set[int]:
    try:
        return {int(fd) for fd in os.listdir(_FD_DIR)}
    except FileNotFoundError:  # not Linux: file handles are not checked
        return set()


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
    fds: set[int] = field(default_factory=_open_fds)

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
        for fd in sorted(_open_fds() - self.fds):
            try:
                target = os.readlink(f"{_FD_DIR}/{fd}")
            except OSError:
                continue  # closed while we looked: the listing's own descriptor
            found.append(f"file descriptor {fd} -> {target}")
        return found
