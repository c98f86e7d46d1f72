"""``SessionStore``: what the runtime needs from a durable store, whatever the backend."""

from __future__ import annotations

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


@runtime_checkable
class SessionStore(Protocol):
    """Runs, checkpoints, completion keys and their waits, the journal and process events.

    Every method that changes more than one row does so in one transaction. All values are
    JSON. A store may be shared by several processes (each opens its own store object on the
    same backing file or database); ``resolve`` in particular is meant to be called from
    anywhere that can open the store.
    """

    def now(self) -> float:
        """The store's clock (seconds since the epoch unless injected)."""
        ...

    def create_run(self, run_id: str | None = None, *, status: str = "running") -> RunRecord: ...

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def set_run_status(self, run_id: str, status: str) -> RunRecord: ...

    def runs(self, *, status: str | None = None) -> list[RunRecord]:
        """Every run (with that status, if given), oldest first."""
        ...

    def acquire_lease(self, run_id: str, holder: str, ttl: float, *,
                      replacing: str | None = None) -> Lease | None:
        """Take the run's lease (one host per run); the standing lease if another holds it."""
        ...

    def renew_leases(self, holder: str, run_ids: list[str], ttl: float) -> list[str]: ...

    def release_lease(self, run_id: str, holder: str) -> None: ...

    def leases(self) -> list[Lease]:
        """Every lease standing, expired ones too (a dead host's stay until taken over)."""
        ...

    def save_checkpoint(
        self, run_id: str, effect_id: int, data: str, *, status: str | None = None
    ) -> SavedCheckpoint: ...

    def latest_checkpoint(self, run_id: str) -> SavedCheckpoint | None: ...

    def checkpoint_at(self, run_id: str, effect_id: int) -> SavedCheckpoint | None: ...

    def checkpoints(self, run_id: str) -> list[SavedCheckpoint]:
        """Every checkpoint of the run. Checkpoints (here and from ``latest_checkpoint`` and
        ``checkpoint_at``) come back only as the store signed them: any other raises
        ``SignatureError``."""
        ...

    def sign(self, text: str) -> str:
        """``text``'s signature under the store's secret (a store is a ``Signer``)."""
        ...

    def verify(self, text: str, signature: str) -> bool: ...

    def holds_key(self, key_id: str) -> bool:
        """Whether ``key_id`` names the store's secret (an HMAC of a constant under it)."""
        ...

    def issue_key(
        self, run_id: str, call_id: str, *, purpose: KeyPurpose = "call", name: str = ""
    ) -> str: ...

    def revoke(self, key: str) -> bool: ...

    def resolve(self, key: str, *, ok: Any = UNSET, error: Any = UNSET) -> ResolveOutcome: ...

    def resolution(self, key: str) -> Resolution | None: ...

    def park(
        self,
        key: str,
        *,
        deadline_at: float | None,
        on_timeout: OnTimeout = "error_as_result",
        on_cancel: OnCancel = "ignore",
    ) -> Wait: ...

    def open_waits(self, run_id: str | None = None) -> list[Wait]: ...

    def wait_for(self, key: str, timeout: float | None = None) -> Resolution | None: ...

    def expire(self, key: str, now: float) -> Resolution: ...

    def expire_due(self, now: float) -> list[Wait]: ...

    def cancel_run(self, run_id: str) -> list[Wait]: ...

    def journal_record(self, run_id: str, call_id: str, step_id: str) -> JournalRecord | None: ...

    def journaled(self, run_id: str, call_id: str) -> bool:
        """Whether the call recorded any journal step."""
        ...

    def record_step(
        self, run_id: str, call_id: str, step_id: str, input: str, output: str
    ) -> JournalRecord: ...

    def append_process_event(
        self, run_id: str, call_id: str, ordinal: int, type: str, payload: Any
    ) -> ProcessEvent: ...

    def process_events(
        self, run_id: str | None = None, *, after_seq: int = 0
    ) -> list[ProcessEvent]: ...

    def close(self) -> None: ...
