"""The store's methods on runs and what each run appends: leases, checkpoints, journal, events.

:class:`RunTables` adds the store clock to its connection and no other state; every method is
one transaction of the connection it inherits.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Callable
from typing import Any

from toolvisor.contract import check_seconds
from toolvisor.durable import _json
from toolvisor.durable._connection import SqliteConnection
from toolvisor.durable._records import (
    JournalRecord,
    Lease,
    ProcessEvent,
    RunRecord,
    SavedCheckpoint,
)
from toolvisor.durable._rows import (
    CHECKPOINT_COLUMNS,
    JOURNAL_COLUMNS,
    PROCESS_EVENT_COLUMNS,
    RUN_COLUMNS,
    checkpoint_from_row,
    journal_from_row,
    process_event_from_row,
    run_from_row,
)
from toolvisor.durable._signing import (
    SignatureError,
    sign_keyed,
    sign_text,
    signing_key_id,
    verify_keyed,
    verify_text,
)
from toolvisor.durable._store import UnknownRunError


def require_id(value: object, what: str) -> str:
    """``value`` if it is a non-empty str; a ``ValueError`` naming ``what`` if not."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty str, got {value!r}")
    return value


def _signed_checkpoint(run_id: str, effect_id: int, data: str) -> str:
    """What a checkpoint's signature covers: a checkpoint cannot move to another run or step."""
    return f"checkpoint\n{run_id}\n{effect_id}\n{data}"


class RunTables(SqliteConnection):
    """Runs, checkpoints, the journal and process events, stamped by the store clock."""

    def __init__(
        self, path: str | os.PathLike[str], busy_timeout: float, clock: Callable[[], float],
        create: bool,
    ) -> None:
        super().__init__(path, busy_timeout, create)
        self._clock = clock

    def now(self) -> float:
        """The store's clock."""
        return self._clock()

    # -- runs ----------------------------------------------------------------------------------

    @staticmethod
    def _require_run(conn: sqlite3.Connection, run_id: str) -> None:
        if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
            raise UnknownRunError(
                f"the session store has no run {run_id!r}; create it with create_run first"
            )

    def create_run(self, run_id: str | None = None, *, status: str = "running") -> RunRecord:
        """Record a new run (a fresh uuid4 hex id unless given); a duplicate id is refused."""
        run_id = uuid.uuid4().hex if run_id is None else require_id(run_id, "run_id")
        require_id(status, "status")
        now = self.now()
        with self._write() as conn:
            try:
                conn.execute(
                    f"INSERT INTO runs ({RUN_COLUMNS}) VALUES (?,?,?,?)",
                    (run_id, status, now, now),
                )
            except sqlite3.IntegrityError:
                raise ValueError(f"run {run_id!r} already exists; use get_run to read it") from None
        return RunRecord(run_id=run_id, status=status, created_at=now, updated_at=now)

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or ``None`` if the store has none with that id."""
        with self._read() as conn:
            row = self._select_run(conn, run_id)
        return None if row is None else run_from_row(row)

    def set_run_status(self, run_id: str, status: str) -> RunRecord:
        """Change the run's status (any non-empty str the host chooses)."""
        require_id(status, "status")
        with self._write() as conn:
            self._require_run(conn, run_id)
            conn.execute(
                "UPDATE runs SET status = ?, updated_at = ? WHERE run_id = ?",
                (status, self.now(), run_id),
            )
            row = self._select_run(conn, run_id)
        assert row is not None
        return run_from_row(row)

    @staticmethod
    def _select_run(conn: sqlite3.Connection, run_id: str) -> tuple[Any, ...] | None:
        """The ``runs`` row of ``run_id``, or ``None``."""
        row: tuple[Any, ...] | None = conn.execute(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        return row

    def runs(self, *, status: str | None = None) -> list[RunRecord]:
        """Every run (with that status, if given), oldest first."""
        query = f"SELECT {RUN_COLUMNS} FROM runs"
        params: tuple[str, ...] = ()
        if status is not None:
            query += " WHERE status = ?"
            params = (status,)
        with self._read() as conn:
            rows = conn.execute(query + " ORDER BY created_at, run_id", params).fetchall()
        return [run_from_row(row) for row in rows]

    # -- leases: one host per run ------------------------------------------------------------

    def acquire_lease(self, run_id: str, holder: str, ttl: float, *,
                      replacing: str | None = None) -> Lease | None:
        """Take the run's lease for ``ttl`` seconds: ``None`` when taken (or renewed), else the
        lease that stands (another holder's, not yet expired). ``replacing`` names a holder
        whose lease is taken over whatever its expiry (a host known to be dead)."""
        check_seconds("a lease ttl", ttl, positive=True)
        now = self.now()
        with self._write() as conn:
            self._require_run(conn, run_id)
            row = conn.execute("SELECT holder, expires_at FROM leases WHERE run_id = ?",
                               (run_id,)).fetchone()
            if row is not None and row[0] not in (holder, replacing) and row[1] > now:
                return Lease(run_id, row[0], row[1])
            conn.execute("INSERT INTO leases (run_id, holder, expires_at) VALUES (?,?,?) "
                         "ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, "
                         "expires_at = excluded.expires_at", (run_id, holder, now + ttl))
        return None

    def renew_leases(self, holder: str, run_ids: list[str], ttl: float) -> list[str]:
        """Extend ``holder``'s leases on ``run_ids``; the ids whose lease it no longer holds."""
        expires_at = self.now() + ttl
        lost = []
        with self._write() as conn:
            for run_id in run_ids:
                cursor = conn.execute("UPDATE leases SET expires_at = ? WHERE run_id = ? AND "
                                      "holder = ?", (expires_at, run_id, holder))
                if cursor.rowcount != 1:
                    lost.append(run_id)
        return lost

    def release_lease(self, run_id: str, holder: str) -> None:
        """Give the run's lease up, if ``holder`` holds it (another host may take it at once)."""
        with self._write() as conn:
            conn.execute("DELETE FROM leases WHERE run_id = ? AND holder = ?", (run_id, holder))

    def leases(self) -> list[Lease]:
        """Every lease in the store, by run id, expired ones too: a host that died keeps its
        leases until they expire or another host takes them over."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT run_id, holder, expires_at FROM leases ORDER BY run_id").fetchall()
        return [Lease(*row) for row in rows]

    # -- checkpoints -----------------------------------------------------------------------

    def save_checkpoint(
        self, run_id: str, effect_id: int, data: str, *, status: str | None = None
    ) -> SavedCheckpoint:
        """Append the checkpoint ``data`` (JSON text, e.g. ``model_dump_json()``) at ``effect_id``.

        Earlier checkpoints are kept. The run's ``updated_at`` (and ``status``, if given)
        change in the same transaction.
        """
        if isinstance(effect_id, bool) or not isinstance(effect_id, int) or effect_id < 0:
            raise ValueError(f"effect_id must be a non-negative int, got {effect_id!r}")
        if not isinstance(data, str):
            raise TypeError(
                f"checkpoint data must be JSON text (str), got {type(data).__name__}; "
                "pass checkpoint.model_dump_json()"
            )
        try:
            _json.loads(data)
        except ValueError as exc:
            raise ValueError(f"checkpoint data is not valid JSON: {exc}") from exc
        if status is not None:
            require_id(status, "status")
        now = self.now()
        signature = sign_text(self._secret, _signed_checkpoint(run_id, effect_id, data))
        with self._write() as conn:
            self._require_run(conn, run_id)
            cursor = conn.execute(
                "INSERT INTO checkpoints (run_id, effect_id, data, saved_at, signature) "
                "VALUES (?,?,?,?,?)",
                (run_id, effect_id, data, now, signature),
            )
            conn.execute(
                "UPDATE runs SET updated_at = ?, status = coalesce(?, status) WHERE run_id = ?",
                (now, status, run_id),
            )
        seq = cursor.lastrowid
        assert seq is not None
        return SavedCheckpoint(seq=seq, run_id=run_id, effect_id=effect_id, data=data,
                               saved_at=now, signature=signature)

    def latest_checkpoint(self, run_id: str) -> SavedCheckpoint | None:
        """The run's most recently saved checkpoint, or ``None``."""
        return self._one_checkpoint("WHERE run_id = ?", (run_id,))

    def checkpoint_at(self, run_id: str, effect_id: int) -> SavedCheckpoint | None:
        """The run's most recent checkpoint saved at ``effect_id``, or ``None``."""
        return self._one_checkpoint("WHERE run_id = ? AND effect_id = ?", (run_id, effect_id))

    def _one_checkpoint(self, where: str, params: tuple[Any, ...]) -> SavedCheckpoint | None:
        with self._read() as conn:
            row = conn.execute(
                f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints {where} ORDER BY seq DESC LIMIT 1",
                params,
            ).fetchone()
        return None if row is None else self._verified(checkpoint_from_row(row))

    def checkpoints(self, run_id: str) -> list[SavedCheckpoint]:
        """Every checkpoint of the run, in the order they were saved."""
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE run_id = ? ORDER BY seq",
                (run_id,),
            ).fetchall()
        return [self._verified(checkpoint_from_row(row)) for row in rows]

    def _verified(self, saved: SavedCheckpoint) -> SavedCheckpoint:
        """``saved`` if this store signed it as it is; a ``SignatureError`` otherwise."""
        if not verify_text((self._secret,), _signed_checkpoint(
                saved.run_id, saved.effect_id, saved.data), saved.signature):
            raise SignatureError(
                f"checkpoint {saved.seq} of run {saved.run_id!r} (effect {saved.effect_id}) "
                "was altered, or not written by this store: it is not restored")
        return saved

    # -- signatures --------------------------------------------------------------------------

    def sign(self, text: str) -> str:
        """``text``'s signature under this store's secret (a store is a ``Signer``)."""
        return sign_keyed(self._secret, text)

    def verify(self, text: str, signature: str) -> bool:
        """Whether this store signed ``text`` with ``signature``."""
        return verify_keyed((self._secret,), text, signature)

    def holds_key(self, key_id: str) -> bool:
        """Whether ``key_id`` names this store's secret (every store has its own)."""
        return key_id == signing_key_id(self._secret)

    # -- journal -----------------------------------------------------------------------------

    def journal_record(self, run_id: str, call_id: str, step_id: str) -> JournalRecord | None:
        """The recorded step, or ``None`` if the call never completed it."""
        with self._read() as conn:
            row = self._select_step(conn, run_id, call_id, step_id)
        return None if row is None else journal_from_row(row)

    def journaled(self, run_id: str, call_id: str) -> bool:
        """Whether the call recorded any step: its side effects are journaled, so running it
        again after a crash replays them instead of repeating them."""
        with self._read() as conn:
            row = conn.execute("SELECT 1 FROM journal WHERE run_id = ? AND call_id = ? LIMIT 1",
                               (run_id, call_id)).fetchone()
        return row is not None

    def record_step(
        self, run_id: str, call_id: str, step_id: str, input: str, output: str
    ) -> JournalRecord:
        """Record a step's canonical JSON ``input`` and ``output``; the first record wins.

        Returns the record now in the journal, which is an earlier one if another execution
        of the call recorded the step first.
        """
        with self._write() as conn:
            self._require_run(conn, run_id)
            conn.execute(
                f"INSERT OR IGNORE INTO journal ({JOURNAL_COLUMNS}) VALUES (?,?,?,?,?,?)",
                (run_id, call_id, step_id, input, output, self.now()),
            )
            row = self._select_step(conn, run_id, call_id, step_id)
        assert row is not None
        return journal_from_row(row)

    @staticmethod
    def _select_step(
        conn: sqlite3.Connection, run_id: str, call_id: str, step_id: str
    ) -> tuple[Any, ...] | None:
        """The ``journal`` row of the step, or ``None``."""
        row: tuple[Any, ...] | None = conn.execute(
            f"SELECT {JOURNAL_COLUMNS} FROM journal "
            "WHERE run_id = ? AND call_id = ? AND step_id = ?",
            (run_id, call_id, step_id),
        ).fetchone()
        return row

    # -- process events ------------------------------------------------------------------------

    def append_process_event(
        self, run_id: str, call_id: str, ordinal: int, type: str, payload: Any
    ) -> ProcessEvent:
        """Record the call's ``ordinal``-th event; if already recorded, return the record."""
        require_id(type, "process event type")
        text = _json.dumps(payload, "the process event payload")
        with self._write() as conn:
            self._require_run(conn, run_id)
            conn.execute(
                "INSERT OR IGNORE INTO process_events (run_id, call_id, ordinal, type, payload, "
                "emitted_at) VALUES (?,?,?,?,?,?)",
                (run_id, call_id, ordinal, type, text, self.now()),
            )
            row = conn.execute(
                f"SELECT {PROCESS_EVENT_COLUMNS} FROM process_events "
                "WHERE run_id = ? AND call_id = ? AND ordinal = ?",
                (run_id, call_id, ordinal),
            ).fetchone()
        return process_event_from_row(row)

    def process_events(
        self, run_id: str | None = None, *, after_seq: int = 0
    ) -> list[ProcessEvent]:
        """Events (of one run, if given) with ``seq`` above ``after_seq``, in emission order."""
        query = f"SELECT {PROCESS_EVENT_COLUMNS} FROM process_events WHERE seq > ?"
        params: tuple[Any, ...] = (after_seq,)
        if run_id is not None:
            query += " AND run_id = ?"
            params = (after_seq, run_id)
        with self._read() as conn:
            rows = conn.execute(query + " ORDER BY seq", params).fetchall()
        return [process_event_from_row(row) for row in rows]
