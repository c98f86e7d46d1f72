"""Claims: hosts on any machine take the runs nobody drives, one host per run.

:class:`ClaimTable` holds the claim's logic over any :class:`SqlDatabase` (portable SQL); its
state is the database and the store clock it is given. A backend's dialect says how candidate
rows are locked (``claim_lock``: PostgreSQL's ``FOR NO KEY UPDATE OF r SKIP LOCKED``, so
concurrent claimers, and the run's other writers, which lock its row too, are passed over
instead of waited for; nothing on SQLite, whose write transactions are serialized). Either
way the lease is taken with one conditional upsert per run, which sees the latest committed
lease: two claimers never both take a run. A lease whose holder is a process of this machine
that is gone (``holder_gone``) is as free as an expired one, as for a host that acquires a
lease: a worker restarted after a crash takes its own runs back at once, not after their ttl.
Runs already begun (orphaned, or waiting and woken) are claimed before new ones (:data:`RUNNABLE`).
A claimed lease gets the run's next fencing token, as :meth:`LeaseTable.acquire_lease` gives a
new holder. Leases are taken in run id order, the order renewals lock them in, so the two never
deadlock. Letting a run go locks its row first, as every other write of the run does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from toolvisor.contract import check_seconds
from toolvisor.durable._holders import holder_gone
from toolvisor.durable._records import Lease
from toolvisor.durable._sql import SqlDatabase, lock_run, next_fence

QUEUED: Final = "queued"
"""The status of a run that was submitted and that no host has driven yet."""

RUNNABLE: Final = f"""
SELECT r.run_id FROM runs r
WHERE r.status IN ('{QUEUED}', 'running', 'suspended')
  AND EXISTS (SELECT 1 FROM checkpoints c WHERE c.run_id = r.run_id)
  AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.run_id = r.run_id AND NOT {{free}})
  AND (r.status <> 'suspended' OR EXISTS (
      SELECT 1 FROM waits w JOIN keys k ON k.key_id = w.key_id
      WHERE k.run_id = r.run_id AND k.revoked = 0
        AND (k.kind IS NOT NULL OR w.deadline_at <= ?)))
ORDER BY CASE WHEN r.status = '{QUEUED}' THEN 1 ELSE 0 END, r.updated_at, r.run_id
LIMIT ?"""
"""The runs no live lease holds that a host should drive (``{free}``: the test that the lease
``l`` holds its run no more, :func:`free`): orphaned (``running``: its host died or let it go),
or ``suspended`` and woken: one of its waits resolved, or an open one's deadline passed; then
new ones (``queued``); oldest first within each. Runs already begun come first because
someone is waiting on them mid-way: ordered by their last update alone, a run orphaned a moment
ago sorted behind every run queued before it, and a deep queue starved it (200 queued runs kept
a SIGKILLed worker's 5 runs waiting 16 s on one machine: ``python -m bench.workers --only
deep``). A host lets a waiting run go with
:meth:`ClaimTable.let_go`, which keeps only the waits of its current suspension, so a wait
resolved and delivered before cannot wake it. (A waiting run whose host died may keep such
waits: it is claimed once more, and let go properly then.)"""


def free(lease: str, gone: list[str]) -> str:
    """The SQL test that the lease row ``lease`` (a table's name or alias) holds its run no
    more: it expired (its one parameter: now), or its holder is one of the ``gone`` holders
    (theirs follow)."""
    if not gone:
        return f"{lease}.expires_at <= ?"
    return f"({lease}.expires_at <= ? OR {lease}.holder IN ({','.join('?' * len(gone))}))"


class ClaimTable:
    """Claim runs, and let waiting ones go: each public method is the :class:`RunStore`
    method of the same name, whose docstring is the contract it keeps."""

    def __init__(self, db: SqlDatabase, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock
        self._lock = db.dialect.claim_lock

    def claim_runs(self, holder: str, ttl: float, limit: int) -> list[Lease]:
        check_seconds("a lease ttl", ttl, positive=True)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        now = self._clock()
        claimed = []
        with self._db.write() as tx:
            gone = [row[0] for row in tx.execute(
                "SELECT DISTINCT holder FROM leases WHERE expires_at > ?", (now,)).fetchall()
                if holder_gone(row[0])]  # dead processes of this machine: free at once
            candidates = [row[0] for row in tx.execute(
                RUNNABLE.format(free=free("l", gone)) + self._lock,
                (now, *gone, now, limit)).fetchall()]
            for run_id in sorted(candidates):
                if tx.execute(
                        "INSERT INTO leases (run_id, holder, expires_at) VALUES (?,?,?) "
                        "ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, "
                        f"expires_at = excluded.expires_at WHERE {free('leases', gone)}",
                        (run_id, holder, now + ttl, now, *gone)).rowcount != 1:
                    continue  # taken meanwhile (a claimer that committed first)
                token = next_fence(tx, run_id)
                tx.execute("UPDATE leases SET token = ? WHERE run_id = ?", (token, run_id))
                claimed.append(Lease(run_id, holder, now + ttl, token))
        return sorted(claimed, key=lambda lease: candidates.index(lease.run_id))  # claim order

    def let_go(self, run_id: str, holder: str, waiting_on: list[str]) -> None:
        with self._db.write() as tx:
            lock_run(tx, self._db.dialect, run_id)
            if tx.execute("DELETE FROM leases WHERE run_id = ? AND holder = ?",
                          (run_id, holder)).rowcount != 1:
                return  # another host took the run over: its waits are that host's business
            keep = ",".join("?" * len(waiting_on))
            tx.execute("DELETE FROM waits WHERE key_id IN (SELECT key_id FROM keys WHERE "
                       f"run_id = ?{f' AND key NOT IN ({keep})' if keep else ''})",
                       (run_id, *waiting_on))
