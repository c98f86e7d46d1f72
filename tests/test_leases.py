"""A run has one host at a time: a lease in the store, renewed while its host drives the run."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from toolvisor import Agent, CallContext, Pending, RunLeasedError, Suspended, Tool, set_event_sink
from toolvisor.durable import Durability, Lease, SessionStore, open_store
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
def store(store_target: str, clock: Clock) -> Iterator[SessionStore]:
    with open_store(store_target, clock=clock, poll_interval=0.01) as opened:
        yield opened


def test_the_store_grants_one_holder_at_a_time(store: SessionStore, clock: Clock) -> None:
    store.create_run("r")
    assert store.acquire_lease("r", "a", 10) is None
    assert store.acquire_lease("r", "a", 10) is None  # the holder renews
    assert store.acquire_lease("r", "b", 10) == Lease("r", "a", 1010.0)
    assert store.acquire_lease("r", "b", 10, replacing="a") is None  # a is known to be dead
    assert store.renew_leases("a", ["r"], 10) == ["r"]  # a lost it
    clock.now += 11
    assert store.acquire_lease("r", "a", 10) is None  # b's lease expired
    store.release_lease("r", "a")
    assert store.acquire_lease("r", "b", 10) is None
    with pytest.raises(ValueError, match="ttl must be a positive"):
        store.acquire_lease("r", "b", 0)


def test_a_second_host_is_refused_until_the_first_lets_the_run_go(
        store: SessionStore) -> None:
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
        store: SessionStore, clock: Clock) -> None:
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
            clock.now += 60  # the store's clock runs past the lease: as if the host hung
            with Agent(ScriptedModel([]), [HOOK], store=store) as taker:
                assert isinstance(taker.resume_run(suspended.run_id), Suspended)
                assert lost.wait(10)  # the stalled host's next renewal finds the run gone
    finally:
        set_event_sink(previous)
