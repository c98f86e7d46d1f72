"""The SQLite file of a store: opening it (private file, pragmas, schema, secret), its transactions.

:class:`SqliteConnection` is the SQLite backend's :class:`~toolvisor.durable._sql.SqlDatabase`,
which the store's table objects share. It owns ONE connection and uses it only under its lock
(:class:`Guarded`), so any thread may call it; other connections on the same file (other
processes, other store objects) are serialized by SQLite's file locks.
"""

from __future__ import annotations

import errno
import os
import secrets
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolvisor.durable._failures import StoreError, StoreProblem, sqlite_failure
from toolvisor.durable._guarded import Guarded
from toolvisor.durable._schema import SCHEMA_VERSION, migrate
from toolvisor.durable._sql import Dialect

_SECRET_NAME = "hmac_secret"
SQLITE = Dialect(real="REAL", serial="INTEGER PRIMARY KEY AUTOINCREMENT", row_order="rowid",
                 row_order_column="")
"""SQLite's words in the shared schema: its ``rowid`` orders every table's rows."""
_CREATE_PROBLEMS: dict[int, StoreProblem] = {errno.EROFS: "read_only", errno.EACCES: "read_only",
                                            errno.ENOSPC: "full"}
"""What an ``OSError`` creating a new store's file says about the store, by its errno."""


def _require_file(path: Path) -> None:
    """Refuse a store path with no file (naming the folder), so opening creates nothing."""
    if not path.parent.is_dir():
        raise FileNotFoundError(f"no run store at {str(path)!r}: the folder "
                                f"{str(path.parent)!r} does not exist")
    if not path.exists():
        raise FileNotFoundError(f"no run store at {str(path)!r}: the folder "
                                f"{str(path.parent)!r} has no file {path.name!r}")


def _read_only_uri(path: Path) -> str:
    """The URI that opens the store file at ``path`` for reading only. In a folder this process
    cannot write to, SQLite could not create the ``-wal`` and ``-shm`` files a WAL-mode file is
    read through: there, unless a ``-wal`` file was left behind (then SQLite reads through
    it), the file is opened ``immutable`` (nobody can change it there)."""
    uri = f"{path.as_uri()}?mode=ro"
    if not os.access(path.parent, os.W_OK) and not path.with_name(f"{path.name}-wal").exists():
        uri += "&immutable=1"
    return uri


def _switch_to_wal(connection: sqlite3.Connection, busy_timeout: float) -> str:
    """Put the file in WAL mode (a no-op once it is); the journal mode it is in after.

    Switching a new file takes its exclusive lock from a read lock. When another connection
    holds the write lock (another process switching the same new file, or writing to it),
    SQLite answers busy at once, without its busy handler (waiting there could deadlock): so
    this waits for that lock holding none (``BEGIN EXCLUSIVE``, through the busy handler),
    then tries again, until ``busy_timeout`` has passed, as any other statement would.
    """
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            mode: str = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            return mode
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY \
                    or time.monotonic() >= deadline:
                raise
        _wait_for_lock(connection)


def _wait_for_lock(connection: sqlite3.Connection) -> None:
    """Wait, through the busy handler, until no other connection holds a lock on the file."""
    connection.execute("BEGIN EXCLUSIVE")
    connection.execute("ROLLBACK")


class _SqliteTransaction:
    """A transaction on the store's connection, as the tables see it (``SqlTransaction``)."""

    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> sqlite3.Cursor:
        return self._conn.execute(sql, params)

    def insert(self, sql: str, params: Sequence[Any], key: str, /) -> int:
        """The new row's ``rowid``, which an ``INTEGER PRIMARY KEY`` column (``key``) is."""
        rowid = self._conn.execute(sql, params).lastrowid
        assert rowid is not None, f"{sql!r} inserted no row"
        return rowid


class SqliteConnection:
    """The store's connection, opened in ``__init__`` and closed by :meth:`close`.

    The file is in WAL mode with ``synchronous=FULL``: a commit that returned survives a power
    cut. Every write is ``BEGIN IMMEDIATE`` with a busy timeout and every read is one snapshot
    transaction, each holding the connection's lock from start to end (calls serialize within
    the object); opening waits for another connection's lock within the busy timeout too.
    The file (created mode 0600) holds the HMAC secret that signs completion keys. Opening
    checks the file is whole (a damaged one is a ``StoreError``, and is left unchanged);
    ``read_only`` opens an existing store for reading alone, writing nothing to it, which
    works in a read-only folder too.
    """

    dialect = SQLITE

    def __init__(self, path: str | os.PathLike[str], busy_timeout: float,
                 create: bool = True, read_only: bool = False) -> None:
        resolved = Path(path).resolve()
        if resolved.is_dir():
            raise ValueError(f"run store path {str(resolved)!r} is a directory; give a file")
        if not create or read_only:
            _require_file(resolved)
        elif not resolved.parent.is_dir():
            raise FileNotFoundError(
                f"cannot create a run store at {str(resolved)!r}: its folder "
                f"{str(resolved.parent)!r} does not exist (create the folder first; toolvisor "
                f"creates the store's file, never its folders)")
        self.path = str(resolved)
        if create and not read_only:
            self._create_private(resolved)
        self._guard = Guarded(self.path, sqlite3.connect(
            _read_only_uri(resolved) if read_only else self.path, timeout=busy_timeout,
            isolation_level=None, check_same_thread=False, uri=read_only,
        ), sqlite_failure)
        try:
            self._secret = self._open_read_only(busy_timeout) if read_only \
                else self._open(busy_timeout, create)
        except sqlite3.OperationalError:
            self.close()
            raise
        except sqlite3.DatabaseError as exc:  # not an SQLite file at all
            self.close()
            raise ValueError(f"{self.path!r} is not a run store ({exc}): give the path "
                             "of a store's SQLite file, or of a new file") from None
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _create_private(path: Path) -> None:
        """Create the file readable by its owner only, before SQLite opens it; a folder that
        refuses it (read-only, or its disk full) is a ``StoreError``."""
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return
        except OSError as exc:
            problem = _CREATE_PROBLEMS.get(exc.errno or 0)
            if problem is None:
                raise
            raise StoreError(str(path), problem, f"cannot create the file: {exc.strerror}") \
                from exc
        os.close(fd)

    def _open(self, busy_timeout: float, create: bool) -> bytes:
        """Set the pragmas, check the file is whole, create the schema in a new file (unless
        ``create`` is false: then a file without one is refused, unchanged), and return the
        file's secret."""
        with self._guard.use() as connection:
            connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            if not create and connection.execute("PRAGMA user_version").fetchone()[0] == 0:
                raise ValueError(f"{self.path!r} holds no run store (an empty or another "
                                 "program's SQLite file); it was left unchanged")
            self._check_whole(connection)
            mode = _switch_to_wal(connection, busy_timeout)
            if mode != "wal":
                raise RuntimeError(
                    f"run store {self.path!r} could not switch to WAL mode (got {mode!r}); "
                    "put it on a local file system"
                )
            connection.execute("PRAGMA synchronous = FULL")
            connection.execute("PRAGMA foreign_keys = ON")
        with self.write() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            migrated = migrate(self.path, version, SQLITE, conn.execute)
            if migrated != version:
                conn.execute(f"PRAGMA user_version = {migrated}")
            conn.execute(
                "INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)",
                (_SECRET_NAME, secrets.token_hex(32)),
            )
            secret_hex = conn.execute(
                "SELECT value FROM meta WHERE name = ?", (_SECRET_NAME,)
            ).fetchone()[0]
        return bytes.fromhex(secret_hex)

    def _open_read_only(self, busy_timeout: float) -> bytes:
        """Check the file holds a whole store of this version and return its secret, writing
        nothing (no WAL switch, no migration)."""
        with self._guard.use() as connection:
            connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                raise ValueError(f"{self.path!r} holds no run store (an empty or another "
                                 "program's SQLite file); it was left unchanged")
            if version != SCHEMA_VERSION:
                raise ValueError(
                    f"run store {self.path!r} has schema version {version}; this toolvisor "
                    f"reads version {SCHEMA_VERSION} (an agent or worker with write access "
                    "brings an older store up to date); it was left unchanged")
            self._check_whole(connection)
        with self.read() as conn:
            secret_hex = conn.execute(
                "SELECT value FROM meta WHERE name = ?", (_SECRET_NAME,)).fetchone()[0]
        return bytes.fromhex(secret_hex)

    def _check_whole(self, connection: sqlite3.Connection) -> None:
        """Refuse a damaged file before anything is written to it (``PRAGMA quick_check``:
        every page read once; a damaged page SQLite meets on the way is its own error)."""
        found = [row[0] for row in connection.execute("PRAGMA quick_check(2)").fetchall()]
        if found != ["ok"]:  # the problems, after a "*** in database main ***" line (one
            # row each, or one row of several lines)
            raise StoreError(self.path, "damaged", "; ".join(
                line for row in found for line in row.splitlines()
                if line and not line.startswith("***")))

    @property
    def secret(self) -> bytes:
        """The HMAC secret kept in the file's ``meta`` table."""
        return self._secret

    @property
    def closed(self) -> bool:
        return self._guard.closed

    @contextmanager
    def write(self) -> Iterator[_SqliteTransaction]:
        """One write transaction: all of it commits, or (on any exception) none of it.

        ``BEGIN IMMEDIATE`` takes the file's write lock up front, so a read-then-write cannot
        be overtaken by another connection's write.
        """
        with self._guard.use() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteTransaction(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def read(self) -> Iterator[_SqliteTransaction]:
        """One read snapshot."""
        with self._guard.snapshot("BEGIN") as conn:
            yield _SqliteTransaction(conn)

    def close(self) -> None:
        """Close the connection (and with it the ``-wal``/``-shm`` files); idempotent."""
        self._guard.close()
