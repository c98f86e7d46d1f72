"""Runs and what each run appends: checkpoints (signed), the journal, process events.

:class:`RunTables` holds the logic of those tables over any :class:`SqlDatabase` (portable SQL);
its state is the database and the store clock it is given, and every method is one
transaction of that database. Every write to a run's rows first locks the run's row
(``lock_run``), where its fence is checked: two writes of one run never interleave, and a
takeover of its lease (which locks that row too) cannot slip between a fenced write's check
and its commit. Creating a run needs no lock: its primary key refuses a second one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from toolvisor.durable import _json
from toolvisor.durable._records import (
    JournalRecord,
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
from toolvisor.durable._signing import SignatureError, sign_text, verify_text
from toolvisor.durable._sql import (
    SqlDatabase,
    SqlTransaction,
    require_fence,
    require_id,
    require_run,
)


def _signed_checkpoint(run_id: str, effect_id: int, data: str) -> str:
    """What a checkpoint's signature covers: a checkpoint cannot move to another run or step."""
    return f"checkpoint\n{run_id}\n{effect_id}\n{data}"


class RunTables:
    """Runs, checkpoints, the journal and process events, stamped by the store clock.

    Each public method is the :class:`RunStore` method of the same name, whose docstring
    is the contract it keeps.
    """

    def __init__(self, db: SqlDatabase, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock

    def create_run(self, run_id: str | None = None, *, status: str = "running",
                   agent: str | None = None, parent_run_id: str | None = None) -> RunRecord:
        run_id = uuid.uuid4().hex if run_id is None else require_id(run_id, "run_id")
        require_id(status, "status")
        if agent is not None:
            require_id(agent, "agent")
        if parent_run_id is not None:
            require_id(parent_run_id, "parent_run_id")
        now = self._clock()
        with self._db.write() as tx:
            added = tx.execute(
                f"INSERT INTO runs ({RUN_COLUMNS}) VALUES (?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                (run_id, status, now, now, agent, parent_run_id),
            ).rowcount
        if not added:
            raise ValueError(f"run {run_id!r} already exists; use get_run to read it")
        return RunRecord(run_id=run_id, status=status, created_at=now, updated_at=now,
                         agent=agent, parent_run_id=parent_run_id)

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._db.read() as tx:
            row = self._select_run(tx, run_id)
        return None if row is None else run_from_row(row)

    def set_run_status(self, run_id: str, status: str) -> RunRecord:
        require_id(status, "status")
        with self._db.write() as tx:
            require_run(tx, run_id, self._db.dialect)
            tx.execute(
                "UPDATE runs SET status = ?, updated_at = ? WHERE run_id = ?",
                (status, self._clock(), run_id),
            )
            row = self._select_run(tx, run_id)
        assert row is not None
        return run_from_row(row)

    @staticmethod
    def _select_run(tx: SqlTransaction, run_id: str) -> tuple[Any, ...] | None:
        """The ``runs`` row of ``run_id``, or ``None``."""
        row: tuple[Any, ...] | None = tx.execute(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        return row

    def runs(self, *, status: str | None = None) -> list[RunRecord]:
        query = f"SELECT {RUN_COLUMNS} FROM runs"
        params: tuple[str, ...] = ()
        if status is not None:
            query += " WHERE status = ?"
            params = (status,)
        with self._db.read() as tx:
            rows = tx.execute(query + " ORDER BY created_at, run_id", params).fetchall()
        return [run_from_row(row) for row in rows]

    # -- checkpoints -----------------------------------------------------------------------

    def save_checkpoint(
        self, run_id: str, effect_id: int, data: str, *, status: str | None = None,
        fence: int | None = None,
    ) -> SavedCheckpoint:
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
        now = self._clock()
        signature = sign_text(self._db.secret, _signed_checkpoint(run_id, effect_id, data))
        with self._db.write() as tx:
            require_run(tx, run_id, self._db.dialect)
            require_fence(tx, run_id, fence)
            seq = tx.insert(
                "INSERT INTO checkpoints (run_id, effect_id, data, saved_at, signature) "
                "VALUES (?,?,?,?,?)",
                (run_id, effect_id, data, now, signature), "seq",
            )
            tx.execute(
                "UPDATE runs SET updated_at = ?, status = coalesce(?, status) WHERE run_id = ?",
                (now, status, run_id),
            )
        return SavedCheckpoint(seq=seq, run_id=run_id, effect_id=effect_id, data=data,
                               saved_at=now, signature=signature)

    def latest_checkpoint(self, run_id: str) -> SavedCheckpoint | None:
        return self._one_checkpoint("WHERE run_id = ?", (run_id,))

    def checkpoint_at(self, run_id: str, effect_id: int) -> SavedCheckpoint | None:
        return self._one_checkpoint("WHERE run_id = ? AND effect_id = ?", (run_id, effect_id))

    def _one_checkpoint(self, where: str, params: tuple[Any, ...]) -> SavedCheckpoint | None:
        """The newest checkpoint ``where`` says. Its ``seq`` is found in the index first: an
        ``ORDER BY seq ... LIMIT 1`` made SQLite sort every checkpoint of the run, whole text
        included (200 checkpoints of 186 KiB: 19 ms instead of 0.04 ms)."""
        with self._db.read() as tx:
            row = tx.execute(
                f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints "
                f"WHERE seq = (SELECT max(seq) FROM checkpoints {where})",
                params,
            ).fetchone()
        return None if row is None else self._verified(checkpoint_from_row(row))

    def checkpoints(self, run_id: str) -> list[SavedCheckpoint]:
        with self._db.read() as tx:
            rows = tx.execute(
                f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE run_id = ? ORDER BY seq",
                (run_id,),
            ).fetchall()
        return [self._verified(checkpoint_from_row(row)) for row in rows]

    def _verified(self, saved: SavedCheckpoint) -> SavedCheckpoint:
        """``saved`` if this store signed it as it is; a ``SignatureError`` otherwise."""
        if not verify_text((self._db.secret,), _signed_checkpoint(
                saved.run_id, saved.effect_id, saved.data), saved.signature):
            raise SignatureError(
                f"checkpoint {saved.seq} of run {saved.run_id!r} (effect {saved.effect_id}) "
                "was altered, or not written by this store: it is not restored")
        return saved

    # -- journal -----------------------------------------------------------------------------

    def journal_record(self, run_id: str, call_id: str, step_id: str) -> JournalRecord | None:
        with self._db.read() as tx:
            row = self._select_step(tx, run_id, call_id, step_id)
        return None if row is None else journal_from_row(row)

    def journaled(self, run_id: str, call_id: str) -> bool:
        with self._db.read() as tx:
            row = tx.execute("SELECT 1 FROM journal WHERE run_id = ? AND call_id = ? LIMIT 1",
                               (run_id, call_id)).fetchone()
        return row is not None

    def record_step(
        self, run_id: str, call_id: str, step_id: str, input: str, output: str, *,
        fence: int | None = None,
    ) -> JournalRecord:
        with self._db.write() as tx:
            require_run(tx, run_id, self._db.dialect)
            require_fence(tx, run_id, fence)
            tx.execute(
                f"INSERT INTO journal ({JOURNAL_COLUMNS}) VALUES (?,?,?,?,?,?) "
                "ON CONFLICT DO NOTHING",
                (run_id, call_id, step_id, input, output, self._clock()),
            )
            row = self._select_step(tx, run_id, call_id, step_id)
        assert row is not None
        return journal_from_row(row)

    @staticmethod
    def _select_step(
        tx: SqlTransaction, run_id: str, call_id: str, step_id: str
    ) -> tuple[Any, ...] | None:
        """The ``journal`` row of the step, or ``None``."""
        row: tuple[Any, ...] | None = tx.execute(
            f"SELECT {JOURNAL_COLUMNS} FROM journal "
            "WHERE run_id = ? AND call_id = ? AND step_id = ?",
            (run_id, call_id, step_id),
        ).fetchone()
        return row

    # -- process events ------------------------------------------------------------------------

    def append_process_event(
        self, run_id: str, call_id: str, ordinal: int, type: str, payload: Any, *,
        fence: int | None = None,
    ) -> ProcessEvent:
        require_id(type, "process event type")
        text = _json.dumps(payload, "the process event payload")
        with self._db.write() as tx:
            require_run(tx, run_id, self._db.dialect)
            require_fence(tx, run_id, fence)
            tx.execute(
                "INSERT INTO process_events (run_id, call_id, ordinal, type, payload, "
                "emitted_at) VALUES (?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                (run_id, call_id, ordinal, type, text, self._clock()),
            )
            row = tx.execute(
                f"SELECT {PROCESS_EVENT_COLUMNS} FROM process_events "
                "WHERE run_id = ? AND call_id = ? AND ordinal = ?",
                (run_id, call_id, ordinal),
            ).fetchone()
        return process_event_from_row(row)

    def process_events(
        self, run_id: str | None = None, *, after_seq: int = 0
    ) -> list[ProcessEvent]:
        query = f"SELECT {PROCESS_EVENT_COLUMNS} FROM process_events WHERE seq > ?"
        params: tuple[Any, ...] = (after_seq,)
        if run_id is not None:
            query += " AND run_id = ?"
            params = (after_seq, run_id)
        with self._db.read() as tx:
            rows = tx.execute(query + " ORDER BY seq", params).fetchall()
        return [process_event_from_row(row) for row in rows]
