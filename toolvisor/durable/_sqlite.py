"""``SqliteSessionStore``: the embedded default store, one SQLite file in WAL mode.

Ownership: a store object owns ONE ``sqlite3`` connection, opened in ``__init__`` and closed
by :meth:`close`. Every method takes ``_lock`` for the whole of its transaction, so a store
object may be used from any thread (calls serialize within the object). Other processes, or
other store objects in this process, open their own connections on the same file; SQLite's
file locks serialize them: every write is ``BEGIN IMMEDIATE`` (the write lock is taken up
front, so a read-then-write cannot be overtaken) with a busy timeout, and every read is one
snapshot transaction. ``synchronous=FULL``: a commit that returned survives a power cut.
"""

from __future__ import annotations

import math
import os
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from toolvisor._logging import get_event_log
from toolvisor.contract import OnCancel, OnTimeout
from toolvisor.durable import _json
from toolvisor.durable._keys import KeyClaims, sign_key, verify_key
from toolvisor.durable._notify import notifier_for
from toolvisor.durable._records import (
    Checkpoint,
    JournalRecord,
    KeyPurpose,
    ProcessEvent,
    Resolution,
    ResolutionKind,
    ResolveOutcome,
    RunRecord,
    Wait,
)
from toolvisor.durable._schema import SCHEMA, SCHEMA_VERSION
from toolvisor.durable._store import UNSET, UnknownRunError

POLL_INTERVAL: Final = 0.05
"""How often (seconds) :meth:`SqliteSessionStore.wait_for` re-reads the file by default, to see
resolutions made by other processes; same-process resolutions wake waiters at once."""

_SECRET_NAME = "hmac_secret"
_ON_TIMEOUT = ("error_as_result", "fail_turn")
_ON_CANCEL = ("cancel_external_work", "ignore")
_WAIT_QUERY = (
    "SELECT k.key_id, k.key, k.run_id, k.call_id, k.purpose, w.deadline_at, w.on_timeout, "
    "w.on_cancel, w.parked_at, k.kind, k.value, k.resolved_at "
    "FROM waits w JOIN keys k USING (key_id)"
)


def _require_id(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty str, got {value!r}")
    return value


def _resolution(
    kind: str | None, value: str | None, resolved_at: float | None
) -> Resolution | None:
    if kind is None or resolved_at is None:
        return None
    resolved_kind: ResolutionKind = kind  # type: ignore[assignment]  # written by this module
    return Resolution(
        kind=resolved_kind,
        value=None if value is None else _json.loads(value),
        resolved_at=resolved_at,
    )


def _waits(conn: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> dict[str, Wait]:
    """The waits selected by ``where``, by key id, in park order."""
    rows = conn.execute(f"{_WAIT_QUERY} {where} ORDER BY w.parked_at, w.rowid", params)
    return {
        row[0]: Wait(
            key=row[1],
            run_id=row[2],
            call_id=row[3],
            purpose=row[4],
            deadline_at=row[5],
            on_timeout=row[6],
            on_cancel=row[7],
            parked_at=row[8],
            resolution=_resolution(row[9], row[10], row[11]),
        )
        for row in rows.fetchall()
    }


def _run(row: sqlite3.Row) -> RunRecord:
    return RunRecord(run_id=row[0], status=row[1], created_at=row[2], updated_at=row[3])


def _checkpoint(row: sqlite3.Row) -> Checkpoint:
    return Checkpoint(seq=row[0], run_id=row[1], effect_id=row[2], data=row[3], saved_at=row[4])


def _journal(row: sqlite3.Row) -> JournalRecord:
    return JournalRecord(
        run_id=row[0],
        call_id=row[1],
        step_id=row[2],
        input=row[3],
        output=row[4],
        recorded_at=row[5],
    )


def _process_event(row: sqlite3.Row) -> ProcessEvent:
    return ProcessEvent(
        seq=row[0],
        run_id=row[1],
        call_id=row[2],
        ordinal=row[3],
        type=row[4],
        payload=_json.loads(row[5]),
        emitted_at=row[6],
    )


class SqliteSessionStore:
    """A :class:`~toolvisor.durable.SessionStore` in one SQLite file (created if missing).

    The file holds the HMAC secret that signs completion keys (created with the file, mode
    0600): whoever can read the file can forge keys, so keep it private. ``clock`` stamps
    every record and computes deadlines; it defaults to wall-clock time because deadlines must
    mean the same thing in every process and after a restart. ``busy_timeout`` bounds how long
    a write waits for another process's write lock. Use it as a context manager, or call
    :meth:`close`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 5.0,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive, got {poll_interval!r}")
        resolved = Path(path).resolve()
        if resolved.is_dir():
            raise ValueError(f"session store path {str(resolved)!r} is a directory; give a file")
        self.path = str(resolved)
        self._clock = clock
        self._poll_interval = poll_interval
        self._notifier = notifier_for(self.path)
        self._lock = threading.Lock()  # owns _connection: held for every use of it
        self._log = get_event_log("session_store", path=self.path)
        self._create_private(resolved)
        self._connection: sqlite3.Connection | None = sqlite3.connect(
            self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            self._secret = self._open(busy_timeout)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _create_private(path: Path) -> None:
        """Create the file readable by its owner only, before SQLite opens it."""
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return
        os.close(fd)

    def _open(self, busy_timeout: float) -> bytes:
        connection = self._conn()
        connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":
            raise RuntimeError(
                f"session store {self.path!r} could not switch to WAL mode (got {mode!r}); "
                "put it on a local file system"
            )
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute("PRAGMA foreign_keys = ON")
        with self._write() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                raise RuntimeError(
                    f"session store {self.path!r} has schema version {version}; this toolvisor "
                    f"reads version {SCHEMA_VERSION}"
                )
            conn.execute(
                "INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)",
                (_SECRET_NAME, secrets.token_hex(32)),
            )
            secret_hex = conn.execute(
                "SELECT value FROM meta WHERE name = ?", (_SECRET_NAME,)
            ).fetchone()[0]
        return bytes.fromhex(secret_hex)

    # -- connection and transactions ---------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            raise RuntimeError(f"session store {self.path!r} is closed")
        return self._connection

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it commits, or (on any exception) none of it."""
        with self._lock:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read snapshot."""
        with self._lock:
            conn = self._conn()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    def close(self) -> None:
        """Close the connection (and with it the ``-wal``/``-shm`` files); idempotent."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

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
        state = "closed" if self._connection is None else "open"
        return f"SqliteSessionStore({self.path!r}, {state})"

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
        run_id = uuid.uuid4().hex if run_id is None else _require_id(run_id, "run_id")
        _require_id(status, "status")
        now = self.now()
        with self._write() as conn:
            try:
                conn.execute(
                    "INSERT INTO runs (run_id, status, created_at, updated_at) VALUES (?,?,?,?)",
                    (run_id, status, now, now),
                )
            except sqlite3.IntegrityError:
                raise ValueError(f"run {run_id!r} already exists; use get_run to read it") from None
        return RunRecord(run_id=run_id, status=status, created_at=now, updated_at=now)

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or ``None`` if the store has none with that id."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT run_id, status, created_at, updated_at FROM runs WHERE run_id = ?",
                (run_id,),
            ).fetchone()
        return None if row is None else _run(row)

    def set_run_status(self, run_id: str, status: str) -> RunRecord:
        """Change the run's status (any non-empty str the host chooses)."""
        _require_id(status, "status")
        with self._write() as conn:
            self._require_run(conn, run_id)
            conn.execute(
                "UPDATE runs SET status = ?, updated_at = ? WHERE run_id = ?",
                (status, self.now(), run_id),
            )
            row = conn.execute(
                "SELECT run_id, status, created_at, updated_at FROM runs WHERE run_id = ?",
                (run_id,),
            ).fetchone()
        return _run(row)

    def runs(self, *, status: str | None = None) -> list[RunRecord]:
        """Every run (with that status, if given), oldest first."""
        query = "SELECT run_id, status, created_at, updated_at FROM runs"
        params: tuple[str, ...] = ()
        if status is not None:
            query += " WHERE status = ?"
            params = (status,)
        with self._read() as conn:
            rows = conn.execute(query + " ORDER BY created_at, run_id", params).fetchall()
        return [_run(row) for row in rows]

    # -- checkpoints -----------------------------------------------------------------------

    def save_checkpoint(
        self, run_id: str, effect_id: int, data: str, *, status: str | None = None
    ) -> Checkpoint:
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
            _require_id(status, "status")
        now = self.now()
        with self._write() as conn:
            self._require_run(conn, run_id)
            cursor = conn.execute(
                "INSERT INTO checkpoints (run_id, effect_id, data, saved_at) VALUES (?,?,?,?)",
                (run_id, effect_id, data, now),
            )
            conn.execute(
                "UPDATE runs SET updated_at = ?, status = coalesce(?, status) WHERE run_id = ?",
                (now, status, run_id),
            )
        seq = cursor.lastrowid
        assert seq is not None
        return Checkpoint(seq=seq, run_id=run_id, effect_id=effect_id, data=data, saved_at=now)

    def latest_checkpoint(self, run_id: str) -> Checkpoint | None:
        """The run's most recently saved checkpoint, or ``None``."""
        return self._one_checkpoint("WHERE run_id = ?", (run_id,))

    def checkpoint_at(self, run_id: str, effect_id: int) -> Checkpoint | None:
        """The run's most recent checkpoint saved at ``effect_id``, or ``None``."""
        return self._one_checkpoint("WHERE run_id = ? AND effect_id = ?", (run_id, effect_id))

    def _one_checkpoint(self, where: str, params: tuple[Any, ...]) -> Checkpoint | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT seq, run_id, effect_id, data, saved_at FROM checkpoints "
                f"{where} ORDER BY seq DESC LIMIT 1",
                params,
            ).fetchone()
        return None if row is None else _checkpoint(row)

    def checkpoints(self, run_id: str) -> list[Checkpoint]:
        """Every checkpoint of the run, in the order they were saved."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT seq, run_id, effect_id, data, saved_at FROM checkpoints "
                "WHERE run_id = ? ORDER BY seq",
                (run_id,),
            ).fetchall()
        return [_checkpoint(row) for row in rows]

    # -- completion keys ---------------------------------------------------------------------

    def issue_key(
        self, run_id: str, call_id: str, *, purpose: KeyPurpose = "call", name: str = ""
    ) -> str:
        """The signed key of ``(run_id, call_id, purpose, name)``; the same key every time.

        The key is recorded when first issued, so it can be resolved (even before the run
        parks it) from any process that opens this store.
        """
        _require_id(run_id, "run_id")
        _require_id(call_id, "call_id")
        if purpose not in ("call", "event"):
            raise ValueError(f"purpose must be 'call' or 'event', got {purpose!r}")
        if not isinstance(name, str):
            raise TypeError(f"key name must be a str, got {type(name).__name__}")
        with self._write() as conn:
            row = conn.execute(
                "SELECT key FROM keys WHERE run_id = ? AND call_id = ? AND purpose = ? "
                "AND name = ?",
                (run_id, call_id, purpose, name),
            ).fetchone()
            if row is not None:
                existing: str = row[0]
                return existing
            self._require_run(conn, run_id)
            key_id = secrets.token_urlsafe(16)
            key = sign_key(self._secret, KeyClaims(key_id=key_id, run_id=run_id, call_id=call_id))
            conn.execute(
                "INSERT INTO keys (key_id, key, run_id, call_id, purpose, name, issued_at) "
                "VALUES (?,?,?,?,?,?,?)",
                (key_id, key, run_id, call_id, purpose, name, self.now()),
            )
        self._log.debug("completion_key_issued", run_id=run_id, call_id=call_id, purpose=purpose)
        return key

    def _claims(self, key: str) -> KeyClaims | None:
        if not isinstance(key, str):
            raise TypeError(f"a completion key is a str, got {type(key).__name__}")
        return verify_key(self._secret, key)

    def _known_claims(self, key: str, operation: str) -> KeyClaims:
        """The claims of ``key``, which must be a key this store issued (a host-side bug if not)."""
        claims = self._claims(key)
        if claims is None:
            raise ValueError(
                f"{operation}: not a completion key of this session store (tampered, truncated "
                "or signed by another store)"
            )
        return claims

    def revoke(self, key: str) -> bool:
        """Refuse every later resolution of an unresolved ``key``; ``True`` if it was revoked.

        For a key whose call ended without parking it (the handler took a key, then returned
        something other than ``Pending``): a late resolver then hears ``unknown_or_revoked``.
        """
        claims = self._known_claims(key, "revoke")
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE keys SET revoked = 1 WHERE key_id = ? AND kind IS NULL AND revoked = 0",
                (claims.key_id,),
            )
        return cursor.rowcount == 1

    def resolve(self, key: str, *, ok: Any = UNSET, error: Any = UNSET) -> ResolveOutcome:
        """Deliver the result of ``key``'s wait: ``ok=<JSON>`` or ``error=<JSON>``, not both.

        The first resolution of a key wins (atomically, across processes): ``"accepted"``.
        A later one changes nothing: ``"already_resolved"``. A key that is tampered, truncated,
        signed by another store, unknown or revoked changes nothing: ``"unknown_or_revoked"``.
        A resolution that arrives before the run parks the key is kept for it.
        """
        if (ok is UNSET) == (error is UNSET):
            raise TypeError("resolve needs exactly one of ok=<JSON value> or error=<JSON value>")
        kind: ResolutionKind = "ok" if error is UNSET else "error"
        value = _json.dumps(ok if error is UNSET else error, f"the resolution's {kind} value")
        claims = self._claims(key)
        if claims is None:
            self._log.warning("completion_key_refused", reason="bad_signature")
            return "unknown_or_revoked"
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE keys SET kind = ?, value = ?, resolved_at = ? WHERE key_id = ? "
                "AND run_id = ? AND call_id = ? AND revoked = 0 AND kind IS NULL",
                (kind, value, self.now(), claims.key_id, claims.run_id, claims.call_id),
            )
            if cursor.rowcount == 1:
                outcome: ResolveOutcome = "accepted"
            else:
                row = conn.execute(
                    "SELECT revoked FROM keys WHERE key_id = ?", (claims.key_id,)
                ).fetchone()
                outcome = "unknown_or_revoked" if row is None or row[0] else "already_resolved"
        if outcome == "accepted":
            self._notifier.notify()
        self._log.info(
            "completion_key_resolved",
            outcome=outcome,
            kind=kind,
            run_id=claims.run_id,
            call_id=claims.call_id,
        )
        return outcome

    def resolution(self, key: str) -> Resolution | None:
        """How ``key``'s wait ended, or ``None`` while it is unresolved."""
        claims = self._known_claims(key, "resolution")
        with self._read() as conn:
            row = conn.execute(
                "SELECT kind, value, resolved_at FROM keys WHERE key_id = ?", (claims.key_id,)
            ).fetchone()
        return None if row is None else _resolution(row[0], row[1], row[2])

    # -- waits -------------------------------------------------------------------------------

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
        claims = self._known_claims(key, "park")
        if deadline_at is not None and (
            isinstance(deadline_at, bool)
            or not isinstance(deadline_at, int | float)
            or not math.isfinite(deadline_at)
        ):
            raise ValueError(f"deadline_at must be a finite number or None, got {deadline_at!r}")
        if on_timeout not in _ON_TIMEOUT:
            raise ValueError(f"on_timeout must be one of {_ON_TIMEOUT}, got {on_timeout!r}")
        if on_cancel not in _ON_CANCEL:
            raise ValueError(f"on_cancel must be one of {_ON_CANCEL}, got {on_cancel!r}")
        with self._write() as conn:
            row = conn.execute(
                "SELECT revoked FROM keys WHERE key_id = ?", (claims.key_id,)
            ).fetchone()
            if row is None or row[0]:
                raise ValueError("park: the key is unknown to this store or was revoked")
            conn.execute(
                "INSERT OR IGNORE INTO waits (key_id, deadline_at, on_timeout, on_cancel, "
                "parked_at) VALUES (?,?,?,?,?)",
                (claims.key_id, deadline_at, on_timeout, on_cancel, self.now()),
            )
            wait = _waits(conn, "WHERE key_id = ?", (claims.key_id,))[claims.key_id]
        self._log.debug(
            "wait_parked",
            run_id=wait.run_id,
            call_id=wait.call_id,
            deadline_at=wait.deadline_at,
            resolved=wait.resolution is not None,
        )
        return wait

    def open_waits(self, run_id: str | None = None) -> list[Wait]:
        """Parked, unresolved waits (of one run, if given): what a restarted host re-waits on."""
        where = "WHERE k.kind IS NULL AND k.revoked = 0"
        params: tuple[str, ...] = ()
        if run_id is not None:
            where += " AND k.run_id = ?"
            params = (run_id,)
        with self._read() as conn:
            return list(_waits(conn, where, params).values())

    def wait_for(self, key: str, timeout: float | None = None) -> Resolution | None:
        """Block until ``key`` is resolved and return how; ``None`` after ``timeout`` seconds.

        A resolution in this process wakes the waiter at once; one made by another process is
        seen within the poll interval. ``timeout`` is real (monotonic) time, not the store
        clock: deadlines are enforced by :meth:`expire_due`, not here.
        """
        self._known_claims(key, "wait_for")
        give_up = None if timeout is None else time.monotonic() + timeout
        while True:
            seen = self._notifier.generation
            resolution = self.resolution(key)
            if resolution is not None:
                return resolution
            pause = self._poll_interval
            if give_up is not None:
                left = give_up - time.monotonic()
                if left <= 0:
                    return None
                pause = min(pause, left)
            self._notifier.wait(seen, pause)

    def expire(self, key: str, now: float) -> Resolution:
        """Resolve ``key`` as timed out unless something resolved it first; return the winner."""
        claims = self._known_claims(key, "expire")
        with self._write() as conn:
            row = conn.execute(
                "SELECT w.on_timeout FROM keys k LEFT JOIN waits w USING (key_id) WHERE key_id = ?",
                (claims.key_id,),
            ).fetchone()
            if row is None:
                raise ValueError("expire: the key is unknown to this store")
            value = None if row[0] is None else _json.dumps({"on_timeout": row[0]}, "on_timeout")
            cursor = conn.execute(
                "UPDATE keys SET kind = 'timeout', value = ?, resolved_at = ? "
                "WHERE key_id = ? AND kind IS NULL",
                (value, now, claims.key_id),
            )
            resolved = conn.execute(
                "SELECT kind, value, resolved_at FROM keys WHERE key_id = ?", (claims.key_id,)
            ).fetchone()
        if cursor.rowcount == 1:
            self._notifier.notify()
        resolution = _resolution(resolved[0], resolved[1], resolved[2])
        assert resolution is not None
        return resolution

    def expire_due(self, now: float) -> list[Wait]:
        """Resolve as timed out every open wait whose deadline is at or before ``now``.

        Returns those waits (with their new resolution, whose value records ``on_timeout``),
        for the host to apply each one's policy. A resolver that got there first wins.
        """
        with self._write() as conn:
            due = _waits(
                conn,
                "WHERE k.kind IS NULL AND k.revoked = 0 AND w.deadline_at IS NOT NULL "
                "AND w.deadline_at <= ?",
                (now,),
            )
            expired: list[Wait] = []
            for key_id, wait in due.items():
                policy = {"on_timeout": wait.on_timeout}
                conn.execute(
                    "UPDATE keys SET kind = 'timeout', value = ?, resolved_at = ? WHERE key_id = ?",
                    (_json.dumps(policy, "on_timeout"), now, key_id),
                )
                expired.append(replace(wait, resolution=Resolution("timeout", policy, now)))
        if expired:
            self._notifier.notify()
            for wait in expired:
                self._log.info(
                    "wait_expired",
                    run_id=wait.run_id,
                    call_id=wait.call_id,
                    on_timeout=wait.on_timeout,
                )
        return expired

    def cancel_run(self, run_id: str) -> list[Wait]:
        """Resolve every open key of the run as cancelled and mark the run ``cancelled``.

        Returns the parked waits among them (each one's resolution value records
        ``on_cancel``); those with :attr:`Wait.needs_external_cancel` need the host to cancel
        the external work. All of it is one transaction.
        """
        now = self.now()
        with self._write() as conn:
            self._require_run(conn, run_id)
            parked = _waits(
                conn, "WHERE k.run_id = ? AND k.kind IS NULL AND k.revoked = 0", (run_id,)
            )
            cancelled: list[Wait] = []
            for key_id, wait in parked.items():
                policy = {"on_cancel": wait.on_cancel}
                conn.execute(
                    "UPDATE keys SET kind = 'cancelled', value = ?, resolved_at = ? "
                    "WHERE key_id = ?",
                    (_json.dumps(policy, "on_cancel"), now, key_id),
                )
                cancelled.append(replace(wait, resolution=Resolution("cancelled", policy, now)))
            unparked = conn.execute(
                "UPDATE keys SET kind = 'cancelled', resolved_at = ? WHERE run_id = ? "
                "AND kind IS NULL AND revoked = 0",
                (now, run_id),
            ).rowcount
            conn.execute(
                "UPDATE runs SET status = 'cancelled', updated_at = ? WHERE run_id = ?",
                (now, run_id),
            )
        if cancelled or unparked:
            self._notifier.notify()
        self._log.info(
            "run_cancelled",
            run_id=run_id,
            waits=len(cancelled),
            external=sum(w.needs_external_cancel for w in cancelled),
        )
        return cancelled

    # -- journal -----------------------------------------------------------------------------

    def journal_record(self, run_id: str, call_id: str, step_id: str) -> JournalRecord | None:
        """The recorded step, or ``None`` if the call never completed it."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT run_id, call_id, step_id, input, output, recorded_at FROM journal "
                "WHERE run_id = ? AND call_id = ? AND step_id = ?",
                (run_id, call_id, step_id),
            ).fetchone()
        return None if row is None else _journal(row)

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
                "INSERT OR IGNORE INTO journal (run_id, call_id, step_id, input, output, "
                "recorded_at) VALUES (?,?,?,?,?,?)",
                (run_id, call_id, step_id, input, output, self.now()),
            )
            row = conn.execute(
                "SELECT run_id, call_id, step_id, input, output, recorded_at FROM journal "
                "WHERE run_id = ? AND call_id = ? AND step_id = ?",
                (run_id, call_id, step_id),
            ).fetchone()
        return _journal(row)

    # -- process events ------------------------------------------------------------------------

    def append_process_event(
        self, run_id: str, call_id: str, ordinal: int, type: str, payload: Any
    ) -> ProcessEvent:
        """Record the call's ``ordinal``-th event; if already recorded, return the record."""
        _require_id(type, "process event type")
        text = _json.dumps(payload, "the process event payload")
        with self._write() as conn:
            self._require_run(conn, run_id)
            conn.execute(
                "INSERT OR IGNORE INTO process_events (run_id, call_id, ordinal, type, payload, "
                "emitted_at) VALUES (?,?,?,?,?,?)",
                (run_id, call_id, ordinal, type, text, self.now()),
            )
            row = conn.execute(
                "SELECT seq, run_id, call_id, ordinal, type, payload, emitted_at "
                "FROM process_events WHERE run_id = ? AND call_id = ? AND ordinal = ?",
                (run_id, call_id, ordinal),
            ).fetchone()
        return _process_event(row)

    def process_events(
        self, run_id: str | None = None, *, after_seq: int = 0
    ) -> list[ProcessEvent]:
        """Events (of one run, if given) with ``seq`` above ``after_seq``, in emission order."""
        query = (
            "SELECT seq, run_id, call_id, ordinal, type, payload, emitted_at FROM process_events "
            "WHERE seq > ?"
        )
        params: tuple[Any, ...] = (after_seq,)
        if run_id is not None:
            query += " AND run_id = ?"
            params = (after_seq, run_id)
        with self._read() as conn:
            rows = conn.execute(query + " ORDER BY seq", params).fetchall()
        return [_process_event(row) for row in rows]
