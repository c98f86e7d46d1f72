"""The claim protocol of a store: which runs are runnable, and letting a waiting run go.

In-process, on each backend, on a store whose clock the test moves: a run is claimable when it
is new (queued, with a checkpoint), orphaned (running, its lease run out or released, or its
holder a gone process of this machine), or waiting and woken (a wait resolved or overdue); never
while a live lease holds it. The worker tests drive the same protocol with real processes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from toolvisor.durable import QUEUED, RunStore, open_store
from toolvisor.testing import FakeClock

TTL = 30.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture
def store(store_target: str, clock: FakeClock) -> Iterator[RunStore]:
    with open_store(store_target, clock=clock) as opened:
        yield opened


def claim(store: RunStore, holder: str, limit: int) -> list[str]:
    """The ids of the runs ``holder`` claimed (their leases' fencing tokens checked)."""
    leases = store.claim_runs(holder, TTL, limit)
    for lease in leases:
        assert (lease.holder, lease.token) == (holder, store_fence(store, lease.run_id))
    return [lease.run_id for lease in leases]


def store_fence(store: RunStore, run_id: str) -> int:
    """The token of the lease that stands on ``run_id``."""
    (token,) = [lease.token for lease in store.leases() if lease.run_id == run_id]
    return token


def queued(store: RunStore, run_id: str) -> str:
    store.create_run(run_id, status=QUEUED)
    store.save_checkpoint(run_id, 1, "{}", status=QUEUED)
    return run_id


def waiting(store: RunStore, run_id: str, *, deadline_at: float | None = None) -> str:
    """A suspended run waiting on one parked key, hosted by nobody; its key."""
    store.create_run(run_id, status="suspended")
    store.save_checkpoint(run_id, 3, "{}", status="suspended")
    key = store.issue_key(run_id, "1.1.c_hook")
    store.park(key, deadline_at=deadline_at)
    return key


def test_a_queued_run_is_claimed_once(store: RunStore) -> None:
    store.create_run("bare", status=QUEUED)  # no checkpoint yet: nothing to drive
    queued(store, "a")
    assert claim(store, "host-1", 10) == ["a"]
    assert claim(store, "host-2", 10) == []
    assert [(lease.run_id, lease.holder) for lease in store.leases()] == [("a", "host-1")]


def test_claims_take_the_oldest_first_up_to_the_limit(store: RunStore,
                                                      clock: FakeClock) -> None:
    for run_id in ("a", "b", "c"):
        queued(store, run_id)
        clock.now += 1
    assert claim(store, "host-1", 2) == ["a", "b"]
    assert claim(store, "host-2", 2) == ["c"]


def test_an_orphaned_run_is_claimable_once_its_lease_runs_out(store: RunStore,
                                                              clock: FakeClock) -> None:
    store.create_run("r")
    store.save_checkpoint("r", 2, "{}")
    assert store.acquire_lease("r", "dead-host", TTL).holder == "dead-host"
    assert claim(store, "host-1", 10) == []
    clock.now += TTL
    assert claim(store, "host-1", 10) == ["r"]


def test_the_lease_of_a_gone_process_of_this_machine_is_claimable_at_once(
        store: RunStore) -> None:
    """As for a host acquiring a lease: a holder whose pid is gone here holds nothing, while a
    live process of this machine, or any of another machine, holds until its lease runs out."""
    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait()
    here = socket.gethostname()
    for run_id, holder in (("gone", f"{here}:{ended.pid}:x"), ("alive", f"{here}:{os.getpid()}:x"),
                           ("elsewhere", f"not-{here}:{ended.pid}:x")):
        queued(store, run_id)
        store.acquire_lease(run_id, holder, TTL)
    before = store_fence(store, "gone")
    assert claim(store, "host-1", 10) == ["gone"]
    assert store_fence(store, "gone") == before + 1  # the dead holder's writes are fenced out
    assert claim(store, "host-2", 10) == []


def test_runs_already_begun_are_claimed_before_a_deep_queue_of_new_ones(
        store: RunStore, clock: FakeClock) -> None:
    """Orphaned and woken runs go first, though every queued run is older: ordered by their
    last update alone, they waited behind the whole queue."""
    for n in range(100):
        queued(store, f"new-{n:03}")
        clock.now += 1
    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait()
    for run_id, holder, ttl in (("expired", "host-elsewhere", 1.0),
                                ("killed", f"{socket.gethostname()}:{ended.pid}:x", TTL)):
        store.create_run(run_id)
        store.save_checkpoint(run_id, 2, "{}")
        store.acquire_lease(run_id, holder, ttl)
    key = waiting(store, "woken")
    store.resolve(key, ok="paid")
    assert claim(store, "host-1", 2) == ["killed", "woken"]  # its holder's pid is gone
    clock.now += 1.0
    assert claim(store, "host-1", 2) == ["expired", "new-000"]
    assert claim(store, "host-2", 200) == [f"new-{n:03}" for n in range(1, 100)]


def test_a_released_run_is_claimable_at_once(store: RunStore) -> None:
    queued(store, "r")
    (first,) = store.claim_runs("host-1", TTL, 10)
    store.release_lease("r", "host-1")
    (second,) = store.claim_runs("host-2", TTL, 10)
    assert second.token > first.token  # a later holder's writes fence the earlier one's out


def test_ended_runs_are_never_claimed(store: RunStore) -> None:
    for status in ("completed", "failed", "halted", "cancelled"):
        store.create_run(status, status=status)
        store.save_checkpoint(status, 5, "{}", status=status)
    assert claim(store, "host-1", 10) == []


def test_a_waiting_run_is_claimed_once_woken(store: RunStore) -> None:
    key = waiting(store, "w")
    assert claim(store, "host-1", 10) == []
    assert store.resolve(key, ok="paid") == "accepted"
    assert claim(store, "host-1", 10) == ["w"]


def test_a_waiting_run_is_claimed_once_its_deadline_passes(store: RunStore,
                                                           clock: FakeClock) -> None:
    waiting(store, "w", deadline_at=clock.now + 60)
    assert claim(store, "host-1", 10) == []
    clock.now += 60
    assert claim(store, "host-1", 10) == ["w"]


def test_letting_go_keeps_only_the_current_waits(store: RunStore) -> None:
    old = waiting(store, "w")
    store.resolve(old, ok="first answer")  # delivered by the host, which went on
    current = store.issue_key("w", "2.1.c_hook")
    store.park(current, deadline_at=None)
    assert claim(store, "host-1", 10) == ["w"]
    store.let_go("w", "host-1", [current])
    assert store.leases() == []
    assert claim(store, "host-1", 10) == []  # the old resolution wakes it no more
    store.resolve(current, ok="second answer")
    assert claim(store, "host-2", 10) == ["w"]


def test_only_the_holder_lets_a_run_go(store: RunStore) -> None:
    key = waiting(store, "w")
    store.resolve(key, ok="paid")
    assert claim(store, "host-1", 10) == ["w"]
    store.let_go("w", "host-2", [])
    assert [lease.holder for lease in store.leases()] == ["host-1"]
    assert [wait.key for wait in store.open_waits("w")] == []  # resolved, and kept
    store.release_lease("w", "host-1")
    assert claim(store, "host-3", 10) == ["w"]


@pytest.mark.parametrize("limit", [0, -1, 1.5, True])
def test_a_claim_limit_is_a_positive_int(store: RunStore, limit: object) -> None:
    with pytest.raises(ValueError, match="limit must be a positive int"):
        store.claim_runs("host-1", TTL, limit)  # type: ignore[arg-type]
