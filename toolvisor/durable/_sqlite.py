"""``SqliteSessionStore``: the embedded default store, one SQLite file in WAL mode.

The store is composed, not inherited: a :class:`SqliteConnection` (the file, its transactions
and lock, its secret) and the table objects that hold the logic (:class:`RunTables`,
:class:`LeaseTable`, :class:`KeyTables`), each given that connection and the store clock. The
tables speak portable SQL (``_sql``), so another backend reuses them with its own database.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final

from toolvisor._logging import get_event_log
from toolvisor.contract import OnCancel, OnTimeout, check_seconds
from toolvisor.durable._claims import QUEUED, ClaimTable
from toolvisor.durable._connection import SqliteConnection
from toolvisor.durable._key_tables import KeyTables
from toolvisor.durable._lease_table import LeaseTable
from toolvisor.durable._notify import notifier_for
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
from toolvisor.durable._store import UNSET, SessionStore

POLL_INTERVAL: Final = 0.05
"""How often (seconds) :meth:`SqliteSessionStore.wait_for` re-reads the file by default, to see
resolutions made by other processes; same-process resolutions wake waiters at once."""


class SqliteSessionStore(SessionStore):
    """A :class:`~toolvisor.durable.SessionStore` in one SQLite file (created if missing).

    The file holds the HMAC secret that signs completion keys (created with the file, mode
    0600): whoever can read the file can forge keys, so keep it private. ``clock`` stamps
    every record and computes deadlines; it defaults to wall-clock time because deadlines must
    mean the same thing in every process and after a restart. ``busy_timeout`` bounds how long
    a write waits for another process's write lock. ``create=False`` opens only a store that
    exists: a missing file is a ``FileNotFoundError`` naming its folder, a file that holds no
    store a ``ValueError``, and nothing is written (what a tool looking at a store wants). Use
    it as a context manager, or call :meth:`close`.

    A store object owns one connection and may be used from any thread (calls serialize
    within the object); other processes or store objects on the same file open their own.
    It declares the :class:`~toolvisor.durable.SessionStore` protocol as its base, so the type
    checker holds it to the contract and each method shows the protocol's docstring; each is
    one transaction of the table object that owns it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 5.0,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        check_seconds("poll_interval", poll_interval, positive=True)  # before the file opens
        self._db = SqliteConnection(path, busy_timeout, create)
        self.path = self._db.path
        self._clock = clock
        self._runs = RunTables(self._db, clock)
        self._leases = LeaseTable(self._db, clock)
        self._claims = ClaimTable(self._db, clock)
        self._notifier = notifier_for(self.path)
        self._keys = KeyTables(self._db, clock, poll_interval, self._notifier,
                               get_event_log("session_store", path=self.path))

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
            self._notifier.notify()
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
        self._notifier.notify()

    def claim_runs(self, holder: str, ttl: float, limit: int) -> list[Lease]:
        return self._claims.claim_runs(holder, ttl, limit)

    def let_go(self, run_id: str, holder: str, waiting_on: list[str]) -> None:
        self._claims.let_go(run_id, holder, waiting_on)
        self._notifier.notify()

    def on_runnable(self, callback: Callable[[], None]) -> Callable[[], None]:
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
        return self._keys.resolve(key, ok=ok, error=error)

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
        """Close the connection (and with it the ``-wal``/``-shm`` files); idempotent."""
        self._db.close()

    def __enter__(self) -> SqliteSessionStore:
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
        return f"SqliteSessionStore({self.path!r}, {state})"
