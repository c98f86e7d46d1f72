"""``SqlRunStore``: the :class:`RunStore` over any :class:`SqlDatabase`, which each
backend's store class opens and hands over with its :class:`Wakes`.

The store is composed, not a tower of classes: a database (``SqliteConnection`` or
``PostgresConnection``: the file or server, its transactions, lock, secret and ``Dialect``), the
table objects that hold the logic (:class:`RunTables`, :class:`LeaseTable`,
:class:`ClaimTable`, :class:`KeyTables`), each given that database and the store clock, the
process-wide notifier of the store's path, and the backend's :class:`Wakes`. Every protocol
method is one transaction of the table object that owns it.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, Protocol, Self

from toolvisor._logging import get_event_log
from toolvisor.contract import OnCancel, OnTimeout
from toolvisor.durable._claims import QUEUED, ClaimTable
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
from toolvisor.durable._sql import SqlDatabase
from toolvisor.durable._store import UNSET, RunStore

POLL_INTERVAL: Final = 0.05
"""How often (seconds) a store's ``wait_for`` re-reads the store by default, to see resolutions
made by other processes; same-process resolutions (and, on PostgreSQL, announced ones) wake
waiters at once."""


class Wakes(Protocol):
    """How a backend tells the store objects of other processes that a run may have become
    runnable or a key resolved, and hears theirs (this process's are told by the notifier)."""

    def announce(self) -> None:
        """Tell the other processes' store objects on the same store."""
        ...

    def listen(self) -> None:
        """From now on, turn what other processes announce into notifies of the store's
        notifier (someone here waits); idempotent."""
        ...

    def close(self) -> None:
        """Stop listening; idempotent."""
        ...


class Unheard:
    """The :class:`Wakes` of a backend that cannot reach other processes (SQLite): they see
    changes by polling."""

    def announce(self) -> None:
        """Nothing to tell: other processes poll."""

    def listen(self) -> None:
        """Nothing to hear: this process polls."""

    def close(self) -> None:
        """Nothing to stop."""


class SqlRunStore(RunStore):
    """The one implementation of the :class:`~toolvisor.durable.RunStore` protocol; the
    documented base of ``SqliteRunStore`` and ``PostgresRunStore``, whose constructors
    open their database and pass it here with their :class:`Wakes`.

    A base class rather than a member object because each backend must be its own class, with
    every protocol method on it (``isinstance``, the type checker, the docstrings shown):
    holding a shared object would have each backend forward every method to it again. All
    that differs between backends is composed in: the database and its ``Dialect``, the
    wakes, the path or URL naming the store (``path``, the database's).
    """

    def __init__(self, db: SqlDatabase, clock: Callable[[], float], poll_interval: float,
                 wakes: Wakes) -> None:
        self._db = db
        self.path = db.path
        self._clock = clock
        self._wakes = wakes
        self._runs = RunTables(db, clock)
        self._leases = LeaseTable(db, clock)
        self._claims = ClaimTable(db, clock)
        self._notifier = notifier_for(self.path)
        self._keys = KeyTables(db, clock, poll_interval, self._notifier,
                               get_event_log("run_store", path=self.path))

    def _announce(self) -> None:
        """A run may have become runnable: wake this process's waiters, tell the others."""
        self._notifier.notify()
        self._wakes.announce()

    def now(self) -> float:
        return self._clock()

    # -- runs, checkpoints, journal, process events ----------------------------------------------

    def create_run(self, run_id: str | None = None, *, status: str = "running",
                   agent: str | None = None, parent_run_id: str | None = None) -> RunRecord:
        return self._runs.create_run(run_id, status=status, agent=agent,
                                     parent_run_id=parent_run_id)

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
            self._announce()
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
        self._announce()

    def claim_runs(self, holder: str, ttl: float, limit: int) -> list[Lease]:
        return self._claims.claim_runs(holder, ttl, limit)

    def let_go(self, run_id: str, holder: str, waiting_on: list[str]) -> None:
        self._claims.let_go(run_id, holder, waiting_on)
        self._announce()

    def on_runnable(self, callback: Callable[[], None]) -> Callable[[], None]:
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
        outcome = self._keys.resolve(key, ok=ok, error=error)  # wakes this process's waiters
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
        """Stop hearing other processes, close the database connection; idempotent."""
        self._wakes.close()
        self._db.close()

    def __enter__(self) -> Self:
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
        return f"{type(self).__name__}({self.path!r}, {state})"
