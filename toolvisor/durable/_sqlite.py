"""``SqliteRunStore``: the embedded default store, one SQLite file in WAL mode.

What is SQLite's is its database, :class:`SqliteConnection` (the file, its transactions and
lock, its secret); the store itself is :class:`SqlRunStore`, which other processes on the
file cannot wake (:class:`Unheard`): they poll.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from toolvisor.contract import check_seconds
from toolvisor.durable._connection import SqliteConnection
from toolvisor.durable._sql_store import POLL_INTERVAL, SqlRunStore, Unheard


class SqliteRunStore(SqlRunStore):
    """A :class:`~toolvisor.durable.RunStore` in one SQLite file (created if missing).

    The file holds the HMAC secret that signs completion keys (created with the file, mode
    0600): whoever can read the file can forge keys, so keep it private. ``clock`` stamps
    every record and computes deadlines; it defaults to wall-clock time because deadlines must
    mean the same thing in every process and after a restart. ``busy_timeout`` bounds how long
    a write waits for another process's write lock. ``create=False`` opens only a store that
    exists: a missing file is a ``FileNotFoundError`` naming its folder, a file that holds no
    store a ``ValueError``, and nothing is written. ``read_only=True`` opens an existing store
    for reading alone (what a tool looking at a store wants): no write at all, not even the
    switch to WAL mode or a schema migration, so it reads a store in a read-only folder too;
    a write then is a ``StoreError``. A store SQLite cannot use (the disk is full, the file is
    read-only or damaged) is a ``StoreError`` naming the file and what is wrong, at open or
    at the write that meets it; a damaged file is refused at open, before anything is written
    to it. Use it as a context manager, or call :meth:`close`.

    A store object owns one connection and may be used from any thread (calls serialize
    within the object); other processes or store objects on the same file open their own.
    Each method keeps the contract the :class:`~toolvisor.durable.RunStore` protocol's
    docstring of the same name writes, in one transaction.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        read_only: bool = False,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 5.0,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        check_seconds("poll_interval", poll_interval, positive=True)  # before the file opens
        super().__init__(SqliteConnection(path, busy_timeout, create, read_only), clock,
                         poll_interval, Unheard())
