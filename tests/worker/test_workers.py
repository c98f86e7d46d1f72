"""Workers on one store, SQLite and PostgreSQL: ``agent.submit`` queues runs, ``python -m
toolvisor.cli worker`` processes claim and drive them.

Every worker is a real process (``tests.support.workers``) given the agent of
``tests.programs.worker_app``; the tests wait on the lines workers print and on the store, never on
time: a long lease ttl is injected where a dead worker's lease must not be waited out.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.programs.worker_app import make_agent
from tests.support.postgres import PostgresServer
from tests.support.workers import ROOT, WAIT, WorkerProcess, until
from toolvisor import Agent, DurableError
from toolvisor.durable import RunStore, SqliteRunStore, open_store
from toolvisor.testing import FunctionModel
from toolvisor.worker import Worker

Start = Callable[..., WorkerProcess]


@pytest.fixture
def target(store_target: str) -> str:
    """Where the store is, as the worker command takes it: on each backend in turn."""
    return store_target


@pytest.fixture
def store(target: str) -> Iterator[RunStore]:
    with open_store(target) as opened:
        yield opened


@pytest.fixture
def agent(store: RunStore) -> Iterator[Agent]:
    """The agent runs are submitted with (it drives none itself)."""
    with make_agent(store) as made:
        yield made


@pytest.fixture
def start(target: str) -> Iterator[Start]:
    """Start a worker on the store, ready when returned; every one is reaped at the end."""
    started: list[WorkerProcess] = []

    def worker(**settings: object) -> WorkerProcess:
        started.append(WorkerProcess(target, **settings))  # type: ignore[arg-type]
        return started[-1].ready()

    try:
        yield worker
    finally:
        for process in started:
            process.reap()


def test_a_submitted_run_is_driven_by_a_worker(agent: Agent, store: RunStore,
                                               start: Start) -> None:
    run_id = agent.submit("echo hello")
    assert store.get_run(run_id).status == "queued"  # type: ignore[union-attr]
    worker = start()
    assert worker.expect(f"finished {run_id}") == f"finished {run_id} completed"
    assert worker.said("claimed") == [run_id]
    assert store.get_run(run_id).status == "completed"  # type: ignore[union-attr]
    assert "it said echo hello" in store.latest_checkpoint(run_id).data  # type: ignore[union-attr]
    assert store.leases() == []
    assert worker.terminate() == 0


def test_two_workers_never_drive_the_same_run(agent: Agent, store: RunStore,
                                              start: Start) -> None:
    first, second = start(concurrency=3), start(concurrency=3)
    runs = {agent.submit(f"echo {n}") for n in range(24)}
    until(lambda: set(first.said("finished") + second.said("finished")) == runs)
    claimed = first.said("claimed") + second.said("claimed")
    assert sorted(claimed) == sorted(runs)  # each run claimed once, by one worker
    assert sorted(first.said("finished") + second.said("finished")) == sorted(runs)
    assert {r.status for r in store.runs()} == {"completed"}


def test_sigterm_releases_the_runs_a_worker_drives(agent: Agent, store: RunStore,
                                                   start: Start) -> None:
    run_id = agent.submit("block t1")
    stopping = start(block=True, grace=0)
    stopping.expect("blocking t1")
    assert stopping.terminate() == 0
    assert stopping.said("released") == [run_id]
    assert store.leases() == []  # claimable at once: no lease to run out
    other = start()
    assert other.expect(f"finished {run_id}") == f"finished {run_id} completed"
    assert "it said unblocked" in store.latest_checkpoint(run_id).data  # type: ignore[union-attr]


def test_sigterm_leaves_a_parent_and_its_child_waiting_and_the_childs_key_completes_both(
        agent: Agent, store: RunStore, start: Start, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    steps = tmp_path / "steps.log"
    monkeypatch.setenv("TOOLVISOR_TEST_STEPS", str(steps))
    parent = agent.submit("delegate")
    first = start()
    first.expect(f"waiting {parent}")  # let go, on its own key; its child waits hosted there
    (child,) = [r.run_id for r in store.runs() if r.run_id != parent]
    assert first.terminate() == 0
    assert {r.run_id: r.status for r in store.runs()} == {parent: "suspended",
                                                          child: "suspended"}
    assert store.leases() == []
    (wait,) = store.open_waits(child)
    assert store.resolve(wait.key, ok="pong") == "accepted"
    second = start()
    second.expect(f"finished {parent}")
    assert [line for line in second.lines if line.startswith("finished")] == [
        f"finished {child} completed", f"finished {parent} completed"]
    assert agent.resume_run(parent, wait_for=WAIT).text == "it said it said pong"
    assert steps.read_text(encoding="utf-8").splitlines() == ["hook"]
    assert store.leases() == []
    assert second.terminate() == 0


def test_a_call_cut_short_by_sigterm_is_told_to_the_model_as_stopped_with_its_host(
        agent: Agent, store: RunStore, start: Start) -> None:
    run_id = agent.submit("once t1")  # not retryable: the call is not run again
    stopping = start(block=True, grace=0)
    stopping.expect("blocking t1")
    assert stopping.terminate() == 0
    other = start()
    assert other.expect(f"finished {run_id}") == f"finished {run_id} completed"
    said = store.latest_checkpoint(run_id).data  # type: ignore[union-attr]
    assert "the call stopped with the process hosting the run (closed, stopped by Ctrl-C or " \
           "SIGTERM, or killed) before it ended, and is not run again" in said
    assert "crash" not in said


def test_a_killed_worker_s_runs_are_taken_over_at_once_on_its_machine(
        agent: Agent, store: RunStore, start: Start) -> None:
    """Its lease would stand for an hour; its pid is gone, so it holds nothing here."""
    run_id = agent.submit("block t2")
    killed = start(block=True, ttl=3600.0)
    killed.expect("blocking t2")
    killed.kill()
    (lease,) = store.leases()  # the dead worker's, far from running out
    assert (lease.run_id, lease.holder.split(":")[1]) == (run_id, str(killed.pid))
    assert lease.expires_at > store.now() + 3000
    other = start()
    assert other.expect(f"finished {run_id}") == f"finished {run_id} completed"
    assert other.said("claimed") == [run_id]


def test_a_resolution_wakes_a_waiting_run_on_another_worker(
        agent: Agent, store: RunStore, target: str, start: Start) -> None:
    run_id = agent.submit("hook")
    first = start()
    first.expect(f"waiting {run_id}")
    assert first.terminate() == 0
    assert first.said("released") == []  # it had let the waiting run go already
    second = start()
    (wait,) = store.open_waits(run_id)
    resolved = subprocess.run(
        [sys.executable, "-m", "toolvisor.cli", "resolve", "--store", target, wait.key,
         "--ok", '"paid"'], cwd=ROOT, capture_output=True, text=True, check=False)
    assert (resolved.returncode, resolved.stdout.strip()) == (0, "accepted")
    assert second.expect(f"finished {run_id}") == f"finished {run_id} completed"
    assert "it said paid" in store.latest_checkpoint(run_id).data  # type: ignore[union-attr]


def test_on_postgres_workers_hear_of_runs_without_polling(postgres_server: PostgresServer) -> None:
    """Workers that would look only once an hour hear of a submitted run and of a resolution
    through LISTEN/NOTIFY: each is ready (its first look made) before the news it must hear."""
    target = postgres_server.fresh_url()
    workers: list[WorkerProcess] = []
    try:
        with open_store(target) as store, make_agent(store) as agent:
            workers.append(WorkerProcess(target, poll=3600).ready())
            run_id = agent.submit("hook")
            workers[0].expect(f"waiting {run_id}")
            assert workers[0].terminate() == 0
            workers.append(WorkerProcess(target, poll=3600).ready())
            (wait,) = store.open_waits(run_id)
            assert agent.resolve(wait.key, ok="paid") == "accepted"
            assert workers[1].expect(f"finished {run_id}") == f"finished {run_id} completed"
        assert workers[1].terminate() == 0
    finally:
        for worker in workers:
            worker.reap()


def test_a_worker_goes_on_when_a_claim_fails(tmp_path: Path) -> None:
    """A store that fails a claim (here: closed under the worker) is reported, and the worker
    keeps looking until it is stopped."""
    heard: queue.Queue[tuple[str, str, str]] = queue.Queue()
    store = SqliteRunStore(tmp_path / "runs.sqlite")
    with make_agent(store) as agent:
        worker = Worker(agent, poll_interval=0.01, on_event=lambda *line: heard.put(line))
        working = threading.Thread(target=worker.run)
        working.start()
        worker.ready.wait()
        store.close()
        what, run_id, detail = heard.get(timeout=60)
        worker.stop()
        working.join()
    assert (what, run_id) == ("claim_failed", "-")
    assert "closed" in detail


def test_stop_called_again_inside_stop_returns_at_once(tmp_path: Path) -> None:
    """A second signal (a process group's after a direct one, Ctrl-C twice) can arrive while
    the first one's handler is inside ``stop()``, holding an Event's lock that is not
    reentrant: ``stop()`` called there, as that second handler, must return at once."""
    with SqliteRunStore(tmp_path / "runs.sqlite") as store, make_agent(store) as agent:
        worker = Worker(agent)
        held = threading.Lock()  # what Event.set holds when the second signal comes
        nested: list[bool] = []

        class Interrupted(threading.Event):
            def set(self) -> None:
                with held:
                    if not nested:
                        nested.append(True)
                        worker.stop()  # the second handler, inside the first
                    super().set()

        worker._wake = Interrupted()
        stopping = threading.Thread(target=worker.stop)
        stopping.start()
        stopping.join(30)
        assert not stopping.is_alive(), "stop() waited for a lock its own caller holds"
        assert nested == [True] and worker._wake.is_set()


def test_a_stop_whose_signal_another_thread_takes_still_stops_the_worker(
        tmp_path: Path) -> None:
    """Several signals at once (SIGTERM, SIGINT, SIGTERM) are taken by any of the process's
    threads, not always the main one, which runs the handlers: the worker waits so that it
    hears them all the same."""
    store = tmp_path / "runs.sqlite"
    with SqliteRunStore(store) as opened, make_agent(opened) as agent:
        run_id = agent.submit("echo hi")
    worker = WorkerProcess(str(store))
    try:
        worker.expect(f"finished {run_id}")  # its main thread waits for the end by now
        worker.signal_a_thread(signal.SIGTERM)
        assert worker.process.wait(WAIT) == 0
    finally:
        worker.reap()


def test_a_stop_from_the_commands_start_is_heeded(tmp_path: Path) -> None:
    """SIGTERM, SIGINT, SIGTERM as soon as the command catches them (before its worker is
    made, most often): it is passed on to the worker once it is made, and it exits 0."""
    worker = WorkerProcess(str(tmp_path / "runs.sqlite"))
    try:
        deadline = time.monotonic() + WAIT
        while not worker.catches(signal.SIGTERM):  # nothing to wait on: its mask is polled
            assert worker.process.poll() is None and time.monotonic() < deadline
            time.sleep(0.001)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM):
            worker.process.send_signal(signum)
        assert worker.process.wait(WAIT) == 0
    finally:
        worker.reap()


@pytest.mark.parametrize(("settings", "error"), [
    ({"concurrency": 0}, "concurrency must be a positive int"),
    ({"poll_interval": 0}, "poll_interval"),
    ({"grace": -1}, "grace"),
])
def test_a_worker_refuses_bad_settings(tmp_path: Path, settings: dict[str, float],
                                       error: str) -> None:
    with SqliteRunStore(tmp_path / "runs.sqlite") as store, make_agent(store) as agent, \
            pytest.raises(ValueError, match=error):
        Worker(agent, **settings)  # type: ignore[arg-type]


def test_a_worker_needs_an_agent_with_a_store() -> None:
    with Agent(FunctionModel(lambda request: "hi")) as agent, \
            pytest.raises(ValueError, match="needs an agent with a store"):
        Worker(agent)


def test_submit_needs_a_store() -> None:
    with Agent(FunctionModel(lambda request: "hi")) as agent, \
            pytest.raises(DurableError, match="submit needs a run store"):
        agent.submit("hello")


@pytest.mark.parametrize(("factory", "error"), [
    ("tests.programs.worker_app", "name the agent factory as module:function"),
    ("tests._no_such_module:make_agent", "cannot import 'tests._no_such_module'"),
    ("tests.programs.worker_app:missing", "has no function 'missing'"),
    ("tests.programs.worker_app:not_an_agent", "returned str, not an Agent"),
])
def test_a_bad_factory_is_a_clear_error(target: str, factory: str, error: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolvisor.cli", "worker", "--store", target, factory],
        cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert error in done.stderr
