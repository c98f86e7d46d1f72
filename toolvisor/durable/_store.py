"""``RunStore``: what the runtime needs from a durable store, whatever the backend."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, Final, Protocol, runtime_checkable

from toolvisor.contract import OnCancel, OnTimeout, ToolvisorError
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


class _Unset(Enum):
    UNSET = "UNSET"


UNSET: Final = _Unset.UNSET
"""Marks an argument that was not given (``None`` is a legal JSON value)."""


class UnknownRunError(ToolvisorError, LookupError):
    """The store has no run with that id; create it with ``create_run`` first."""


class StaleLeaseError(ToolvisorError, RuntimeError):
    """A host's write carried a fencing token the run's lease no longer carries: another host
    took the run over (this one paused past its lease, or lost it). The write was refused;
    the host stops driving the run."""


class StoreUnavailableError(ToolvisorError, ConnectionError):
    """The store's server cannot be reached (it restarted, is down, or dropped the
    connection): the message names the store (its URL without the password). Nothing was
    written, unless the message says the commit's outcome is unknown; the store reconnects by
    itself on a later use, so the caller tries again later."""


@runtime_checkable
class RunStore(Protocol):
    """Runs, checkpoints, completion keys and their waits, the journal and process events.

    This is the contract every backend keeps: each method's docstring says what it does.
    Every method that changes more than one row does so in one transaction. All values are
    JSON. A store may be shared by several processes (each opens its own store object on the
    same backing file or database); ``resolve`` in particular is meant to be called from
    anywhere that can open the store.
    """

    def now(self) -> float:
        """The store's clock (seconds since the epoch unless injected)."""
        ...

    def create_run(self, run_id: str | None = None, *, status: str = "running",
                   agent: str | None = None, parent_run_id: str | None = None) -> RunRecord:
        """Record a new run (a fresh uuid4 hex id unless given); a duplicate id is refused.
        ``agent`` names the agent it is started on; ``parent_run_id`` is the run whose call
        started it, for a child session (``toolvisor.cli runs`` shows the tree)."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or ``None`` if the store has none with that id."""
        ...

    def set_run_status(self, run_id: str, status: str) -> RunRecord:
        """Change the run's status (any non-empty str the host chooses)."""
        ...

    def runs(self, *, status: str | None = None) -> list[RunRecord]:
        """Every run (with that status, if given), oldest first."""
        ...

    def acquire_lease(self, run_id: str, holder: str, ttl: float, *,
                      replacing: str | None = None) -> Lease:
        """Take the run's lease for ``ttl`` seconds; the lease that stands after the call:
        ``holder``'s when it took it (or renewed it), else another holder's, not yet expired.
        ``replacing`` names a holder whose lease is taken over whatever its expiry (a host
        known to be dead). A lease taken anew carries a new fencing token (``Lease.token``),
        the run's previous one plus one; a renewed lease keeps its token."""
        ...

    def claim_runs(self, holder: str, ttl: float, limit: int) -> list[Lease]:
        """Take, as ``holder`` for ``ttl`` seconds, the lease of up to ``limit`` runnable runs
        and return them (each with its fencing token); concurrent claimers never take the same
        run. Runs already begun (orphaned, or waiting and woken) come before new ones, however
        deep the queue of new ones; oldest first within each.

        A run is runnable when no live lease holds it (a lease whose holder is a process of
        this machine that is gone, ``holder_gone``, is as free as an expired one), it has a
        checkpoint, and it is new (status ``queued``: submitted), orphaned (``running``: its
        host died or released it), or ``suspended`` and woken (a wait of its current suspension
        was resolved, or an open wait's deadline passed). The claimer then drives it from its
        latest checkpoint.
        """
        ...

    def let_go(self, run_id: str, holder: str, waiting_on: list[str]) -> None:
        """Release ``holder``'s lease on a run that now waits on the keys ``waiting_on`` (its
        current suspension; none for a run that waits on answers only) and forget the run's
        other waits: it is runnable again once one of those keys resolves or passes its
        deadline. Nothing changes if ``holder`` no longer holds the lease."""
        ...

    def on_runnable(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (on any thread; keep it quick) whenever a run may have become
        runnable: a key resolved, a run submitted or a lease released; returns the function
        that stops it. Where the backend cannot hear other processes (SQLite), only this
        process's changes are heard: claimers poll as well."""
        ...

    def renew_leases(self, holder: str, run_ids: list[str], ttl: float) -> list[str]:
        """Extend ``holder``'s leases on ``run_ids``; the ids whose lease it no longer holds."""
        ...

    def release_lease(self, run_id: str, holder: str) -> None:
        """Give the run's lease up, if ``holder`` holds it (another host may take it at once)."""
        ...

    def leases(self) -> list[Lease]:
        """Every lease in the store, by run id, expired ones too: a host that died keeps its
        leases until they expire or another host takes them over."""
        ...

    def save_checkpoint(
        self, run_id: str, effect_id: int, data: str, *, status: str | None = None,
        fence: int | None = None,
    ) -> SavedCheckpoint:
        """Append the checkpoint ``data`` (JSON text, e.g. ``model_dump_json()``) at ``effect_id``.

        Earlier checkpoints are kept. The run's ``updated_at`` (and ``status``, if given)
        change in the same transaction. ``fence`` is the writing host's fencing token: the
        write is refused (``StaleLeaseError``) unless the run's lease still carries it; the
        host's writes (here, ``record_step``, ``append_process_event``, ``expire``) all carry it.
        """
        ...

    def latest_checkpoint(self, run_id: str) -> SavedCheckpoint | None:
        """The run's most recently saved checkpoint, or ``None``."""
        ...

    def checkpoint_at(self, run_id: str, effect_id: int) -> SavedCheckpoint | None:
        """The run's most recent checkpoint saved at ``effect_id``, or ``None``."""
        ...

    def checkpoints(self, run_id: str) -> list[SavedCheckpoint]:
        """Every checkpoint of the run, in the order they were saved. Checkpoints (here and from
        ``latest_checkpoint`` and ``checkpoint_at``) come back only as the store signed them:
        any other raises ``SignatureError``."""
        ...

    def sign(self, text: str) -> str:
        """``text``'s signature under the store's secret (a store is a ``Signer``)."""
        ...

    def verify(self, text: str, signature: str) -> bool:
        """Whether the store signed ``text`` with ``signature``."""
        ...

    def holds_key(self, key_id: str) -> bool:
        """Whether ``key_id`` names the store's secret (an HMAC of a constant under it)."""
        ...

    def issue_key(
        self, run_id: str, call_id: str, *, purpose: KeyPurpose = "call", name: str = ""
    ) -> str:
        """The signed key of ``(run_id, call_id, purpose, name)``; the same key every time.

        The key is recorded when first issued, so it can be resolved (even before the run
        parks it) from any process that opens this store.
        """
        ...

    def revoke(self, key: str, *, fence: int | None = None) -> bool:
        """Refuse every later resolution of an unresolved ``key``; ``True`` if it was revoked.

        For a key whose call ended without parking it (the handler took a key, then returned
        something other than ``Pending``): a late resolver then hears ``unknown_or_revoked``.
        ``fence``: the host's fencing token, as for :meth:`save_checkpoint`.
        """
        ...

    def resolve(self, key: str, *, ok: Any = UNSET, error: Any = UNSET) -> ResolveOutcome:
        """Deliver the result of ``key``'s wait: ``ok=<JSON>`` or ``error=<JSON>``, not both.

        The first resolution of a key wins (atomically, across processes): ``"accepted"``.
        A later one changes nothing: ``"already_resolved"``. A key that is tampered, truncated,
        signed by another store, unknown or revoked changes nothing: ``"unknown_or_revoked"``.
        A resolution that arrives before the run parks the key is kept for it.
        """
        ...

    def resolution(self, key: str) -> Resolution | None:
        """How ``key``'s wait ended, or ``None`` while it is unresolved."""
        ...

    def park(
        self,
        key: str,
        *,
        deadline_at: float | None,
        on_timeout: OnTimeout = "error_as_result",
        on_cancel: OnCancel = "ignore",
    ) -> Wait:
        """Record that the run now waits on ``key`` until ``deadline_at`` (``None``: no deadline).

        Parking again (after a restart) keeps the first park: deadline and policies do not
        move. The returned wait carries the resolution if one already arrived.
        """
        ...

    def open_waits(self, run_id: str | None = None) -> list[Wait]:
        """Parked, unresolved waits (of one run, if given): what a restarted host re-waits on."""
        ...

    def wait_for(self, key: str, timeout: float | None = None) -> Resolution | None:
        """Block until ``key`` is resolved and return how; ``None`` after ``timeout`` seconds.

        A resolution in this process wakes the waiter at once; one made by another process is
        seen within the poll interval. ``timeout`` is real (monotonic) time, not the store
        clock: deadlines are enforced by :meth:`expire_due`, not here.
        """
        ...

    def expire(self, key: str, now: float, *, fence: int | None = None) -> Resolution:
        """Resolve ``key`` as timed out unless something resolved it first; return the winner.
        ``fence``: the host's fencing token, as for :meth:`save_checkpoint`."""
        ...

    def expire_due(self, now: float) -> list[Wait]:
        """Resolve as timed out every open wait whose deadline is at or before ``now``.

        Returns those waits (with their new resolution, whose value records ``on_timeout``),
        for the host to apply each one's policy. A resolver that got there first wins.
        """
        ...

    def cancel_run(self, run_id: str) -> list[Wait]:
        """Resolve every open key of the run as cancelled and mark the run ``cancelled``.

        Returns the parked waits among them (each one's resolution value records
        ``on_cancel``); those with :attr:`Wait.needs_external_cancel` need the host to cancel
        the external work. All of it is one transaction.
        """
        ...

    def journal_record(self, run_id: str, call_id: str, step_id: str) -> JournalRecord | None:
        """The recorded step, or ``None`` if the call never completed it."""
        ...

    def journaled(self, run_id: str, call_id: str) -> bool:
        """Whether the call recorded any step: its side effects are journaled, so running it
        again after a crash replays them instead of repeating them."""
        ...

    def record_step(
        self, run_id: str, call_id: str, step_id: str, input: str, output: str, *,
        fence: int | None = None,
    ) -> JournalRecord:
        """Record a step's canonical JSON ``input`` and ``output``; the first record wins.

        Returns the record now in the journal, which is an earlier one if another execution
        of the call recorded the step first. ``fence``: as for :meth:`save_checkpoint`.
        """
        ...

    def append_process_event(
        self, run_id: str, call_id: str, ordinal: int, type: str, payload: Any, *,
        fence: int | None = None,
    ) -> ProcessEvent:
        """Record the call's ``ordinal``-th event; if already recorded, return the record.
        ``fence``: as for :meth:`save_checkpoint`."""
        ...

    def process_events(
        self, run_id: str | None = None, *, after_seq: int = 0
    ) -> list[ProcessEvent]:
        """Events (of one run, if given) with ``seq`` above ``after_seq``, in emission order."""
        ...

    def close(self) -> None:
        """Let the store's connection go; idempotent."""
        ...
