"""The SQLite schema of :class:`SqliteSessionStore`, version 2 (signed checkpoints, leases).

Every value column holds JSON text written by the store itself. ``keys`` holds one row per
issued completion key together with its (first and only) resolution, so a resolution that
arrives before the run parks the key is kept until it does; ``waits`` holds the park of a key
(deadline and policies).
"""

from __future__ import annotations

SCHEMA_VERSION = 2

SCHEMA = """
CREATE TABLE meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE checkpoints (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    effect_id INTEGER NOT NULL,
    data TEXT NOT NULL,
    saved_at REAL NOT NULL,
    signature TEXT NOT NULL
);
CREATE TABLE leases (
    run_id TEXT PRIMARY KEY REFERENCES runs(run_id),
    holder TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX checkpoints_by_run ON checkpoints(run_id, effect_id, seq);
CREATE TABLE keys (
    key_id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    call_id TEXT NOT NULL,
    purpose TEXT NOT NULL,
    name TEXT NOT NULL,
    issued_at REAL NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0,
    kind TEXT,
    value TEXT,
    resolved_at REAL,
    UNIQUE (run_id, call_id, purpose, name)
);
CREATE TABLE waits (
    key_id TEXT PRIMARY KEY REFERENCES keys(key_id),
    deadline_at REAL,
    on_timeout TEXT NOT NULL,
    on_cancel TEXT NOT NULL,
    parked_at REAL NOT NULL
);
CREATE INDEX waits_by_deadline ON waits(deadline_at);
CREATE TABLE journal (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    call_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    input TEXT NOT NULL,
    output TEXT NOT NULL,
    recorded_at REAL NOT NULL,
    PRIMARY KEY (run_id, call_id, step_id)
);
CREATE TABLE process_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    call_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    emitted_at REAL NOT NULL,
    UNIQUE (run_id, call_id, ordinal)
);
"""
