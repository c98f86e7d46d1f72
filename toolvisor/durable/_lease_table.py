"""Leases: which host drives a run, for how long (one host per run), under which fencing token.

:class:`LeaseTable` holds the ``leases`` table's logic over any :class:`SqlDatabase`; its state
is the database and the store clock it is given. Taking a lease locks the run's row, then the
lease's (``lock_run``, ``lock_row``), as a claim does; renewing and releasing change only the
lease's row, and only while the holder still holds it, so a takeover that committed first
wins over a late renewal.
"""

from __future__ import annotations

from collections.abc import Callable

from toolvisor.contract import check_seconds
from toolvisor.durable._records import Lease
from toolvisor.durable._sql import SqlDatabase, next_fence, require_run


class LeaseTable:
    """Take, renew, release and list the leases on runs, stamped by the store clock.

    Each public method is the :class:`RunStore` method of the same name, whose docstring
    is the contract it keeps.
    """

    def __init__(self, db: SqlDatabase, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock

    def acquire_lease(self, run_id: str, holder: str, ttl: float, *,
                      replacing: str | None = None) -> Lease:
        check_seconds("a lease ttl", ttl, positive=True)
        now = self._clock()
        locks = self._db.dialect.lock_row
        with self._db.write() as tx:
            require_run(tx, run_id, self._db.dialect)
            row = tx.execute("SELECT holder, expires_at, token FROM leases WHERE run_id = ?"
                             f"{locks}", (run_id,)).fetchone()
            if row is not None and row[0] not in (holder, replacing) and row[1] > now:
                return Lease(run_id, row[0], row[1], row[2])
            if row is not None and row[0] == holder:
                token: int = row[2]  # renewed: the same lease, the same token
            else:
                token = next_fence(tx, run_id)
            tx.execute("INSERT INTO leases (run_id, holder, expires_at, token) VALUES (?,?,?,?) "
                       "ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, "
                       "expires_at = excluded.expires_at, token = excluded.token",
                       (run_id, holder, now + ttl, token))
        return Lease(run_id, holder, now + ttl, token)

    def renew_leases(self, holder: str, run_ids: list[str], ttl: float) -> list[str]:
        expires_at = self._clock() + ttl
        lost = set()
        with self._db.write() as tx:
            for run_id in sorted(run_ids):  # the order claims lock leases in: no deadlock
                cursor = tx.execute("UPDATE leases SET expires_at = ? WHERE run_id = ? AND "
                                    "holder = ?", (expires_at, run_id, holder))
                if cursor.rowcount != 1:
                    lost.add(run_id)
        return [run_id for run_id in run_ids if run_id in lost]

    def release_lease(self, run_id: str, holder: str) -> None:
        with self._db.write() as tx:
            tx.execute("DELETE FROM leases WHERE run_id = ? AND holder = ?", (run_id, holder))

    def leases(self) -> list[Lease]:
        with self._db.read() as tx:
            rows = tx.execute(
                "SELECT run_id, holder, expires_at, token FROM leases ORDER BY run_id").fetchall()
        return [Lease(*row) for row in rows]
