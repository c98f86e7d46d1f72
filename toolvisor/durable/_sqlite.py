"""``SqliteSessionStore``: the embedded default store, one SQLite file in WAL mode.

The class only assembles its layers: the connection (``_connection``), the run tables
(``_run_tables``) and the key tables (``_key_tables``); it adds no state of its own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from types import TracebackType
from typing import Final

from toolvisor.durable._key_tables import KeyTables

POLL_INTERVAL: Final = 0.05
"""How often (seconds) :meth:`SqliteSessionStore.wait_for` re-reads the file by default, to see
resolutions made by other processes; same-process resolutions wake waiters at once."""


class SqliteSessionStore(KeyTables):
    """A :class:`~toolvisor.durable.SessionStore` in one SQLite file (created if missing).

    The file holds the HMAC secret that signs completion keys (created with the file, mode
    0600): whoever can read the file can forge keys, so keep it private. ``clock`` stamps
    every record and computes deadlines; it defaults to wall-clock time because deadlines must
    mean the same thing in every process and after a restart. ``busy_timeout`` bounds how long
    a write waits for another process's write lock. ``create=False`` opens only a store that
    exists: a missing file is a ``FileNotFoundError`` naming its folder, a file that holds no
    store a ``ValueError``, and nothing is written (what a tool looking at a store wants). Use
    it as a context manager, or call :meth:`close`.

    A store object owns one connection and may be used from any thread (calls serialize
    within the object); other processes or store objects on the same file open their own.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 5.0,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        super().__init__(path, busy_timeout, clock, poll_interval, create)

    def __enter__(self) -> SqliteSessionStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._connection is None else "open"
        return f"SqliteSessionStore({self.path!r}, {state})"
