"""Wake-ups across machines for a PostgreSQL store: ``NOTIFY`` when a run may have become
runnable or a key resolved, one ``LISTEN`` connection per store object that hears them.

:class:`PgWakes` sends on the store's own connection (``pg_notify`` on its channel, named after
the store's database and schema, so stores on one server do not hear each other) and, once
someone waits (a key waiter, a worker), listens on a connection of its own, in a thread that
turns every notification into a :meth:`Notifier.notify` of the store's in-process notifier:
the waiters of this process wake at once, whichever machine made the change. Polling stays as
the fallback. A lost connection (the server restarted, the backend was killed) is made again
with backoff, and once it is back the notifier is woken: an announcement made while it was
away was never heard, so every waiter looks at the store again. State: the listener thread
belongs to ``_lock``'s holder while it starts or stops it; the thread alone uses its
connection, and its backoff.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.durable._backoff import Backoff
from toolvisor.durable._notify import Notifier
from toolvisor.durable._pg_link import reason_of, unreachable
from toolvisor.durable._sql import SqlDatabase
from toolvisor.durable._store import StoreUnavailableError

_LISTEN_TICK = 0.1
"""How long (seconds) the listener blocks between looks at whether it is to stop."""


def channel_of(db: SqlDatabase) -> str:
    """The notification channel of the store in ``db``: its database and schema, hashed."""
    with db.read() as tx:
        database, schema = tx.execute("SELECT current_database(), current_schema()").fetchone()
    return "toolvisor_" + hashlib.sha256(f"{database}/{schema}".encode()).hexdigest()[:24]


class PgWakes:
    """``announce`` a change to every store object on the same store, on any machine, and
    (from :meth:`listen` on) hear theirs through ``notifier``: the PostgreSQL store's
    ``Wakes``."""

    def __init__(self, url: str, db: SqlDatabase, notifier: Notifier,
                 connect_timeout: float = 10.0) -> None:
        self._url = url
        self._connect_timeout = connect_timeout
        self._db = db
        self._notifier = notifier
        self.channel = channel_of(db)
        self._lock = threading.Lock()  # guards _thread and _stop while starting or stopping
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def announce(self) -> None:
        """Tell every listener of the store that something changed (this process's waiters
        are told by the store's notifier). A store that cannot be reached announces nothing
        (logged): the change itself committed, and listeners re-read the store when their
        connection is back, pollers on their next poll."""
        try:
            with self._db.read() as tx:
                tx.execute("SELECT pg_notify(?, '')", (self.channel,))
        except StoreUnavailableError as exc:
            get_event_log("run_store").warning("store_announce_failed",
                                                   channel=self.channel, error=str(exc))

    def listen(self) -> None:
        """Start hearing other processes' announcements, if not already (a server that
        cannot be reached now is a ``StoreUnavailableError``)."""
        with self._lock:
            if self._thread is not None or self._stop.is_set():
                return
            try:
                connection = self._connect()
            except Exception as exc:
                raise unreachable(self._db.path, reason_of(exc)) from exc
            self._thread = threading.Thread(target=self._hear, args=(connection,), daemon=True,
                                            name="toolvisor-pg-listen")
            self._thread.start()

    def _connect(self) -> Any:
        """A new connection that listens on the store's channel."""
        import psycopg  # noqa: PLC0415 (the postgres extra: the store imported it already)

        connection = psycopg.connect(self._url, autocommit=True,
                                     connect_timeout=max(1, round(self._connect_timeout)))
        try:
            connection.execute(f"LISTEN {self.channel}")
        except BaseException:
            connection.close()
            raise
        return connection

    def _hear(self, connection: Any) -> None:
        """The listener thread: wake the notifier on each announcement; when the connection
        is lost, connect again (with backoff) and wake the notifier once it is back, since
        announcements made meanwhile were never heard."""
        backoff = Backoff()
        log = get_event_log("run_store")
        while not self._stop.is_set():
            if connection is None:
                if self._stop.wait(backoff.wait()):
                    break
                try:
                    connection = self._connect()
                except Exception as exc:
                    backoff.failed()
                    log.warning("store_listen_reconnect_failed", channel=self.channel,
                                error=reason_of(exc))
                    continue
                backoff.succeeded()
                log.info("store_listen_reconnected", channel=self.channel)
                self._notifier.notify()  # whatever changed while away: look again
            try:
                self._heard(connection)
            except Exception as exc:  # the connection failed: make it again
                log.error("store_listen_failed", channel=self.channel,
                          error=f"{type(exc).__name__}: {reason_of(exc)}")
                connection.close()
                connection = None
        if connection is not None:
            connection.close()

    def _heard(self, connection: Any) -> None:
        """Wait on ``connection`` for announcements for a tick; notify if any came."""
        heard = False
        for _ in connection.notifies(timeout=_LISTEN_TICK):
            heard = True
        if heard:
            self._notifier.notify()

    def close(self) -> None:
        """Stop listening (joins the thread, closes its connection); idempotent."""
        with self._lock:
            self._stop.set()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
