"""The SQL layer every store backend shares: what its tables ask of a database, and its checks.

The table objects (``_run_tables``, ``_lease_table``, ``_key_tables``) hold the store's logic
and speak portable SQL with ``?`` parameters through these protocols. A backend supplies the
database: how its file or server is opened, its schema, its transactions and locking, and the
few places where dialects differ (a backend whose driver wants another parameter style turns
``?`` into its own in :meth:`SqlTransaction.execute`); the words its schema spells its own way
are its :class:`Dialect`. ``SqliteConnection`` and ``PostgresConnection`` are the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from toolvisor.durable._store import StaleLeaseError, UnknownRunError


@dataclass(frozen=True, slots=True)
class Dialect:
    """The words of the shared schema (``_schema``) that a backend spells its own way.

    ``real``: a float column's type; ``serial``: an integer primary key the database numbers
    in insert order; ``row_order``: the column that orders a table's rows as they were
    inserted (read as ``alias.row_order``) and ``row_order_column``: what the ``waits`` table
    adds to have it (nothing where the database has one built in). ``lock_row`` and
    ``share_row`` end a ``SELECT`` that locks the rows it reads against other writers (the
    first) or against their changes only (the second), and ``claim_lock`` the claims' select of
    candidate runs (alias ``r``), passing over the rows other writers hold: all empty where
    write transactions are serialized whole, as SQLite's are.
    """

    real: str
    serial: str
    row_order: str
    row_order_column: str
    lock_row: str = ""
    share_row: str = ""
    claim_lock: str = ""


class SqlCursor(Protocol):
    """What a statement returns: its rows, and how many rows it changed."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class SqlTransaction(Protocol):
    """One transaction, open for the duration of a ``with`` block of its database."""

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> SqlCursor:
        """Run one statement written with ``?`` parameters."""
        ...

    def insert(self, sql: str, params: Sequence[Any], key: str, /) -> int:
        """Run one ``INSERT`` of a single row and return the integer ``key`` column the
        database generated for it (an autoincrement or serial column)."""
        ...


class SqlDatabase(Protocol):
    """A store's database: its transactions, the secret it keeps, where it is (a file's path,
    or a server's URL without its password), and its :class:`Dialect`."""

    path: str
    dialect: Dialect

    @property
    def secret(self) -> bytes:
        """The HMAC secret stored with the data: it signs completion keys and checkpoints."""
        ...

    def write(self) -> AbstractContextManager[SqlTransaction]:
        """One write transaction: all of it commits, or (on any exception) none of it. Where
        the dialect's ``lock_row`` is empty no other write to the store runs between its
        statements; otherwise each statement sees what other writes committed before it, and
        the tables lock the rows a change depends on (``lock_run``, ``share_row``)."""
        ...

    def read(self) -> AbstractContextManager[SqlTransaction]:
        """One consistent snapshot to read from."""
        ...

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        ...

    def close(self) -> None:
        """Let the connection go; idempotent."""
        ...


def require_id(value: object, what: str) -> str:
    """``value`` if it is a non-empty str; a ``ValueError`` naming ``what`` if not."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty str, got {value!r}")
    return value


def lock_run(tx: SqlTransaction, dialect: Dialect, run_id: str) -> bool:
    """Lock the run's row in ``runs`` until ``tx`` ends (``dialect.lock_row``), so that the
    writes of one run, and of its lease, happen one after the other; whether the run exists."""
    row = tx.execute(f"SELECT 1 FROM runs WHERE run_id = ?{dialect.lock_row}",
                     (run_id,)).fetchone()
    return row is not None


def require_run(tx: SqlTransaction, run_id: str, dialect: Dialect | None = None) -> None:
    """Refuse (``UnknownRunError``) a run the store does not have, inside ``tx``; given the
    ``dialect``, lock the run's row as :func:`lock_run` does."""
    locks = "" if dialect is None else dialect.lock_row
    if tx.execute(f"SELECT 1 FROM runs WHERE run_id = ?{locks}", (run_id,)).fetchone() is None:
        raise UnknownRunError(
            f"the run store has no run {run_id!r}; create it with create_run first"
        )


def next_fence(tx: SqlTransaction, run_id: str) -> int:
    """The run's next fencing token, for a lease that changes holder: taken from the run's row
    inside ``tx``, so no two holders of one run ever get the same token."""
    tx.execute("UPDATE runs SET fence = fence + 1 WHERE run_id = ?", (run_id,))
    token: int = tx.execute("SELECT fence FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0]
    return token


def require_fence(tx: SqlTransaction, run_id: str, fence: int | None,
                  dialect: Dialect | None = None) -> None:
    """Refuse (``StaleLeaseError``) a write fenced with a token the run's lease no longer
    carries, inside ``tx``; an unfenced write (``None``: not a host's) passes. The caller holds
    the run's row lock (:func:`lock_run`), or passes its ``dialect`` to have it taken here:
    every change of a run's lease takes that lock too, so the token read stays the lease's
    until ``tx`` commits."""
    if fence is None:
        return
    if dialect is not None:
        lock_run(tx, dialect, run_id)
    row = tx.execute("SELECT holder, token FROM leases WHERE run_id = ?", (run_id,)).fetchone()
    if row is None or row[1] != fence:
        now = ("no host holds its lease now" if row is None
               else f"its lease is {row[0]}'s, with token {row[1]}")
        raise StaleLeaseError(
            f"run {run_id!r}: this host's write carries fencing token {fence}, but {now}: "
            "another host took the run over while this one was paused or cut off; the write "
            "was refused, and this host stops driving the run")
