"""A store's one database connection, used only under its lock, so any thread may call it.

:class:`Guarded` is what ``SqliteConnection`` and ``PostgresConnection`` share: the lock that
owns the connection (PostgreSQL's is a ``PgLink``, which makes its connection again when it
is lost), the refusal of a closed one, a read snapshot, an idempotent close, and the driver's
errors that say the store itself failed turned into ``StoreError``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, Protocol, TypeVar

from toolvisor.durable._failures import StoreError


class Closable(Protocol):
    """What :class:`Guarded` needs of a connection: that it can be closed."""

    def close(self) -> None: ...


class Connection(Closable, Protocol):
    """What :meth:`Guarded.snapshot` needs of a driver's connection (``sqlite3``)."""

    def execute(self, sql: str, /) -> Any: ...


C = TypeVar("C", bound=Closable)
E = TypeVar("E", bound=Connection)


class Guarded(Generic[C]):
    """``connection`` of the store at ``path``, used only while holding ``_lock`` (which owns
    it) until :meth:`close`; ``failure`` reads an error raised while it is used and gives
    the ``StoreError`` it means (``None``: the error passes as it is)."""

    def __init__(self, path: str, connection: C,
                 failure: Callable[[str, BaseException], StoreError | None]) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._connection: C | None = connection
        self._failure = failure

    @property
    def closed(self) -> bool:
        return self._connection is None

    @contextmanager
    def use(self) -> Iterator[C]:
        """The connection, for the ``with`` block alone; a closed store is a ``RuntimeError``,
        a store that failed (full, read-only, damaged) a ``StoreError``."""
        with self._lock:
            if self._connection is None:
                raise RuntimeError(f"run store {self._path!r} is closed")
            try:
                yield self._connection
            except Exception as exc:
                failed = self._failure(self._path, exc)
                if failed is None:
                    raise
                raise failed from exc

    @contextmanager
    def snapshot(self: Guarded[E], begin: str) -> Iterator[E]:
        """One read transaction, started with ``begin`` and committed however the block ends."""
        with self.use() as conn:
            conn.execute(begin)
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    def close(self) -> None:
        """Close the connection; idempotent."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
