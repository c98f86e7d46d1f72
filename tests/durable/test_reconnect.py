"""A PostgreSQL store outlives its connection: the server restarts, or drops a connection.

Stores, agents, listeners and worker processes reconnect by themselves; while the server is
away what needs it is a ``StoreUnavailableError`` naming the store, and a worker that cannot
reconnect within its ``--reconnect-for`` exits 1. The killed connections are the session
server's (``pg_terminate_backend``); the restarts are of a server of this module's own, which
no other test shares.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests.programs.worker_app import make_agent, respond
from tests.support.postgres import PostgresServer
from tests.support.workers import WAIT, WorkerProcess, until
from toolvisor import Agent, Durability, Ok, Tool
from toolvisor.durable import (
    QUEUED,
    DurableEffects,
    PostgresRunStore,
    StaleLeaseError,
    StoreUnavailableError,
    open_store,
)
from toolvisor.durable._backoff import Backoff
from toolvisor.testing import FunctionModel

UNREACHABLE = r"the PostgreSQL run store 'postgresql://[^']*' is unreachable \("


@pytest.fixture(scope="module")
def own_server() -> Iterator[PostgresServer]:
    """A server this module alone stops and starts."""
    server = PostgresServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def restartable(own_server: PostgresServer) -> Iterator[PostgresServer]:
    """The module's server, running again after the test whatever the test did to it."""
    yield own_server
    if own_server.stopped:
        own_server.start()


def eventually(attempt: Callable[[], object]) -> object:
    """What ``attempt`` returns once it stops raising ``StoreUnavailableError`` (the store's
    backoff may make it wait a little after the server is back); bounded by ``WAIT``."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            return attempt()
        except StoreUnavailableError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)  # the bounded poll of an outside process (the server) coming back


def test_a_store_goes_on_after_its_connection_is_killed_and_keeps_fencing(
        postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh_url()
    with open_store(url) as first, open_store(url) as second:
        first.create_run("r1")
        lease = first.acquire_lease("r1", "host-a", 60)
        assert postgres_server.kill_connections() >= 2
        # the killed connection was idle: the next transaction begins on a new one
        first.save_checkpoint("r1", 1, "{}", fence=lease.token)
        taken = second.acquire_lease("r1", "host-b", 60, replacing="host-a")
        assert taken.token > lease.token
        postgres_server.kill_connections()
        with pytest.raises(StaleLeaseError):  # after a reconnect, still checked in SQL
            first.save_checkpoint("r1", 2, "{}", fence=lease.token)
        second.save_checkpoint("r1", 2, "{}", fence=taken.token)
        assert [c.effect_id for c in first.checkpoints("r1")] == [1, 2]


def test_an_agent_submits_again_after_its_connection_is_killed(
        postgres_server: PostgresServer) -> None:
    with open_store(postgres_server.fresh_url()) as store, make_agent(store) as agent:
        before = agent.submit("echo 1")
        postgres_server.kill_connections()
        after = agent.submit("echo 2")
        assert {run.run_id: run.status for run in store.runs()} == {before: QUEUED,
                                                                      after: QUEUED}


def test_a_listener_hears_again_after_its_connection_is_killed(
        postgres_server: PostgresServer) -> None:
    """Another process's announcement wakes the store's waiters after a kill: the listener
    reconnects, and wakes them once it is back (what was announced meanwhile was missed)."""
    url = postgres_server.fresh_url()
    woke = threading.Event()
    with PostgresRunStore(url, poll_interval=3600) as store:
        stop_listening = store.on_runnable(woke.set)
        try:
            postgres_server.kill_connections()
            with postgres_server.connect() as other_process:
                other_process.execute("SELECT pg_notify(%s, '')", (store._wakes.channel,))
            assert woke.wait(WAIT)
        finally:
            stop_listening()


def test_while_the_server_is_down_the_store_names_itself_then_goes_on(
        restartable: PostgresServer) -> None:
    with open_store(restartable.fresh_url()) as store:
        store.create_run("before")
        restartable.stop()
        with pytest.raises(StoreUnavailableError, match=UNREACHABLE + ".*nothing was written"):
            store.create_run("during")
        with pytest.raises(StoreUnavailableError, match=UNREACHABLE):  # reads too
            store.runs()
        restartable.start()
        eventually(lambda: store.create_run("after"))
        assert sorted(run.run_id for run in store.runs()) == ["after", "before"]


def test_a_worker_claims_again_after_the_server_restarts(restartable: PostgresServer) -> None:
    url = restartable.fresh_url()
    with open_store(url) as store, make_agent(store) as agent:
        queued = agent.submit("echo before")
        worker = WorkerProcess(url)
        try:
            worker.expect(f"finished {queued}")
            restartable.stop()
            worker.expect(lambda line: line.startswith("claim_failed - StoreUnavailableError")
                          and "is unreachable" in line)
            restartable.start()
            runs = {eventually(lambda n=n: agent.submit(f"echo {n}")) for n in range(3)}
            until(lambda: runs <= set(worker.said("finished")))
            assert worker.process.poll() is None
            assert worker.terminate() == 0
        finally:
            worker.reap()


def test_a_worker_whose_store_stays_away_exits_1(restartable: PostgresServer) -> None:
    url = restartable.fresh_url()
    open_store(url).close()
    worker = WorkerProcess(url, reconnect_for=0.5)
    try:
        worker.ready()
        restartable.stop()
        assert worker.process.wait(WAIT) == 1
        errors = worker.stderr().strip().splitlines()
        assert len(errors) == 1, errors
        assert errors[0].startswith("error: the worker stopped: ClaimsFailingError: every "
                                    "claim failed for 0.5 s (reconnect_for)")
        assert "is unreachable" in errors[0]
    finally:
        worker.reap()


def test_a_worker_claims_again_after_its_connections_are_killed(
        postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh_url()
    with open_store(url) as store, make_agent(store) as agent:
        worker = WorkerProcess(url).ready()
        try:
            postgres_server.kill_connections()
            runs = {agent.submit(f"echo {n}") for n in range(3)}
            until(lambda: runs <= set(worker.said("finished")))
            assert worker.terminate() == 0
        finally:
            worker.reap()


def test_the_backoff_doubles_up_to_its_cap_each_delay_jittered() -> None:
    now = [100.0]
    draws = iter([0.0, 0.999, 0.5, 0.0, 0.0, 0.0])
    backoff = Backoff(0.1, 0.5, clock=lambda: now[0], jitter=lambda: next(draws))
    assert backoff.wait() == 0
    assert [round(backoff.failed(), 3) for _ in range(5)] == [0.05, 0.2, 0.3, 0.25, 0.25]
    assert backoff.wait() == pytest.approx(0.25)
    now[0] += 0.25
    assert backoff.wait() == 0
    backoff.succeeded()
    assert backoff.failed() == pytest.approx(0.05)  # from the first delay again


def test_a_journaled_step_is_recorded_once_the_server_is_back(
        restartable: PostgresServer) -> None:
    """Its side effect happened while the server went away: the record waits for it, so a
    resumed run replays the step instead of running it again."""
    with open_store(restartable.fresh_url()) as store:
        store.create_run("r")
        lease = store.acquire_lease("r", "host-a", 60)
        effects = DurableEffects(store, "r", "c1", fence=lease.token)
        restarting: list[threading.Thread] = []

        def pay(amount: int) -> str:
            restartable.stop()
            restarting.append(threading.Thread(target=restartable.start))
            restarting[0].start()
            return f"paid {amount}"

        assert effects.run_json("pay", 5, pay) == "paid 5"
        restarting[0].join()
        again = DurableEffects(store, "r", "c1", fence=lease.token)
        assert again.run_json("pay", 5, lambda _: "paid twice") == "paid 5"


def test_a_run_whose_store_goes_away_mid_call_is_let_go_then_resumed_once_back(
        restartable: PostgresServer) -> None:
    """The host writes nothing more for the run and stays up; the run resumes from its last
    checkpoint, where the call that was running is not run again (it is not retryable)."""
    paid: list[str] = []

    def pay(arguments: dict[str, object]) -> Ok:
        paid.append("paid")
        restartable.stop()  # the server goes while the call runs
        return Ok("paid")

    with open_store(restartable.fresh_url()) as store, \
            Agent(FunctionModel(respond), [Tool("pay", handler=pay)],
                  durability=Durability(store=store, lease_ttl=30)) as agent:
        with pytest.raises(StoreUnavailableError, match=UNREACHABLE):
            agent.run("pay")
        restartable.start()
        (run,) = eventually(store.runs)  # type: ignore[misc]
        outcome = agent.resume_run(run.run_id)
        assert outcome.status == "completed"
        assert "interrupted" in outcome.text
        assert paid == ["paid"]
