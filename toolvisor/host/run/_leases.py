"""``RunLeases``: one host per run, through a lease in the run store.

An orchestrator takes a run's lease before it drives the run (starting it, or restoring it from
the store), renews its leases every third of their ttl while it hosts them, and gives each up
when the run leaves it. A second host is refused with ``RunLeasedError`` until the lease
expires, so a dead host's runs can be taken over; a lease whose holder is a dead process on
this machine (gone, or a zombie its parent has not reaped yet) is taken over at once; one of
another machine only when it expires. Each lease carries the fencing token the store gave it,
and every write the host makes for the run carries that token (:meth:`RunLeases.token`): a
host that paused past its lease (a GC pause, a frozen VM) is refused its next write with
``StaleLeaseError`` once another host has taken the run over. A lease the store refuses to
release (its disk is full, it went read-only: ``StoreError``; it cannot be reached:
``StoreUnavailableError``) is no longer renewed, and its release is tried again at each renewal
tick and at close (else the lease expires); a renewal the store refuses is tried again at the
next tick. State (the held run ids and their tokens, the leases still to release, the renewal
timer) belongs to the orchestrator's thread; the timer thread only tells the orchestrator it
is time to renew.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.durable import (
    RunStore,
    StoreError,
    StoreUnavailableError,
    holder_gone,
    new_holder,
)
from toolvisor.host._mail import reply_future
from toolvisor.host._protocol import AttachRun, RenewLeases, RunLeasedError


class RunLeases:
    """The leases one orchestrator holds; ``tell`` reaches the orchestrator from the timer."""

    def __init__(self, store: RunStore, ttl: float, tell: Callable[[Any], None]) -> None:
        self.holder = new_holder()
        self._store = store
        self._ttl = ttl
        self._tell = tell
        self._held: dict[str, int] = {}  # run id -> the fencing token of our lease on it
        # run id -> the keys it waits on (None: it ended) of a lease the store refused to release
        self._unreleased: dict[str, list[str] | None] = {}
        self._timer: threading.Timer | None = None
        self._log = get_event_log("leases")

    def take(self, run_id: str) -> None:
        """Hold ``run_id``'s lease, or raise ``RunLeasedError`` naming its holder."""
        standing = self._store.acquire_lease(run_id, self.holder, self._ttl)
        if standing.holder != self.holder and holder_gone(standing.holder):
            standing = self._store.acquire_lease(run_id, self.holder, self._ttl,
                                                 replacing=standing.holder)
        if standing.holder != self.holder:
            left = max(0.0, standing.expires_at - self._store.now())
            raise RunLeasedError(
                f"run {run_id!r} is hosted by {standing.holder} (its lease runs {left:.0f} s "
                "more and is renewed while that host lives); resume it there, or here once "
                "that host has closed its agent or died, or the lease has expired")
        self._held[run_id] = standing.token
        self._arm()

    def claim(self, limit: int, reply: Future[Any]) -> None:
        """Claim up to ``limit`` runnable runs of the store and hold their leases; tell the
        orchestrator to attach each one (``AttachRun``, claimed), and give ``reply`` the future
        of each one's next outcome, by run id."""
        try:
            claimed = self._store.claim_runs(self.holder, self._ttl, limit)
        except Exception as exc:  # the store failed: nothing was claimed
            reply.set_exception(exc)
            return
        futures = {}
        for lease in claimed:
            self._held[lease.run_id] = lease.token
            futures[lease.run_id] = future = reply_future()
            self._tell(AttachRun(lease.run_id, future, claimed=True))
        self._arm()
        reply.set_result(futures)

    def token(self, run_id: str) -> int | None:
        """The fencing token of this host's lease on ``run_id`` (``None``: it holds none),
        which every write this host makes for the run carries."""
        return self._held.get(run_id)

    def give_up(self, run_id: str, waiting_on: list[str] | None = None) -> None:
        """Give ``run_id``'s lease up (the run ended or left this host); ``waiting_on``: the
        run waits on these keys (``[]``: on answers) and is let go until they wake it."""
        if self._held.pop(run_id, None) is not None:
            self._release_in_store(run_id, waiting_on)

    def _release_in_store(self, run_id: str, waiting_on: list[str] | None) -> None:
        """Release the lease in the store; one the store refuses is kept to try again."""
        try:
            if waiting_on is None:
                self._store.release_lease(run_id, self.holder)
            else:
                self._store.let_go(run_id, self.holder, waiting_on)
        except (StoreError, StoreUnavailableError) as exc:
            if run_id not in self._unreleased:
                self._log.warning("lease_release_failed", run_id=run_id, error=str(exc))
            self._unreleased[run_id] = waiting_on
            self._arm()
        else:
            self._unreleased.pop(run_id, None)

    def _retry_releases(self) -> None:
        for run_id, waiting_on in list(self._unreleased.items()):
            self._release_in_store(run_id, waiting_on)

    def renew(self) -> list[str]:
        """Extend every held lease; the run ids whose lease another host took meanwhile."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.join()  # it has told us; its thread is ending
        self._retry_releases()
        try:
            lost = self._store.renew_leases(self.holder, sorted(self._held), self._ttl)
        except (StoreError, StoreUnavailableError) as exc:  # try again next tick
            self._log.warning("lease_renewal_failed", error=str(exc))
            lost = []
        for run_id in lost:
            del self._held[run_id]
        self._arm()
        return lost

    def close(self) -> None:
        """Stop renewing and give every lease up (one the store still refuses expires at the
        end of its ttl, or when this process ends)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            timer.join()
        for run_id in list(self._held):
            self.give_up(run_id)
        self._retry_releases()
        timer, self._timer = self._timer, None  # what a refused release armed again
        if timer is not None:
            timer.cancel()
            timer.join()

    def _arm(self) -> None:
        if self._timer is None and (self._held or self._unreleased):
            self._timer = threading.Timer(self._ttl / 3, self._tell, (RenewLeases(),))
            self._timer.name = "toolvisor-leases"
            self._timer.daemon = True
            self._timer.start()
