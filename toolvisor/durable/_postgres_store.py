"""``PostgresRunStore``: the store on a PostgreSQL server, for hosts on several machines.

What is PostgreSQL's is its database, :class:`PostgresConnection` (the server, its transactions
and lock, its secret), and its :class:`PgWakes` (``NOTIFY``/``LISTEN`` between processes); the
store itself is :class:`SqlRunStore`, as SQLite's is. Needs the ``postgres`` extra
(psycopg 3).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from toolvisor.contract import check_seconds
from toolvisor.durable._notify import notifier_for
from toolvisor.durable._pg_wakes import PgWakes
from toolvisor.durable._postgres import PostgresConnection
from toolvisor.durable._sql_store import POLL_INTERVAL, SqlRunStore


class PostgresRunStore(SqlRunStore):
    """A :class:`~toolvisor.durable.RunStore` on a PostgreSQL server, given its URL
    (``postgresql://user:password@host:port/database``; the tables are created if missing, in
    the schema the URL's ``options=-csearch_path=NAME`` names, else ``public``).

    The same semantics as the SQLite store: each method is one transaction, the store's tables
    hold the HMAC secret that signs completion keys and checkpoints (whoever can read them can
    forge keys: grant them to the hosts only). Writes do not serialize whole: each locks only
    the rows it depends on (a run's writes its row, a resolution its key's), so hosts writing
    different runs never wait for each other.
    ``clock`` stamps every record; ``create=False`` opens only a store that exists (a database
    without one is a ``ValueError``, left unchanged); ``read_only=True`` opens an existing
    store for reading alone (nothing is written, so a read-only standby serves it too);
    ``connect_timeout`` bounds the wait for the server, ``busy_timeout`` how long a write waits
    for another connection's lock on a row it needs (then psycopg's ``LockNotAvailable``, as
    SQLite's "database is locked"). A bad URL is a
    ``ValueError``, a server that cannot be reached or refuses the login a
    ``ConnectionError``, each naming the URL (its password hidden); a write the server refuses
    because of the store (its disk is full, it is a read-only standby, the data is damaged) a
    ``StoreError`` saying so. A resolution, a submitted
    run or a released lease is announced with ``NOTIFY``; once something waits here
    (``wait_for``, ``on_runnable``) a ``LISTEN`` connection of the store object's own hears
    other processes' announcements and wakes it at once, and polling every ``poll_interval``
    seconds remains the fallback. Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        url: str,
        *,
        create: bool = True,
        read_only: bool = False,
        clock: Callable[[], float] = time.time,
        connect_timeout: float = 10.0,
        busy_timeout: float = 5.0,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        check_seconds("poll_interval", poll_interval, positive=True)
        check_seconds("connect_timeout", connect_timeout, positive=True)
        check_seconds("busy_timeout", busy_timeout, positive=True)
        if not isinstance(url, str):
            raise TypeError(f"a PostgreSQL store's url is a str, got {type(url).__name__}")
        db = PostgresConnection(url, create, connect_timeout, busy_timeout, read_only)
        try:
            wakes = PgWakes(url, db, notifier_for(db.path), connect_timeout)
        except BaseException:
            db.close()
            raise
        super().__init__(db, clock, poll_interval, wakes)
