"""The PostgreSQL database of a store: connecting (psycopg 3), schema, secret, transactions.

:class:`PostgresConnection` is the PostgreSQL backend's ``SqlDatabase`` (``_sql``), which the
store's table objects share. It owns ONE connection and uses it only under its lock
(:class:`Guarded`), so any thread may call it. Unlike SQLite's, write transactions do not serialize
whole: each is ``READ COMMITTED`` and locks only the rows its change depends on (the run's row,
a key's row, see the tables), so hosts writing different runs never wait for each other. Locks
are always taken run row, then lease row, then key rows, several rows of one kind in one order,
so writes never deadlock; a write changes no key column, hence ``FOR NO KEY UPDATE``, so an
insert referencing a locked run (``FOR KEY SHARE``) does not wait. The store lives in the
schema the URL's ``search_path`` names (``public`` by default); psycopg is imported only when
a store is opened.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any

from toolvisor.durable._failures import postgres_failure
from toolvisor.durable._guarded import Guarded
from toolvisor.durable._pg_link import PgLink, reason_of
from toolvisor.durable._schema import SCHEMA_VERSION, migrate
from toolvisor.durable._sql import Dialect

if TYPE_CHECKING:
    import psycopg

_SECRET_NAME = "hmac_secret"
_VERSION_NAME = "schema_version"
_INSTALL = "pip install '.[postgres]' in toolvisor's clone"
POSTGRES = Dialect(real="DOUBLE PRECISION", serial="BIGSERIAL PRIMARY KEY", row_order="seq",
                   row_order_column=",\n    seq BIGSERIAL NOT NULL", lock_row=" FOR NO KEY UPDATE",
                   share_row=" FOR SHARE",
                   claim_lock=" FOR NO KEY UPDATE OF r SKIP LOCKED")
"""PostgreSQL's words in the shared schema: ``waits`` gets a serial column to order its rows,
and a write locks the rows it depends on (``FOR NO KEY UPDATE``: the columns it changes are
never keys, so inserts that reference a locked row, whose foreign keys take ``FOR KEY SHARE``,
need not wait); a claim skips the candidate runs other writers hold (``SKIP LOCKED``)."""


def import_psycopg() -> ModuleType:
    """The psycopg module, or an ``ImportError`` saying how to install it."""
    try:
        import psycopg  # noqa: PLC0415 (an optional extra, imported when a store opens)
    except ImportError as exc:
        raise ImportError(
            f"a PostgreSQL run store needs psycopg 3, which is not installed: {_INSTALL}"
        ) from exc
    return psycopg


def redacted(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in credentials:
        return url
    return f"{scheme}://{credentials.partition(':')[0]}:***@{host}"


class _PostgresTransaction:
    """A transaction on the store's connection, as the tables see it (``SqlTransaction``)."""

    __slots__ = ("connection",)

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self.connection = connection

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> psycopg.Cursor[Any]:
        """Run ``sql`` written with ``?`` parameters (psycopg's are ``%s``)."""
        return self.connection.execute(sql.replace("?", "%s"), tuple(params))

    def insert(self, sql: str, params: Sequence[Any], key: str, /) -> int:
        """The ``key`` column of the new row, as ``RETURNING`` gives it."""
        row = self.execute(f"{sql} RETURNING {key}", params).fetchone()
        assert row is not None, f"{sql!r} inserted no row"
        value: int = row[0]
        return value


class PostgresConnection:
    """The store's connection to its server, opened in ``__init__`` and closed by :meth:`close`.

    ``create=False`` refuses a database (schema) that holds no store, and writes nothing to it.
    A URL that is not one, a server that cannot be reached or refuses the login is a
    ``ValueError`` or ``ConnectionError`` naming the URL (its password hidden) and the reason.
    Once open, a connection the server dropped is made again by its :class:`PgLink` on a
    later transaction; meanwhile each one is a ``StoreUnavailableError`` naming the store.
    """

    dialect = POSTGRES

    def __init__(self, url: str, create: bool, connect_timeout: float,
                 busy_timeout: float, read_only: bool = False) -> None:
        driver = import_psycopg()
        self.path = redacted(url)

        def connect() -> psycopg.Connection[Any]:
            connection: psycopg.Connection[Any] = driver.connect(
                url, autocommit=True, connect_timeout=max(1, round(connect_timeout)))
            try:
                # a write waits at most busy_timeout for another connection's row lock, as
                # SQLite's for its write lock
                connection.execute(f"SET lock_timeout = {max(1, round(busy_timeout * 1000))}")
            except BaseException:
                connection.close()
                raise
            return connection

        try:
            link = PgLink(self.path, connect)
        except driver.ProgrammingError as exc:
            raise ValueError(f"{self.path!r} is not a PostgreSQL URL psycopg accepts "
                             f"({str(exc).strip()}); "
                             "give postgresql://user:password@host:port/database") from None
        except driver.OperationalError as exc:
            raise ConnectionError(f"cannot open the PostgreSQL run store {self.path!r}: "
                                  f"{reason_of(exc)}") from None
        self._guard = Guarded(self.path, link, postgres_failure)
        try:
            self._secret = self._open(create and not read_only, read_only)
        except BaseException:
            self.close()
            raise

    def _open(self, create: bool, read_only: bool) -> bytes:
        """Create or migrate the schema (unless ``create`` is false: then a database without a
        store is refused, unchanged; ``read_only``: nothing is written, an older store is
        refused), and return the store's secret."""
        with self.write() as tx:
            conn = tx.connection
            if read_only:
                conn.execute("SET TRANSACTION READ ONLY")
            schema = conn.execute("SELECT current_schema()").fetchone()
            if schema is None or schema[0] is None:
                raise ValueError(f"{self.path!r} names no schema that exists (its search_path); "
                                 "create the schema first (toolvisor creates tables, never "
                                 "schemas or databases)")
            if not read_only:  # one opener at a time per schema: not two first creations
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(current_schema()))")
            has_meta = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
            if not (has_meta and has_meta[0]):
                if not create:
                    raise ValueError(f"{self.path!r} holds no run store (no toolvisor tables "
                                     "in its schema); it was left unchanged")
                version = 0
            else:
                row = conn.execute("SELECT value FROM meta WHERE name = %s",
                                   (_VERSION_NAME,)).fetchone()
                version = 0 if row is None else int(row[0])
            if read_only and version != SCHEMA_VERSION:
                raise ValueError(
                    f"run store {self.path!r} has schema version {version}; this "
                    f"toolvisor reads version {SCHEMA_VERSION} (an agent or worker with write "
                    "access brings an older store up to date); it was left unchanged")
            if not read_only:
                migrated = migrate(self.path, version, POSTGRES, conn.execute)
                if migrated != version:
                    conn.execute("INSERT INTO meta (name, value) VALUES (%s, %s) ON CONFLICT "
                                 "(name) DO UPDATE SET value = excluded.value",
                                 (_VERSION_NAME, str(migrated)))
                conn.execute("INSERT INTO meta (name, value) VALUES (%s, %s) ON CONFLICT DO "
                             "NOTHING", (_SECRET_NAME, secrets.token_hex(32)))
            secret = conn.execute("SELECT value FROM meta WHERE name = %s",
                                  (_SECRET_NAME,)).fetchone()
        assert secret is not None
        return bytes.fromhex(secret[0])

    @property
    def secret(self) -> bytes:
        """The HMAC secret kept in the store's ``meta`` table."""
        return self._secret

    @property
    def closed(self) -> bool:
        return self._guard.closed

    @contextmanager
    def write(self) -> Iterator[_PostgresTransaction]:
        """One write transaction (``READ COMMITTED``): all of it commits, or (on any
        exception) none of it; it takes no lock of its own, the tables' statements lock the
        rows they need. A lost server is a ``StoreUnavailableError`` (``PgLink``)."""
        with self._transaction("BEGIN ISOLATION LEVEL READ COMMITTED") as tx:
            yield tx

    @contextmanager
    def read(self) -> Iterator[_PostgresTransaction]:
        """One read snapshot (``REPEATABLE READ``)."""
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") as tx:
            yield tx

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[_PostgresTransaction]:
        """One transaction started with ``begin``, on the link's live connection: committed if
        the block ends normally, else rolled back; a statement that failed because the
        connection was lost is the link's ``StoreUnavailableError``."""
        with self._guard.use() as link:
            conn = link.begin(begin)
            try:
                yield _PostgresTransaction(conn)
            except Exception as exc:
                link.end("ROLLBACK")
                if link.lost():
                    raise link.unavailable(exc) from exc
                raise
            except BaseException:
                link.end("ROLLBACK")
                raise
            link.end("COMMIT")

    def close(self) -> None:
        """Close the connection; idempotent."""
        self._guard.close()
