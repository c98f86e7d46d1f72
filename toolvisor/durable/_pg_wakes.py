"""Wake-ups across machines for a PostgreSQL store: ``NOTIFY`` when a run may have become
runnable or a key resolved, one ``LISTEN`` connection per store object that hears them.

:class:`PgWakes` sends on the store's own connection (``pg_notify`` on its channel, named after
the store's database and schema, so stores on one server do not hear each other) and, once
someone waits (a key waiter, a worker), listens on a connection of its own, in a thread that
turns every notification into a :meth:`Notifier.notify` of the store's in-process notifier:
the waiters of this process wake at once, whichever machine made the change. Polling stays as
the fallback (a lost connection ends the listener, logged). State: the listener thread and its
connection belong to ``_lock``'s holder while it starts or stops them; the thread alone uses
the connection in between.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.durable._notify import Notifier
from toolvisor.durable._sql import SqlDatabase

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

    def __init__(self, url: str, db: SqlDatabase, notifier: Notifier) -> None:
        self._url = url
        self._db = db
        self._notifier = notifier
        self.channel = channel_of(db)
        self._lock = threading.Lock()  # guards _thread and _stop while starting or stopping
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def announce(self) -> None:
        """Tell every listener of the store that something changed (this process's waiters
        are told by the store's notifier)."""
        with self._db.read() as tx:
            tx.execute("SELECT pg_notify(?, '')", (self.channel,))

    def listen(self) -> None:
        """Start hearing other processes' announcements, if not already."""
        with self._lock:
            if self._thread is not None or self._stop.is_set():
                return
            import psycopg  # noqa: PLC0415 (the postgres extra: the store imported it already)

            connection = psycopg.connect(self._url, autocommit=True)
            connection.execute(f"LISTEN {self.channel}")
            self._thread = threading.Thread(target=self._hear, args=(connection,), daemon=True,
                                            name="toolvisor-pg-listen")
            self._thread.start()

    def _hear(self, connection: Any) -> None:
        try:
            while not self._stop.is_set():
                heard = False
                for _ in connection.notifies(timeout=_LISTEN_TICK):
                    heard = True
                if heard:
                    self._notifier.notify()
        except Exception as exc:  # the connection failed: waiters fall back to polling
            get_event_log("session_store").error("store_listen_failed", channel=self.channel,
                                                 error=f"{type(exc).__name__}: {exc}")
        finally:
            connection.close()

    def close(self) -> None:
        """Stop listening (joins the thread, closes its connection); idempotent."""
        with self._lock:
            self._stop.set()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
