"""The plain records a run store hands out; every value in them is JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from toolvisor.contract import OnCancel, OnTimeout

ResolveOutcome: TypeAlias = Literal["accepted", "already_resolved", "unknown_or_revoked"]
"""What :meth:`RunStore.resolve` says about one resolution attempt."""

ResolutionKind: TypeAlias = Literal["ok", "error", "timeout", "cancelled"]
KeyPurpose: TypeAlias = Literal["call", "event"]
"""``call``: the wait of a ``Pending`` tool call; ``event``: a durable effect's external event."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run: its id, a free-form status the host chooses, and when it changed; the name of
    the agent it was started on and, for a child session, the run whose call started it
    (``None`` where not given, and in runs a store before schema version 4 recorded)."""

    run_id: str
    status: str
    created_at: float
    updated_at: float
    agent: str | None = None
    parent_run_id: str | None = None


@dataclass(frozen=True, slots=True)
class Lease:
    """Who hosts a run, until when (store clock); renewed while the holder drives it.

    ``token`` is the lease's fencing token: the run's count of leases taken, from the store,
    so a later holder's is always greater. The holder's writes carry it, and the store refuses
    them once another holder has taken the run over.
    """

    run_id: str
    holder: str
    expires_at: float
    token: int = 0


@dataclass(frozen=True, slots=True)
class SavedCheckpoint:
    """A checkpoint as the store keeps it: the machine's JSON text at ``effect_id``.

    ``data`` is a :class:`~toolvisor.machine.Checkpoint` as JSON text; ``seq`` orders saves;
    ``signature`` is the store's over the run id, effect id and data (checked on every read).
    """

    seq: int
    run_id: str
    effect_id: int
    data: str
    saved_at: float
    signature: str


@dataclass(frozen=True, slots=True)
class Resolution:
    """How a key's wait ended; the first resolution of a key is the only one.

    ``value`` is the JSON the resolver sent for ``ok`` and ``error``; for ``timeout`` it is
    ``{"on_timeout": ...}`` and for ``cancelled`` ``{"on_cancel": ...}`` (the parked policy),
    or ``None`` when the key was never parked.
    """

    kind: ResolutionKind
    value: Any
    resolved_at: float


@dataclass(frozen=True, slots=True)
class Wait:
    """A parked key: the run waits for its resolution until ``deadline_at`` (store clock)."""

    key: str
    run_id: str
    call_id: str
    purpose: KeyPurpose
    deadline_at: float | None
    on_timeout: OnTimeout
    on_cancel: OnCancel
    parked_at: float
    resolution: Resolution | None

    @property
    def needs_external_cancel(self) -> bool:
        """Whether the host must cancel the external work behind this wait."""
        return self.on_cancel == "cancel_external_work"


@dataclass(frozen=True, slots=True)
class JournalRecord:
    """The recorded result of one ``run_json`` step; input and output are canonical JSON."""

    run_id: str
    call_id: str
    step_id: str
    input: str
    output: str
    recorded_at: float


@dataclass(frozen=True, slots=True)
class ProcessEvent:
    """An event a call emitted; ``seq`` orders all events of the store."""

    seq: int
    run_id: str
    call_id: str
    ordinal: int
    type: str
    payload: Any
    emitted_at: float
