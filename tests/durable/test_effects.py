"""Durable effects of one call: journaled steps, external events, process events."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from toolvisor.durable import DurableEffects, DurableError, RunStore, open_store


class FakeClock:
    """A store clock that moves only when the test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db(store_target: str) -> str:
    return store_target


@pytest.fixture
def store(db: str) -> Iterator[RunStore]:
    with open_store(db) as opened:
        opened.create_run("run-1")
        yield opened


def effects(store: RunStore | None, call_id: str | None = "call-1") -> DurableEffects:
    """A fresh execution of the call (what the host builds per attempt or after a restart)."""
    return DurableEffects(store, "run-1", call_id)


class Counting:
    """A step function that records every input it was run with."""

    def __init__(self, result: Callable[[Any], Any] = lambda x: {"double": x * 2}) -> None:
        self.inputs: list[Any] = []
        self._result = result

    def __call__(self, value: Any) -> Any:
        self.inputs.append(value)
        return self._result(value)


def code(error: pytest.ExceptionInfo[DurableError]) -> str:
    return error.value.code


# -- run_json --------------------------------------------------------------------------------------


def test_a_step_runs_once_and_replays_from_the_journal(store: RunStore) -> None:
    fn = Counting()
    assert effects(store).run_json("double", 21, fn) == {"double": 42}
    assert effects(store).run_json("double", 21, fn) == {"double": 42}
    assert fn.inputs == [21]


def test_a_step_replays_after_a_restart(db: str) -> None:
    fn = Counting()
    with open_store(db) as before:
        before.create_run("run-1")
        effects(before).run_json("double", 5, fn)
    with open_store(db) as after:
        assert effects(after).run_json("double", 5, fn) == {"double": 10}
    assert fn.inputs == [5]


def test_steps_are_journaled_per_call(store: RunStore) -> None:
    fn = Counting()
    effects(store, "call-1").run_json("double", 1, fn)
    effects(store, "call-2").run_json("double", 1, fn)
    assert fn.inputs == [1, 1]


def test_the_result_is_what_json_reads_back_on_first_run_and_replay(
    store: RunStore,
) -> None:
    fn = Counting(lambda _: (1, 2))
    assert effects(store).run_json("pair", None, fn) == [1, 2]
    assert effects(store).run_json("pair", None, fn) == [1, 2]


@pytest.mark.parametrize("step_id", ["", None, 7])
def test_a_step_needs_a_non_empty_id_before_fn_runs(
    store: RunStore, step_id: Any
) -> None:
    fn = Counting()
    with pytest.raises(DurableError) as error:
        effects(store).run_json(step_id, 1, fn)
    assert code(error) == "durable_effect_empty_step_id"
    assert fn.inputs == []


def test_a_step_id_repeated_in_one_execution_is_refused_before_fn_runs(
    store: RunStore,
) -> None:
    fn = Counting()
    execution = effects(store)
    execution.run_json("step", 1, fn)
    with pytest.raises(DurableError) as error:
        execution.run_json("step", 2, fn)
    assert code(error) == "durable_effect_repeated_step_id"
    assert fn.inputs == [1]


def test_the_same_step_id_with_another_input_is_a_mismatch_not_a_replay(
    store: RunStore,
) -> None:
    fn = Counting()
    effects(store).run_json("step", {"a": 1, "b": 2}, lambda _: "one")
    assert effects(store).run_json("step", {"b": 2, "a": 1}, fn) == "one"  # same JSON value
    with pytest.raises(DurableError) as error:
        effects(store).run_json("step", {"a": 1, "b": 3}, fn)
    assert code(error) == "durable_effect_replay_mismatch"
    assert '{"a":1,"b":3}' in str(error.value)
    assert fn.inputs == []


def test_a_step_that_raises_records_nothing(store: RunStore) -> None:
    def fail(_: Any) -> Any:
        raise ConnectionError("flaky")

    with pytest.raises(ConnectionError):
        effects(store).run_json("fetch", 1, fail)
    assert store.journal_record("run-1", "call-1", "fetch") is None
    assert effects(store).run_json("fetch", 1, lambda _: "fetched") == "fetched"


def test_values_that_are_not_json_are_refused(store: RunStore) -> None:
    fn = Counting(lambda _: {1, 2})
    with pytest.raises(DurableError) as bad_input:
        effects(store).run_json("step", object(), fn)
    assert code(bad_input) == "durable_effect_not_json"
    assert fn.inputs == []
    with pytest.raises(DurableError) as bad_output:
        effects(store).run_json("step", 1, fn)
    assert code(bad_output) == "durable_effect_not_json"
    assert store.journal_record("run-1", "call-1", "step") is None


def test_racing_executions_of_one_step_both_see_the_first_record(db: str) -> None:
    with open_store(db) as setup:
        setup.create_run("run-1")
    both_running = threading.Barrier(2)

    def execution(tag: str) -> Any:
        with open_store(db) as own:

            def step(_: Any) -> str:
                both_running.wait()  # both ran fn; only one record may win
                return tag

            return effects(own).run_json("step", 0, step)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(execution, ["a", "b"]))
    assert results[0] == results[1] and results[0] in ("a", "b")


# -- availability ----------------------------------------------------------------------------------

EVERY_EFFECT: list[Callable[[DurableEffects], Any]] = [
    lambda fx: fx.run_json("s", 1, lambda x: x),
    lambda fx: fx.external_event_key("approval"),
    lambda fx: fx.await_event_json("key"),
    lambda fx: fx.emit_process_event("progress", {}),
]


@pytest.mark.parametrize("use", EVERY_EFFECT)
def test_without_a_store_every_effect_is_unavailable(use: Callable[[DurableEffects], Any]) -> None:
    with pytest.raises(DurableError) as error:
        use(effects(None))
    assert code(error) == "durable_effects_unavailable"


@pytest.mark.parametrize("use", EVERY_EFFECT)
def test_outside_a_prepared_call_every_effect_needs_a_call_id(
    store: RunStore, use: Callable[[DurableEffects], Any]
) -> None:
    with pytest.raises(DurableError) as error:
        use(effects(store, call_id=None))
    assert code(error) == "durable_effects_missing_call_id"


# -- external events -------------------------------------------------------------------------------


def test_an_event_key_is_stable_per_call_and_name(store: RunStore) -> None:
    key = effects(store).external_event_key("approval")
    assert effects(store).external_event_key("approval") == key
    assert effects(store).external_event_key("payment") != key
    assert effects(store, "call-2").external_event_key("approval") != key
    with pytest.raises(ValueError, match="name"):
        effects(store).external_event_key("")


def test_an_event_delivered_before_the_await_is_returned_at_once(
    store: RunStore,
) -> None:
    execution = effects(store)
    key = execution.external_event_key("approval")
    assert store.resolve(key, ok={"approved": True}) == "accepted"
    assert execution.await_event_json(key) == {"approved": True}


def test_an_event_delivered_while_awaiting_wakes_the_call(store: RunStore) -> None:
    execution = effects(store)
    key = execution.external_event_key("approval")
    with ThreadPoolExecutor(1) as pool:
        awaiting = pool.submit(execution.await_event_json, key, 60)
        assert store.resolve(key, ok="yes") == "accepted"
        assert awaiting.result() == "yes"


def test_a_replay_gets_the_event_delivered_to_an_earlier_execution(db: str) -> None:
    with open_store(db) as before:
        before.create_run("run-1")
        first = effects(before)
        key = first.external_event_key("approval")
        before.resolve(key, ok="yes")
        assert first.await_event_json(key) == "yes"
    with open_store(db) as after:
        replay = effects(after)
        assert replay.await_event_json(replay.external_event_key("approval")) == "yes"


RESOLVE_IN_CHILD = """
import sys
from toolvisor.durable import open_store
with open_store(sys.argv[1]) as store:
    print(store.resolve(sys.argv[2], ok={"from": "another process"}))
"""


def test_an_event_resolved_by_another_process_is_delivered(
    store: RunStore, db: str
) -> None:
    execution = effects(store)
    key = execution.external_event_key("webhook")
    with ThreadPoolExecutor(1) as pool:
        awaiting = pool.submit(execution.await_event_json, key, 60)
        child = subprocess.run(
            [sys.executable, "-c", RESOLVE_IN_CHILD, db, key],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert awaiting.result() == {"from": "another process"}
    assert child.stdout.strip() == "accepted"


def test_a_delivered_error_raises_with_its_value(store: RunStore) -> None:
    execution = effects(store)
    key = execution.external_event_key("payment")
    store.resolve(key, error={"reason": "card declined"})
    with pytest.raises(DurableError) as error:
        execution.await_event_json(key)
    assert code(error) == "durable_effect_event_error"
    assert error.value.detail == {"reason": "card declined"}


def test_an_event_that_does_not_arrive_in_time_raises_timeout(store: RunStore) -> None:
    execution = effects(store)
    key = execution.external_event_key("late")
    with pytest.raises(DurableError) as error:
        execution.await_event_json(key, timeout=0.01)
    assert code(error) == "durable_effect_event_timeout"
    assert store.resolve(key, ok="too late") == "already_resolved"


def test_the_host_expiring_an_event_wait_ends_the_await(db: str) -> None:
    clock = FakeClock()
    with open_store(db, clock=clock) as store:
        store.create_run("run-1")
        execution = effects(store)
        key = execution.external_event_key("slow")
        store.park(key, deadline_at=clock.now + 30)  # as the await will; the first park stays
        with ThreadPoolExecutor(1) as pool:
            awaiting = pool.submit(execution.await_event_json, key, 30)
            expired = store.expire_due(clock.now + 31)  # the host's timer; the clock stays
            with pytest.raises(DurableError) as error:
                awaiting.result()
    assert [w.key for w in expired] == [key]
    assert code(error) == "durable_effect_event_timeout"


def test_cancelling_the_run_ends_the_await(store: RunStore) -> None:
    execution = effects(store)
    key = execution.external_event_key("approval")
    with ThreadPoolExecutor(1) as pool:
        awaiting = pool.submit(execution.await_event_json, key)
        store.cancel_run("run-1")
        with pytest.raises(DurableError) as error:
            awaiting.result()
    assert code(error) == "durable_effect_event_cancelled"


def test_the_calls_cancel_token_ends_the_await(store: RunStore) -> None:
    token = threading.Event()
    execution = DurableEffects(store, "run-1", "call-1", cancelled=token)
    key = execution.external_event_key("approval")
    with ThreadPoolExecutor(1) as pool:
        awaiting = pool.submit(execution.await_event_json, key)
        token.set()
        with pytest.raises(DurableError) as error:
            awaiting.result()
    assert code(error) == "durable_effect_event_cancelled"
    assert store.resolution(key) is None  # the run decides what happens to the wait


def test_only_this_calls_event_keys_can_be_awaited(store: RunStore) -> None:
    other_key = effects(store, "call-2").external_event_key("approval")
    call_key = store.issue_key("run-1", "call-1")
    for key in (other_key, call_key, "not a key"):
        with pytest.raises(DurableError) as error:
            effects(store).await_event_json(key)
        assert code(error) == "durable_effect_unknown_event_key"


@pytest.mark.parametrize("timeout", [0, -1, True, "5"])
def test_a_bad_timeout_is_refused(store: RunStore, timeout: Any) -> None:
    execution = effects(store)
    key = execution.external_event_key("approval")
    with pytest.raises(ValueError, match="timeout"):
        execution.await_event_json(key, timeout=timeout)


# -- process events --------------------------------------------------------------------------------


def test_process_events_are_ordered_and_replays_do_not_repeat_them(
    store: RunStore,
) -> None:
    first = effects(store)
    seqs = [first.emit_process_event("progress", {"done": n}) for n in range(3)]
    effects(store, "call-2").emit_process_event("started")
    replay = effects(store)
    assert [replay.emit_process_event("progress", {"done": n}) for n in range(3)] == seqs
    replay.emit_process_event("finished", None)
    events = store.process_events("run-1")
    assert [(e.call_id, e.type, e.payload) for e in events] == [
        ("call-1", "progress", {"done": 0}),
        ("call-1", "progress", {"done": 1}),
        ("call-1", "progress", {"done": 2}),
        ("call-2", "started", None),
        ("call-1", "finished", None),
    ]
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert [e.type for e in store.process_events(after_seq=events[3].seq)] == ["finished"]


def test_a_replay_that_emits_something_else_is_a_mismatch(store: RunStore) -> None:
    effects(store).emit_process_event("progress", {"done": 1})
    with pytest.raises(DurableError) as error:
        effects(store).emit_process_event("progress", {"done": 2})
    assert code(error) == "durable_effect_replay_mismatch"


def test_a_process_event_needs_a_type_and_a_json_payload(store: RunStore) -> None:
    with pytest.raises(ValueError, match="type"):
        effects(store).emit_process_event("", {})
    with pytest.raises(DurableError) as error:
        effects(store).emit_process_event("progress", {"at": object()})
    assert code(error) == "durable_effect_not_json"
    assert store.process_events() == []
