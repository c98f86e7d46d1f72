"""A run has one host at a time: a lease in the store, renewed while its host drives the run."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.postgres import behind_the_store, set_version
from toolvisor import Agent, CallContext, Pending, RunLeasedError, Suspended, Tool, set_event_sink
from toolvisor.durable import Durability, Lease, RunStore, StaleLeaseError, open_store
from toolvisor.testing import ScriptedModel, call, calls


def waiting_on_a_key(arguments: dict[str, Any], ctx: CallContext) -> Pending:
    ctx.completion_key()
    return Pending(deadline=600)


HOOK = Tool("hook", handler=waiting_on_a_key)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(store_target: str, clock: Clock) -> Iterator[RunStore]:
    with open_store(store_target, clock=clock, poll_interval=0.01) as opened:
        yield opened


def test_the_store_grants_one_holder_at_a_time(store: RunStore, clock: Clock) -> None:
    store.create_run("r")
    assert store.acquire_lease("r", "a", 10) == Lease("r", "a", 1010.0, token=1)
    clock.now += 1
    assert store.acquire_lease("r", "a", 10) == Lease("r", "a", 1011.0, token=1)  # renewed
    assert store.acquire_lease("r", "b", 10) == Lease("r", "a", 1011.0, token=1)  # refused
    # a is known to be dead: b takes over, under the next token
    assert store.acquire_lease("r", "b", 10, replacing="a") == Lease("r", "b", 1011.0, token=2)
    assert store.renew_leases("a", ["r"], 10) == ["r"]  # a lost it
    clock.now += 11
    assert store.acquire_lease("r", "a", 10).token == 3  # b's lease expired
    store.release_lease("r", "a")
    assert store.acquire_lease("r", "b", 10) == Lease("r", "b", 1022.0, token=4)
    with pytest.raises(ValueError, match="ttl must be a positive"):
        store.acquire_lease("r", "b", 0)


def test_a_write_fenced_with_a_stale_token_is_refused_and_changes_nothing(
        store: RunStore, clock: Clock) -> None:
    store.create_run("r")
    first = store.acquire_lease("r", "a", 10)
    store.save_checkpoint("r", 1, '{"by": "a"}', fence=first.token)
    key = store.issue_key("r", "c")
    store.park(key, deadline_at=clock.now + 5)
    clock.now += 11  # a paused past its lease; b takes the run over
    second = store.acquire_lease("r", "b", 10)
    assert (second.holder, second.token) == ("b", first.token + 1)
    stale: list[Callable[[], object]] = [
        lambda: store.save_checkpoint("r", 2, '{"by": "a"}', status="x", fence=first.token),
        lambda: store.record_step("r", "c", "s", "1", "2", fence=first.token),
        lambda: store.append_process_event("r", "c", 0, "t", None, fence=first.token),
        lambda: store.expire(key, clock.now, fence=first.token),
        lambda: store.revoke(key, fence=first.token),
    ]
    for write in stale:
        with pytest.raises(StaleLeaseError, match=(
                rf"run 'r': this host's write carries fencing token {first.token}, but its "
                rf"lease is b's, with token {second.token}.*stops driving the run")):
            write()
    assert [c.data for c in store.checkpoints("r")] == ['{"by": "a"}']
    assert store.get_run("r").status == "running"  # type: ignore[union-attr]
    assert store.journal_record("r", "c", "s") is None and store.process_events("r") == []
    assert store.resolution(key) is None
    # the new holder's writes, and those of no host (fence None), pass
    store.save_checkpoint("r", 2, '{"by": "b"}', fence=second.token)
    assert store.expire(key, clock.now, fence=second.token).kind == "timeout"
    store.record_step("r", "c", "s", "1", "2")
    store.release_lease("r", "b")
    with pytest.raises(StaleLeaseError, match="no host holds its lease now"):
        store.save_checkpoint("r", 3, "{}", fence=second.token)


def test_a_store_of_schema_version_2_is_migrated_and_its_leases_fenced(
        store_target: str, clock: Clock) -> None:
    with open_store(store_target, clock=clock) as store:
        store.create_run("r")
        store.acquire_lease("r", "a", 10)
    # as toolvisor before fencing left it: no tokens, version 2
    for statement in ("ALTER TABLE leases DROP COLUMN token", "ALTER TABLE runs DROP COLUMN fence",
                      "ALTER TABLE runs DROP COLUMN agent",
                      "ALTER TABLE runs DROP COLUMN parent_run_id"):
        behind_the_store(store_target, statement)
    set_version(store_target, 2)
    with open_store(store_target, clock=clock) as store:
        assert store.leases() == [Lease("r", "a", 1010.0, token=0)]
        taken = store.acquire_lease("r", "b", 10, replacing="a")
        assert taken.token == 1
        with pytest.raises(StaleLeaseError):
            store.save_checkpoint("r", 1, "{}", fence=0)


def test_a_second_host_is_refused_until_the_first_lets_the_run_go(
        store: RunStore) -> None:
    first = Agent(ScriptedModel([calls(call("hook", id="c1"))]), [HOOK], store=store)
    with first:
        suspended = first.run("go")
        assert isinstance(suspended, Suspended) and suspended.run_id is not None
        with Agent(ScriptedModel([]), [HOOK], store=store) as second, \
                pytest.raises(RunLeasedError, match=f"run {suspended.run_id!r} is hosted by"):
            second.resume_run(suspended.run_id)
    with Agent(ScriptedModel([]), [HOOK], store=store) as second:  # the first host closed
        assert isinstance(second.resume_run(suspended.run_id), Suspended)


def test_a_host_that_stops_renewing_loses_the_run_to_another(
        store: RunStore, clock: Clock) -> None:
    lost = threading.Event()

    def sink(level: str, event: str, fields: dict[str, Any]) -> None:
        if event == "lease_lost":
            lost.set()

    previous = set_event_sink(sink)
    try:
        with Agent(ScriptedModel([calls(call("hook", id="c1"))]), [HOOK],
                   durability=Durability(store=store, lease_ttl=0.3)) as stalled:
            suspended = stalled.run("go")
            assert isinstance(suspended, Suspended) and suspended.run_id is not None
            with Agent(ScriptedModel([]), [HOOK], store=store) as taker:
                # The store's clock runs past the lease, as if the host hung. Its renewal
                # thread has not: a renewal tick between the jump and the taker's claim
                # extends the lease from the new time, so the clock jumps again until the
                # taker's claim comes first (the window is one tick in many).
                taken: object = None
                for _attempt in range(100):
                    clock.now += 60
                    try:
                        taken = taker.resume_run(suspended.run_id)
                    except RunLeasedError:
                        continue
                    break
                assert isinstance(taken, Suspended)
                assert lost.wait(10)  # the stalled host's next renewal finds the run gone
    finally:
        set_event_sink(previous)
