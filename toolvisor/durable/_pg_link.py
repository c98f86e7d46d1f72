"""``PgLink``: a store's one PostgreSQL connection, made again when the server drops it.

The server restarts, a DBA kills the backend (``pg_terminate_backend``), a network blip
closes the socket: psycopg's connection is then broken for good. The link notices (the
connection is ``broken`` or ``closed`` after an ``OperationalError``), forgets it, and
connects again on the next transaction, no sooner than its :class:`Backoff` allows, so that
callers polling a server that is down fail at once instead of each waiting on a connect.
A transaction is never replayed behind its caller's back, with one exception that is safe:
the ``BEGIN`` of a connection that broke while idle, which ran nothing, is begun again on a
new connection. A statement that failed mid-transaction, or a ``COMMIT`` whose answer was
lost, is the caller's :class:`StoreUnavailableError`: its write was refused, or (the commit)
its outcome is unknown, and every fenced write after a reconnect is checked against its
lease's token in SQL as before. State: the connection and the backoff belong to the holder of
the store's lock (``Guarded``), which is the only caller of :meth:`PgLink.begin` and
:meth:`PgLink.end`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolvisor._logging import get_event_log
from toolvisor.durable._backoff import Backoff
from toolvisor.durable._store import StoreUnavailableError

if TYPE_CHECKING:
    import psycopg


def reason_of(exc: BaseException) -> str:
    """The driver's message for ``exc`` on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__


def unreachable(path: str, why: str, *, committing: bool = False) -> StoreUnavailableError:
    """The error of a store at ``path`` (a URL without its password) that cannot be reached."""
    outcome = ("the transaction's outcome is unknown (its commit got no answer)" if committing
               else "nothing was written")
    return StoreUnavailableError(
        f"the PostgreSQL run store {path!r} is unreachable ({why}); {outcome}; it "
        "reconnects by itself on a later use: try again once the server is back")


class PgLink:
    """The connection of the store at ``path``, made by ``connect`` (now, and again after the
    server dropped it); ``backoff`` paces the attempts while the server is away."""

    def __init__(self, path: str, connect: Callable[[], psycopg.Connection[Any]],
                 backoff: Backoff | None = None) -> None:
        self._path = path
        self._connect = connect
        self._backoff = backoff or Backoff()
        self._conn: psycopg.Connection[Any] | None = connect()
        self._why = ""  # why the last attempt to connect failed
        self._log = get_event_log("run_store", path=path)

    def begin(self, begin: str) -> psycopg.Connection[Any]:
        """A live connection in a transaction started with ``begin``; if the connection had
        broken while idle, a new one (nothing of this transaction had run)."""
        import psycopg  # noqa: PLC0415 (the postgres extra: the store imported it already)

        conn = self._live()
        try:
            conn.execute(begin)
            return conn
        except psycopg.OperationalError as exc:
            if not self.lost():
                raise
            self._log.warning("store_connection_lost", error=reason_of(exc))
        conn = self._live()
        try:
            conn.execute(begin)
        except psycopg.OperationalError as exc:
            if self.lost():
                raise unreachable(self._path, reason_of(exc)) from exc
            raise
        return conn

    def end(self, sql: str) -> None:
        """Run ``COMMIT`` or ``ROLLBACK``; a lost connection is a :class:`StoreUnavailableError`
        for a commit (its outcome unknown) and nothing for a rollback (the server rolled back)."""
        import psycopg  # noqa: PLC0415

        assert self._conn is not None, "end() outside a transaction"
        try:
            self._conn.execute(sql)
        except psycopg.OperationalError as exc:
            if not self.lost():
                raise
            if sql == "COMMIT":
                raise unreachable(self._path, reason_of(exc), committing=True) from exc

    def lost(self) -> bool:
        """Whether the connection is gone (the driver says it broke or closed); if so it is
        forgotten, to be made again."""
        conn = self._conn
        if conn is None:
            return True
        if not (conn.broken or conn.closed):
            return False
        self._conn = None
        conn.close()
        return True

    def unavailable(self, exc: BaseException) -> StoreUnavailableError:
        """The error to raise for ``exc``, a statement's failure on a lost connection."""
        return unreachable(self._path, reason_of(exc))

    def _live(self) -> psycopg.Connection[Any]:
        """The connection, made again if it was lost (unless the backoff says not yet)."""
        if self._conn is not None and not self.lost():
            return self._conn
        if self._backoff.wait() > 0:
            raise unreachable(self._path, self._why or "connection lost")
        try:
            self._conn = self._connect()
        except Exception as exc:
            self._why = reason_of(exc)
            self._backoff.failed()
            raise unreachable(self._path, self._why) from exc
        self._backoff.succeeded()
        self._log.info("store_reconnected")
        return self._conn

    def close(self) -> None:
        """Close the connection, if there is one."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
