"""The store's schema, version 4 (signed checkpoints, fenced leases, each run's agent and
parent run), written once for both backends.

Every value column holds JSON text written by the store itself. ``keys`` holds one row per
issued completion key together with its (first and only) resolution, so a resolution that
arrives before the run parks the key is kept until it does; ``waits`` holds the park of a key
(deadline and policies). The few words the backends spell differently come from their
:class:`~toolvisor.durable._sql.Dialect`; :func:`migrations` is what brings a store from each
version to the next (a new store starts from version 0).
"""

from __future__ import annotations

from collections.abc import Callable

from toolvisor.durable._sql import Dialect

SCHEMA_VERSION = 4

_SCHEMA = """
CREATE TABLE meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    created_at {real} NOT NULL,
    updated_at {real} NOT NULL
);
CREATE TABLE checkpoints (
    seq {serial},
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    effect_id INTEGER NOT NULL,
    data TEXT NOT NULL,
    saved_at {real} NOT NULL,
    signature TEXT NOT NULL
);
CREATE TABLE leases (
    run_id TEXT PRIMARY KEY REFERENCES runs(run_id),
    holder TEXT NOT NULL,
    expires_at {real} NOT NULL
);
CREATE INDEX checkpoints_by_run ON checkpoints(run_id, effect_id, seq);
CREATE TABLE keys (
    key_id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    call_id TEXT NOT NULL,
    purpose TEXT NOT NULL,
    name TEXT NOT NULL,
    issued_at {real} NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0,
    kind TEXT,
    value TEXT,
    resolved_at {real},
    UNIQUE (run_id, call_id, purpose, name)
);
CREATE TABLE waits (
    key_id TEXT PRIMARY KEY REFERENCES keys(key_id),
    deadline_at {real},
    on_timeout TEXT NOT NULL,
    on_cancel TEXT NOT NULL,
    parked_at {real} NOT NULL{row_order_column}
);
CREATE INDEX waits_by_deadline ON waits(deadline_at);
CREATE TABLE journal (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    call_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    input TEXT NOT NULL,
    output TEXT NOT NULL,
    recorded_at {real} NOT NULL,
    PRIMARY KEY (run_id, call_id, step_id)
);
CREATE TABLE process_events (
    seq {serial},
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    call_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    emitted_at {real} NOT NULL,
    UNIQUE (run_id, call_id, ordinal)
)
"""


_FENCING = """
ALTER TABLE leases ADD COLUMN token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN fence INTEGER NOT NULL DEFAULT 0
"""
"""Version 3: each lease's fencing token, and each run's last one handed out."""

_RUN_TREE = """
ALTER TABLE runs ADD COLUMN agent TEXT;
ALTER TABLE runs ADD COLUMN parent_run_id TEXT
"""
"""Version 4: the name of the agent each run was started on, and the run whose call started
it (a child session's parent); both empty in runs an earlier version recorded."""


def _statements(template: str, dialect: Dialect) -> list[str]:
    text = template.format(real=dialect.real, serial=dialect.serial,
                           row_order_column=dialect.row_order_column)
    return [statement.strip() for statement in text.split(";") if statement.strip()]


def _migrations(dialect: Dialect) -> dict[int, tuple[int, list[str]]]:
    """From each version a store can have: the version its migration ends at, and the
    statements of that migration (version ``0``: a new store)."""
    return {0: (2, _statements(_SCHEMA, dialect)), 2: (3, _statements(_FENCING, dialect)),
            3: (4, _statements(_RUN_TREE, dialect))}


def migrate(store: str, version: int, dialect: Dialect, execute: Callable[[str], object]) -> int:
    """Bring ``store`` (named in errors) from ``version`` to :data:`SCHEMA_VERSION`, running
    each statement with ``execute`` inside the caller's transaction; the version it is now."""
    steps = _migrations(dialect)
    while version != SCHEMA_VERSION:
        if version not in steps:
            raise RuntimeError(
                f"run store {store!r} has schema version {version}; this toolvisor "
                f"reads version {SCHEMA_VERSION}"
            )
        version, statements = steps[version]
        for statement in statements:
            execute(statement)
    return version
