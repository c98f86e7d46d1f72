"""``PostgresSessionStore``: the store on a PostgreSQL server, for hosts on several machines.

Composed as :class:`~toolvisor.durable.SqliteSessionStore` is: a :class:`PostgresConnection`
(the server, its transactions and lock, its secret) and the same table objects, which speak
the SQL both backends share (``_sql``). Needs the ``postgres`` extra (psycopg 3).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.contract import OnCancel, OnTimeout, check_seconds
from toolvisor.durable._claims import QUEUED, ClaimTable
from toolvisor.durable._key_tables import KeyTables
from toolvisor.durable._lease_table import LeaseTable
from toolvisor.durable._notify import notifier_for
from toolvisor.durable._pg_wakes import PgWakes
from toolvisor.durable._postgres import PostgresConnection
from toolvisor.durable._records import (
    JournalRecord,
    KeyPurpose,
    Lease,
    ProcessEvent,
    Resolution,
    ResolveOutcome,
    RunRecord,
    SavedCheckpoint,
    Wait,
)
from toolvisor.durable._run_tables import RunTables
from toolvisor.durable._signing import sign_keyed, signing_key_id, verify_keyed
from toolvisor.durable._sqlite import POLL_INTERVAL
from toolvisor.durable._store import UNSET, SessionStore


class PostgresSessionStore(SessionStore):
    """A :class:`~toolvisor.durable.SessionStore` on a PostgreSQL server, given its URL
    (``postgresql://user:password@host:port/database``; the tables are created if missing, in
    the schema the URL's ``options=-csearch_path=NAME`` names, else ``public``).

    The same semantics as the SQLite store: each method is one transaction, the store's tables
    hold the HMAC secret that signs completion keys and checkpoints (whoever can read them can
    forge keys: grant them to the hosts only). Writes do not serialize whole: each locks only
    the rows it depends on (a run's writes its row, a resolution its key's), so hosts writing
    different runs never wait for each other.
    ``clock`` stamps every record; ``create=False`` opens only a store that exists (a database
    without one is a ``ValueError``, left unchanged); ``connect_timeout`` bounds the wait for
    the server, ``busy_timeout`` how long a write waits for another connection's lock on a row
    it needs (then psycopg's ``LockNotAvailable``, as SQLite's "database is locked"). A bad URL is a
    ``ValueError``, a server that cannot be reached or refuses the login a
    ``ConnectionError``, each naming the URL (its password hidden). A resolution, a submitted
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
        self._db = PostgresConnection(url, create, connect_timeout, busy_timeout)
        self.path = self._db.path
        self._clock = clock
        self._runs = RunTables(self._db, clock)
        self._leases = LeaseTable(self._db, clock)
        self._claims = ClaimTable(self._db, clock, lock="FOR NO KEY UPDATE OF r SKIP LOCKED")
        self._notifier = notifier = notifier_for(self.path)
        self._keys = KeyTables(self._db, clock, poll_interval, notifier,
                               get_event_log("session_store", path=self.path))
        try:
            self._wakes = PgWakes(url, self._db, notifier)
        except BaseException:
            self._db.close()
            raise

    def now(self) -> float:
        return self._clock()

    # -- runs, checkpoints, journal, process events ----------------------------------------------

    def create_run(self, run_id: str | None = None, *, status: str = "running") -> RunRecord:
        return self._runs.create_run(run_id, status=status)

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._runs.get_run(run_id)

    def set_run_status(self, run_id: str, status: str) -> RunRecord:
        return self._runs.set_run_status(run_id, status)

    def runs(self, *, status: str | None = None) -> list[RunRecord]:
        return self._runs.runs(status=status)

    def save_checkpoint(
        self, run_id: str, effect_id: int, data: str, *, status: str | None = None,
        fence: int | None = None,
    ) -> SavedCheckpoint:
        saved = self._runs.save_checkpoint(run_id, effect_id, data, status=status, fence=fence)
        if status == QUEUED:
            self._wakes.announce()
        return saved

    def latest_checkpoint(self, run_id: str) -> SavedCheckpoint | None:
        return self._runs.latest_checkpoint(run_id)

    def checkpoint_at(self, run_id: str, effect_id: int) -> SavedCheckpoint | None:
        return self._runs.checkpoint_at(run_id, effect_id)

    def checkpoints(self, run_id: str) -> list[SavedCheckpoint]:
        return self._runs.checkpoints(run_id)

    def journal_record(self, run_id: str, call_id: str, step_id: str) -> JournalRecord | None:
        return self._runs.journal_record(run_id, call_id, step_id)

    def journaled(self, run_id: str, call_id: str) -> bool:
        return self._runs.journaled(run_id, call_id)

    def record_step(
        self, run_id: str, call_id: str, step_id: str, input: str, output: str, *,
        fence: int | None = None,
    ) -> JournalRecord:
        return self._runs.record_step(run_id, call_id, step_id, input, output, fence=fence)

    def append_process_event(
        self, run_id: str, call_id: str, ordinal: int, type: str, payload: Any, *,
        fence: int | None = None,
    ) -> ProcessEvent:
        return self._runs.append_process_event(run_id, call_id, ordinal, type, payload,
                                               fence=fence)

    def process_events(
        self, run_id: str | None = None, *, after_seq: int = 0
    ) -> list[ProcessEvent]:
        return self._runs.process_events(run_id, after_seq=after_seq)

    # -- leases ----------------------------------------------------------------------------------

    def acquire_lease(self, run_id: str, holder: str, ttl: float, *,
                      replacing: str | None = None) -> Lease:
        return self._leases.acquire_lease(run_id, holder, ttl, replacing=replacing)

    def renew_leases(self, holder: str, run_ids: list[str], ttl: float) -> list[str]:
        return self._leases.renew_leases(holder, run_ids, ttl)

    def release_lease(self, run_id: str, holder: str) -> None:
        self._leases.release_lease(run_id, holder)
        self._wakes.announce()

    def claim_runs(self, holder: str, ttl: float, limit: int) -> list[Lease]:
        return self._claims.claim_runs(holder, ttl, limit)

    def let_go(self, run_id: str, holder: str, waiting_on: list[str]) -> None:
        self._claims.let_go(run_id, holder, waiting_on)
        self._wakes.announce()

    def on_runnable(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Other processes' changes are heard through ``LISTEN``, at once."""
        self._wakes.listen()
        return self._notifier.listen(callback)

    def leases(self) -> list[Lease]:
        return self._leases.leases()

    # -- completion keys and waits ---------------------------------------------------------------

    def issue_key(
        self, run_id: str, call_id: str, *, purpose: KeyPurpose = "call", name: str = ""
    ) -> str:
        return self._keys.issue_key(run_id, call_id, purpose=purpose, name=name)

    def revoke(self, key: str, *, fence: int | None = None) -> bool:
        return self._keys.revoke(key, fence=fence)

    def resolve(self, key: str, *, ok: Any = UNSET, error: Any = UNSET) -> ResolveOutcome:
        outcome = self._keys.resolve(key, ok=ok, error=error)
        if outcome == "accepted":
            self._wakes.announce()
        return outcome

    def resolution(self, key: str) -> Resolution | None:
        return self._keys.resolution(key)

    def park(
        self,
        key: str,
        *,
        deadline_at: float | None,
        on_timeout: OnTimeout = "error_as_result",
        on_cancel: OnCancel = "ignore",
    ) -> Wait:
        return self._keys.park(key, deadline_at=deadline_at, on_timeout=on_timeout,
                               on_cancel=on_cancel)

    def open_waits(self, run_id: str | None = None) -> list[Wait]:
        return self._keys.open_waits(run_id)

    def wait_for(self, key: str, timeout: float | None = None) -> Resolution | None:
        """A resolution made by another process wakes the waiter at once (``LISTEN``)."""
        self._wakes.listen()
        return self._keys.wait_for(key, timeout)

    def expire(self, key: str, now: float, *, fence: int | None = None) -> Resolution:
        return self._keys.expire(key, now, fence=fence)

    def expire_due(self, now: float) -> list[Wait]:
        return self._keys.expire_due(now)

    def cancel_run(self, run_id: str) -> list[Wait]:
        return self._keys.cancel_run(run_id)

    # -- signatures: a store is a Signer ---------------------------------------------------------

    def sign(self, text: str) -> str:
        return sign_keyed(self._db.secret, text)

    def verify(self, text: str, signature: str) -> bool:
        return verify_keyed((self._db.secret,), text, signature)

    def holds_key(self, key_id: str) -> bool:
        return key_id == signing_key_id(self._db.secret)

    # -- lifetime --------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop listening, close the connection to the server; idempotent."""
        self._wakes.close()
        self._db.close()

    def __enter__(self) -> PostgresSessionStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._db.closed else "open"
        return f"PostgresSessionStore({self.path!r}, {state})"
