"""Completion keys and their waits: issue, resolve, park, expire, cancel.

:class:`KeyTables` holds the logic of the ``keys`` and ``waits`` tables over any
:class:`SqlDatabase` (portable SQL, one transaction per method). Its state is what it is given:
the database, the store clock, the poll interval, and the store's process-wide notifier
(which owns its own state and wakes this process's waiters at once).

Each ending of a key's wait (a resolution, a timeout, a cancellation) is one conditional
``UPDATE`` of the key's row that only an unresolved, unrevoked key passes: the row's lock makes
a second writer wait for the first and then find it resolved, so the first ending wins on
either backend. A fenced write (``revoke``, ``expire``) locks the run's row where its fence is
checked; ``cancel_run`` locks the run's row too; ``park`` shares the key's row so that it
cannot be revoked between the check and the wait's insert; a key is issued once per call by
the table's unique constraint.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from toolvisor._logging import EventLog
from toolvisor.contract import OnCancel, OnTimeout
from toolvisor.durable import _json
from toolvisor.durable._keys import KeyClaims, sign_key, verify_key
from toolvisor.durable._notify import Notifier
from toolvisor.durable._records import KeyPurpose, Resolution, ResolutionKind, ResolveOutcome, Wait
from toolvisor.durable._rows import (
    RESOLUTION_COLUMNS,
    WAIT_COLUMNS,
    WAITS_JOINED,
    resolution_from_row,
    wait_from_row,
)
from toolvisor.durable._sql import (
    SqlDatabase,
    SqlTransaction,
    require_fence,
    require_id,
    require_run,
)
from toolvisor.durable._store import UNSET

_ON_TIMEOUT = ("error_as_result", "fail_turn")
_ON_CANCEL = ("cancel_external_work", "ignore")


def _resolution_of(tx: SqlTransaction, key_id: str) -> Resolution | None:
    """How the key's wait ended; ``None`` while it is unresolved or if there is no such key."""
    row = tx.execute(
        f"SELECT {RESOLUTION_COLUMNS} FROM keys WHERE key_id = ?", (key_id,)
    ).fetchone()
    return None if row is None else resolution_from_row(row)


class KeyTables:
    """Completion keys and their waits; a resolution wakes this process's waiters at once.

    Each public method is the :class:`RunStore` method of the same name, whose docstring
    is the contract it keeps.
    """

    def __init__(
        self,
        db: SqlDatabase,
        clock: Callable[[], float],
        poll_interval: float,
        notifier: Notifier,
        log: EventLog,
    ) -> None:
        self._db = db
        self._clock = clock
        self._poll_interval = poll_interval
        self._notifier = notifier
        self._log = log

    def _waits(self, tx: SqlTransaction, where: str,
               params: tuple[Any, ...]) -> dict[str, Wait]:
        """The waits selected by ``where``, by key id, in park order."""
        rows = tx.execute(
            f"SELECT k.key_id, {WAIT_COLUMNS} FROM {WAITS_JOINED} {where} "
            f"ORDER BY w.parked_at, w.{self._db.dialect.row_order}",
            params,
        )
        return {row[0]: wait_from_row(row[1:]) for row in rows.fetchall()}

    # -- completion keys ---------------------------------------------------------------------

    def issue_key(
        self, run_id: str, call_id: str, *, purpose: KeyPurpose = "call", name: str = ""
    ) -> str:
        require_id(run_id, "run_id")
        require_id(call_id, "call_id")
        if purpose not in ("call", "event"):
            raise ValueError(f"purpose must be 'call' or 'event', got {purpose!r}")
        if not isinstance(name, str):
            raise TypeError(f"key name must be a str, got {type(name).__name__}")
        with self._db.write() as tx:
            row = tx.execute(
                "SELECT key FROM keys WHERE run_id = ? AND call_id = ? AND purpose = ? "
                "AND name = ?",
                (run_id, call_id, purpose, name),
            ).fetchone()
            if row is not None:
                existing: str = row[0]
                return existing
            require_run(tx, run_id)
            key_id = secrets.token_urlsafe(16)
            claims = KeyClaims(key_id=key_id, run_id=run_id, call_id=call_id)
            tx.execute(  # if an issue of the same key by another host commits first: keep its
                "INSERT INTO keys (key_id, key, run_id, call_id, purpose, name, issued_at) "
                "VALUES (?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                (key_id, sign_key(self._db.secret, claims), run_id, call_id, purpose, name,
                 self._clock()),
            )
            key: str = tx.execute(
                "SELECT key FROM keys WHERE run_id = ? AND call_id = ? AND purpose = ? "
                "AND name = ?",
                (run_id, call_id, purpose, name),
            ).fetchone()[0]
        self._log.debug("completion_key_issued", run_id=run_id, call_id=call_id, purpose=purpose)
        return key

    def _claims(self, key: str) -> KeyClaims | None:
        if not isinstance(key, str):
            raise TypeError(f"a completion key is a str, got {type(key).__name__}")
        return verify_key(self._db.secret, key)

    def _known_claims(self, key: str, operation: str) -> KeyClaims:
        """The claims of ``key``, which must be a key this store issued (a host-side bug if not)."""
        claims = self._claims(key)
        if claims is None:
            raise ValueError(
                f"{operation}: not a completion key of this run store (tampered, truncated "
                "or signed by another store)"
            )
        return claims

    def revoke(self, key: str, *, fence: int | None = None) -> bool:
        claims = self._known_claims(key, "revoke")
        with self._db.write() as tx:
            require_fence(tx, claims.run_id, fence, self._db.dialect)
            cursor = tx.execute(
                "UPDATE keys SET revoked = 1 WHERE key_id = ? AND kind IS NULL AND revoked = 0",
                (claims.key_id,),
            )
        return cursor.rowcount == 1

    def resolve(self, key: str, *, ok: Any = UNSET, error: Any = UNSET) -> ResolveOutcome:
        if (ok is UNSET) == (error is UNSET):
            raise TypeError("resolve needs exactly one of ok=<JSON value> or error=<JSON value>")
        kind: ResolutionKind = "ok" if error is UNSET else "error"
        value = _json.dumps(ok if error is UNSET else error, f"the resolution's {kind} value")
        claims = self._claims(key)
        if claims is None:
            self._log.warning("completion_key_refused", reason="bad_signature")
            return "unknown_or_revoked"
        with self._db.write() as tx:
            cursor = tx.execute(
                "UPDATE keys SET kind = ?, value = ?, resolved_at = ? WHERE key_id = ? "
                "AND run_id = ? AND call_id = ? AND revoked = 0 AND kind IS NULL",
                (kind, value, self._clock(), claims.key_id, claims.run_id, claims.call_id),
            )
            if cursor.rowcount == 1:
                outcome: ResolveOutcome = "accepted"
            else:
                row = tx.execute(
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
        claims = self._known_claims(key, "resolution")
        with self._db.read() as tx:
            return _resolution_of(tx, claims.key_id)

    # -- waits -------------------------------------------------------------------------------

    def park(
        self,
        key: str,
        *,
        deadline_at: float | None,
        on_timeout: OnTimeout = "error_as_result",
        on_cancel: OnCancel = "ignore",
    ) -> Wait:
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
        with self._db.write() as tx:
            row = tx.execute(
                f"SELECT revoked FROM keys WHERE key_id = ?{self._db.dialect.share_row}",
                (claims.key_id,),
            ).fetchone()
            if row is None or row[0]:
                raise ValueError("park: the key is unknown to this store or was revoked")
            tx.execute(
                "INSERT INTO waits (key_id, deadline_at, on_timeout, on_cancel, "
                "parked_at) VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING",
                (claims.key_id, deadline_at, on_timeout, on_cancel, self._clock()),
            )
            wait = self._waits(tx, "WHERE key_id = ?", (claims.key_id,))[claims.key_id]
        self._log.debug(
            "wait_parked",
            run_id=wait.run_id,
            call_id=wait.call_id,
            deadline_at=wait.deadline_at,
            resolved=wait.resolution is not None,
        )
        return wait

    def open_waits(self, run_id: str | None = None) -> list[Wait]:
        where = "WHERE k.kind IS NULL AND k.revoked = 0"
        params: tuple[str, ...] = ()
        if run_id is not None:
            where += " AND k.run_id = ?"
            params = (run_id,)
        with self._db.read() as tx:
            return list(self._waits(tx, where, params).values())

    def wait_for(self, key: str, timeout: float | None = None) -> Resolution | None:
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

    def expire(self, key: str, now: float, *, fence: int | None = None) -> Resolution:
        claims = self._known_claims(key, "expire")
        with self._db.write() as tx:
            require_fence(tx, claims.run_id, fence, self._db.dialect)
            row = tx.execute(
                "SELECT w.on_timeout FROM keys k LEFT JOIN waits w USING (key_id) WHERE key_id = ?",
                (claims.key_id,),
            ).fetchone()
            if row is None:
                raise ValueError("expire: the key is unknown to this store")
            value = None if row[0] is None else _json.dumps({"on_timeout": row[0]}, "on_timeout")
            cursor = tx.execute(
                "UPDATE keys SET kind = 'timeout', value = ?, resolved_at = ? "
                "WHERE key_id = ? AND kind IS NULL",
                (value, now, claims.key_id),
            )
            resolution = _resolution_of(tx, claims.key_id)
        if cursor.rowcount == 1:
            self._notifier.notify()
        assert resolution is not None
        return resolution

    def expire_due(self, now: float) -> list[Wait]:
        with self._db.write() as tx:
            due = self._waits(
                tx,
                "WHERE k.kind IS NULL AND k.revoked = 0 AND w.deadline_at IS NOT NULL "
                "AND w.deadline_at <= ?",
                (now,),
            )
            expired: list[Wait] = []
            for key_id, wait in due.items():
                policy = {"on_timeout": wait.on_timeout}
                if tx.execute(
                    "UPDATE keys SET kind = 'timeout', value = ?, resolved_at = ? WHERE key_id = ? "
                    "AND kind IS NULL AND revoked = 0",
                    (_json.dumps(policy, "on_timeout"), now, key_id),
                ).rowcount != 1:
                    continue  # resolved or revoked since it was read: the first ending won
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
        now = self._clock()
        with self._db.write() as tx:
            require_run(tx, run_id, self._db.dialect)
            parked = self._waits(
                tx, "WHERE k.run_id = ? AND k.kind IS NULL AND k.revoked = 0", (run_id,)
            )
            cancelled: list[Wait] = []
            for key_id, wait in parked.items():
                policy = {"on_cancel": wait.on_cancel}
                if tx.execute(
                    "UPDATE keys SET kind = 'cancelled', value = ?, resolved_at = ? "
                    "WHERE key_id = ? AND kind IS NULL AND revoked = 0",
                    (_json.dumps(policy, "on_cancel"), now, key_id),
                ).rowcount != 1:
                    continue  # resolved or revoked since it was read: the first ending won
                cancelled.append(replace(wait, resolution=Resolution("cancelled", policy, now)))
            unparked = tx.execute(
                "UPDATE keys SET kind = 'cancelled', resolved_at = ? WHERE run_id = ? "
                "AND kind IS NULL AND revoked = 0",
                (now, run_id),
            ).rowcount
            tx.execute(
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
