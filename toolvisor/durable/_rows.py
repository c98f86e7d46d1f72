"""Row mapping of the stores: each record's column list, written once, beside its mapper.

A mapper takes a row of exactly its column list, in that order, and returns the record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolvisor.durable import _json
from toolvisor.durable._records import (
    JournalRecord,
    ProcessEvent,
    Resolution,
    ResolutionKind,
    RunRecord,
    SavedCheckpoint,
    Wait,
)

RUN_COLUMNS = "run_id, status, created_at, updated_at, agent, parent_run_id"


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """The run of a ``runs`` row of :data:`RUN_COLUMNS`."""
    return RunRecord(run_id=row[0], status=row[1], created_at=row[2], updated_at=row[3],
                     agent=row[4], parent_run_id=row[5])


CHECKPOINT_COLUMNS = "seq, run_id, effect_id, data, saved_at, signature"


def checkpoint_from_row(row: Sequence[Any]) -> SavedCheckpoint:
    """The checkpoint of a ``checkpoints`` row of :data:`CHECKPOINT_COLUMNS`."""
    return SavedCheckpoint(
        seq=row[0], run_id=row[1], effect_id=row[2], data=row[3], saved_at=row[4],
        signature=row[5],
    )


RESOLUTION_COLUMNS = "kind, value, resolved_at"


def resolution_from_row(row: Sequence[Any]) -> Resolution | None:
    """The resolution of a ``keys`` row of :data:`RESOLUTION_COLUMNS`; ``None`` if unresolved."""
    kind: ResolutionKind | None = row[0]  # written by the store, one of ResolutionKind
    value: str | None = row[1]
    resolved_at: float | None = row[2]
    if kind is None or resolved_at is None:
        return None
    return Resolution(
        kind=kind,
        value=None if value is None else _json.loads(value),
        resolved_at=resolved_at,
    )


WAIT_COLUMNS = (
    "k.key, k.run_id, k.call_id, k.purpose, w.deadline_at, w.on_timeout, w.on_cancel, "
    f"w.parked_at, {RESOLUTION_COLUMNS}"
)
"""The columns of a wait in :data:`WAITS_JOINED`; the resolution's are the key's own."""
WAITS_JOINED = "waits w JOIN keys k USING (key_id)"
"""Each park (``w``) beside its key (``k``), which holds the resolution."""


def wait_from_row(row: Sequence[Any]) -> Wait:
    """The wait of a :data:`WAITS_JOINED` row of :data:`WAIT_COLUMNS`."""
    return Wait(
        key=row[0],
        run_id=row[1],
        call_id=row[2],
        purpose=row[3],
        deadline_at=row[4],
        on_timeout=row[5],
        on_cancel=row[6],
        parked_at=row[7],
        resolution=resolution_from_row(row[8:]),
    )


JOURNAL_COLUMNS = "run_id, call_id, step_id, input, output, recorded_at"


def journal_from_row(row: Sequence[Any]) -> JournalRecord:
    """The step of a ``journal`` row of :data:`JOURNAL_COLUMNS`."""
    return JournalRecord(
        run_id=row[0],
        call_id=row[1],
        step_id=row[2],
        input=row[3],
        output=row[4],
        recorded_at=row[5],
    )


PROCESS_EVENT_COLUMNS = "seq, run_id, call_id, ordinal, type, payload, emitted_at"


def process_event_from_row(row: Sequence[Any]) -> ProcessEvent:
    """The event of a ``process_events`` row of :data:`PROCESS_EVENT_COLUMNS`."""
    return ProcessEvent(
        seq=row[0],
        run_id=row[1],
        call_id=row[2],
        ordinal=row[3],
        type=row[4],
        payload=_json.loads(row[5]),
        emitted_at=row[6],
    )
