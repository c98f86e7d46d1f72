"""The run stores: runs, checkpoints, resolution, waits, expiry, cancel, atomicity.

Every test of the store's behaviour runs on both backends (``store_target``): a real SQLite file
in ``tmp_path`` and a fresh schema on the session's real PostgreSQL server; the tests of a
SQLite file's own handling use the file. "Another process" is a real ``python -c``.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from toolvisor.durable import (
    Lease,
    Resolution,
    RunStore,
    SavedCheckpoint,
    SqliteRunStore,
    UnknownRunError,
    open_store,
)


class FakeClock:
    """A store clock that moves only when the test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db(store_target: str) -> str:
    """Where the test's store goes: a SQLite file's path or a PostgreSQL URL."""
    return store_target


@pytest.fixture
def store(db: str, clock: FakeClock) -> Iterator[RunStore]:
    with open_store(db, clock=clock) as opened:
        opened.create_run("run-1")
        yield opened


def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (a real separate process) and wait for it."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


RESOLVE_IN_CHILD = """
import json, sys
from toolvisor.durable import open_store
with open_store(sys.argv[1]) as store:
    print(store.resolve(sys.argv[2], **{sys.argv[3]: json.loads(sys.argv[4])}))
"""


# -- the store itself ------------------------------------------------------------------------------


def test_it_is_a_run_store(store: RunStore) -> None:
    assert isinstance(store, RunStore)


def test_the_file_is_wal_private_and_survives_reopening(tmp_path: Path, clock: FakeClock) -> None:
    db = tmp_path / "session.db"
    with SqliteRunStore(db, clock=clock) as first:
        first.create_run("r")
        first.save_checkpoint("r", 1, '{"a": 1}')
    assert db.stat().st_mode & 0o777 == 0o600
    with SqliteRunStore(db, clock=clock) as second:
        latest = second.latest_checkpoint("r")
        assert latest is not None and latest.data == '{"a": 1}'
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_opening_a_new_file_waits_for_another_connections_write_lock(tmp_path: Path) -> None:
    """Another connection holds the write lock of a new file (another process opening it too,
    say) when the store switches it to WAL, which SQLite answers busy at once: opening waits
    for the lock, as every statement does, and succeeds once it is released."""
    db = tmp_path / "session.db"
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # the write lock of a new file, not yet in WAL mode
    opened: list[SqliteRunStore | BaseException] = []

    def open_store_there() -> None:
        try:
            opened.append(SqliteRunStore(db, busy_timeout=60))
        except BaseException as exc:
            opened.append(exc)

    opener = threading.Thread(target=open_store_there)
    opener.start()
    try:
        while not waits_for_a_lock(opener):  # nothing to await: its stack is looked at
            assert opener.is_alive(), f"opening did not wait for the lock: {opened}"
            time.sleep(0.001)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        opener.join()
    (store,) = opened
    assert isinstance(store, SqliteRunStore), store
    with store:
        store.create_run("r")
        assert [run.run_id for run in store.runs()] == ["r"]


def waits_for_a_lock(thread: threading.Thread) -> bool:
    """Whether ``thread`` is in the store's wait for another connection's lock."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code.co_name == "_wait_for_lock":
            return True
        frame = frame.f_back
    return False


def test_close_is_idempotent_and_a_closed_store_says_so(db: str) -> None:
    store = open_store(db)
    store.close()
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.create_run()
    assert "closed" in repr(store)


def test_a_sqlite_store_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "session.db"
    SqliteRunStore(db).close()
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA user_version = 99")
    finally:
        conn.close()
    with pytest.raises(RuntimeError, match="schema version 99"):
        SqliteRunStore(db)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="directory"):
        SqliteRunStore(tmp_path)


def test_a_store_in_a_folder_that_does_not_exist_names_the_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError,
                       match=r"its folder '.*/nowhere' does not exist \(create the folder"):
        SqliteRunStore(tmp_path / "nowhere" / "runs.sqlite")
    assert list(tmp_path.iterdir()) == []


def test_without_create_a_missing_store_is_refused_naming_its_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"folder '.*/nowhere' does not exist"):
        SqliteRunStore(tmp_path / "nowhere" / "runs.sqlite", create=False)
    with pytest.raises(FileNotFoundError,
                       match=rf"folder {str(tmp_path)!r} has no file 'runs.sqlite'"):
        SqliteRunStore(tmp_path / "runs.sqlite", create=False)
    assert list(tmp_path.iterdir()) == []


def test_without_create_a_file_that_holds_no_store_is_left_unchanged(tmp_path: Path) -> None:
    foreign = tmp_path / "app.db"
    conn = sqlite3.connect(foreign)
    try:
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.commit()
    finally:
        conn.close()
    before = foreign.read_bytes()
    with pytest.raises(ValueError, match=r"holds no run store.*left unchanged"):
        SqliteRunStore(foreign, create=False)
    assert foreign.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]  # no -wal, no -shm


def test_a_file_that_is_no_sqlite_database_is_refused_by_name(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    for create in (True, False):
        with pytest.raises(ValueError, match=r"notes.txt' is not a run store \(file is "
                                             r"not a database\)"):
            SqliteRunStore(text, create=create)
    assert text.read_text() == "not a database\n" * 100


def test_without_create_an_existing_store_opens(db: str, clock: FakeClock) -> None:
    with open_store(db, clock=clock) as store:
        store.create_run("run-1")
    with open_store(db, create=False) as reopened:
        assert [r.run_id for r in reopened.runs()] == ["run-1"]


# -- runs and checkpoints --------------------------------------------------------------------------


def test_runs_are_created_listed_and_updated(store: RunStore, clock: FakeClock) -> None:
    generated = store.create_run()
    assert len(generated.run_id) == 32 and generated.status == "running"
    with pytest.raises(ValueError, match="already exists"):
        store.create_run("run-1")
    clock.now += 5
    updated = store.set_run_status("run-1", "suspended")
    assert (updated.status, updated.updated_at, updated.created_at) == ("suspended", 1005, 1000)
    assert store.get_run("run-1") == updated
    assert store.get_run("nope") is None
    assert [r.run_id for r in store.runs(status="suspended")] == ["run-1"]
    assert len(store.runs()) == 2
    with pytest.raises(UnknownRunError, match="create_run"):
        store.set_run_status("nope", "x")
    with pytest.raises(ValueError, match="status"):
        store.set_run_status("run-1", "")


def test_leases_are_listed_expired_ones_too(store: RunStore, clock: FakeClock) -> None:
    store.create_run("run-2")
    assert store.leases() == []
    assert store.acquire_lease("run-2", "b:2:t", 10) == Lease("run-2", "b:2:t", 1010, 1)
    assert store.acquire_lease("run-1", "a:1:t", 30) == Lease("run-1", "a:1:t", 1030, 1)
    clock.now += 20
    assert store.leases() == [Lease("run-1", "a:1:t", 1030, 1), Lease("run-2", "b:2:t", 1010, 1)]
    store.release_lease("run-1", "a:1:t")
    assert store.leases() == [Lease("run-2", "b:2:t", 1010, 1)]


def test_checkpoints_keep_history_and_the_latest_wins(
    store: RunStore, clock: FakeClock
) -> None:
    store.save_checkpoint("run-1", 1, '{"at": 1}')
    clock.now += 1
    store.save_checkpoint("run-1", 2, '{"at": 2}', status="waiting")
    store.save_checkpoint("run-1", 2, '{"at": "2b"}')
    latest = store.latest_checkpoint("run-1")
    assert latest is not None and (latest.effect_id, latest.data) == (2, '{"at": "2b"}')
    first = store.checkpoint_at("run-1", 1)
    assert first == SavedCheckpoint(1, "run-1", 1, '{"at": 1}', 1000.0,
                                    first.signature if first else "")
    assert first is not None and first.signature.startswith("tvs1.")
    assert store.checkpoint_at("run-1", 7) is None
    history = [c.data for c in store.checkpoints("run-1")]
    assert history == ['{"at": 1}', '{"at": 2}', '{"at": "2b"}']
    run = store.get_run("run-1")
    assert run is not None and (run.status, run.updated_at) == ("waiting", 1001)
    assert store.latest_checkpoint("other") is None


def test_the_newest_checkpoint_is_found_in_the_index_without_sorting_the_run_s_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every row of a run's checkpoints holds its whole text: sorting them to find the newest
    would read them all, so the newest ``seq`` is looked up in the index first."""
    path = tmp_path / "store.db"
    statements: list[tuple[str, Any]] = []
    with SqliteRunStore(path) as store:
        store.create_run("run-1")
        for effect_id in (1, 2, 2):
            store.save_checkpoint("run-1", effect_id, f'{{"at": {effect_id}}}')
        with store._db.read() as tx:  # type: ignore[attr-defined]
            transaction = type(tx)
        execute = transaction.execute

        def recorded(self: Any, sql: str, params: Any = (), /) -> Any:
            statements.append((sql, params))
            return execute(self, sql, params)

        with monkeypatch.context() as patch:
            patch.setattr(transaction, "execute", recorded)
            newest, at_one = store.latest_checkpoint("run-1"), store.checkpoint_at("run-1", 1)
        assert newest is not None and newest.seq == 3
        assert at_one is not None and at_one.seq == 1
    assert len(statements) == 2
    with contextlib.closing(sqlite3.connect(path)) as plain:
        for sql, params in statements:
            plan = [row[3] for row in plain.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
            assert not any("TEMP B-TREE" in step for step in plan), (sql, plan)


@pytest.mark.parametrize(
    ("run_id", "effect_id", "data", "error", "match"),
    [
        ("nope", 1, "{}", UnknownRunError, "create_run"),
        ("run-1", -1, "{}", ValueError, "effect_id"),
        ("run-1", True, "{}", ValueError, "effect_id"),
        ("run-1", 1, {"a": 1}, TypeError, "model_dump_json"),
        ("run-1", 1, "{not json", ValueError, "not valid JSON"),
    ],
)
def test_bad_checkpoints_are_refused(
    store: RunStore, run_id: str, effect_id: Any, data: Any, error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        store.save_checkpoint(run_id, effect_id, data)
    assert store.checkpoints("run-1") == []


# -- completion keys and resolution ----------------------------------------------------------------


def test_issue_is_idempotent_per_call_and_purpose(store: RunStore) -> None:
    key = store.issue_key("run-1", "call-1")
    assert store.issue_key("run-1", "call-1") == key
    others = {
        store.issue_key("run-1", "call-2"),
        store.issue_key("run-1", "call-1", purpose="event", name="a"),
        store.issue_key("run-1", "call-1", purpose="event", name="b"),
    }
    assert key not in others and len(others) == 3
    with pytest.raises(UnknownRunError):
        store.issue_key("nope", "call-1")
    with pytest.raises(ValueError, match="call_id"):
        store.issue_key("run-1", "")
    with pytest.raises(ValueError, match="purpose"):
        store.issue_key("run-1", "c", purpose="other")  # type: ignore[arg-type]


def test_first_resolution_wins_and_later_ones_change_nothing(store: RunStore) -> None:
    key = store.issue_key("run-1", "call-1")
    assert store.resolution(key) is None
    assert store.resolve(key, ok={"n": 1}) == "accepted"
    assert store.resolve(key, ok={"n": 2}) == "already_resolved"
    assert store.resolve(key, error="late") == "already_resolved"
    assert store.resolution(key) == Resolution("ok", {"n": 1}, 1000.0)


def test_null_is_a_legal_ok_value_and_errors_are_kept(store: RunStore) -> None:
    ok_key = store.issue_key("run-1", "call-1")
    error_key = store.issue_key("run-1", "call-2")
    assert store.resolve(ok_key, ok=None) == "accepted"
    assert store.resolve(error_key, error={"reason": "denied"}) == "accepted"
    assert store.resolution(ok_key) == Resolution("ok", None, 1000.0)
    assert store.resolution(error_key) == Resolution("error", {"reason": "denied"}, 1000.0)


def test_resolve_needs_exactly_one_json_value(store: RunStore) -> None:
    key = store.issue_key("run-1", "call-1")
    with pytest.raises(TypeError, match="exactly one"):
        store.resolve(key)
    with pytest.raises(TypeError, match="exactly one"):
        store.resolve(key, ok=1, error=2)
    with pytest.raises(TypeError, match="JSON"):
        store.resolve(key, ok={1, 2})
    with pytest.raises(TypeError, match="JSON"):
        store.resolve(key, ok=float("nan"))
    with pytest.raises(TypeError, match="str"):
        store.resolve(b"key", ok=1)  # type: ignore[arg-type]
    assert store.resolution(key) is None


def test_a_revoked_key_is_refused(store: RunStore) -> None:
    key = store.issue_key("run-1", "call-1")
    assert store.revoke(key) is True
    assert store.revoke(key) is False
    assert store.resolve(key, ok=1) == "unknown_or_revoked"
    with pytest.raises(ValueError, match="revoked"):
        store.park(key, deadline_at=None)
    resolved = store.issue_key("run-1", "call-2")
    store.resolve(resolved, ok=1)
    assert store.revoke(resolved) is False


def test_an_early_resolution_is_delivered_when_the_run_parks(store: RunStore) -> None:
    key = store.issue_key("run-1", "call-1")
    assert store.resolve(key, ok="early") == "accepted"
    wait = store.park(key, deadline_at=2000.0, on_timeout="fail_turn")
    assert wait.resolution == Resolution("ok", "early", 1000.0)
    assert store.wait_for(key, timeout=0) == wait.resolution
    assert store.open_waits() == []


def test_parking_again_keeps_the_first_park(store: RunStore, clock: FakeClock) -> None:
    key = store.issue_key("run-1", "call-1")
    first = store.park(key, deadline_at=1010.0, on_cancel="cancel_external_work")
    clock.now += 100
    again = store.park(key, deadline_at=5000.0)
    assert again == first
    assert store.open_waits("run-1") == [first]
    assert store.open_waits("other") == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"deadline_at": float("inf")}, "deadline_at"),
        ({"deadline_at": "soon"}, "deadline_at"),
        ({"deadline_at": None, "on_timeout": "explode"}, "on_timeout"),
        ({"deadline_at": None, "on_cancel": "explode"}, "on_cancel"),
    ],
)
def test_bad_parks_are_refused(store: RunStore, kwargs: Any, match: str) -> None:
    key = store.issue_key("run-1", "call-1")
    with pytest.raises(ValueError, match=match):
        store.park(key, **kwargs)
    assert store.open_waits() == []


def test_wait_for_wakes_on_a_same_process_resolution(store: RunStore) -> None:
    key = store.issue_key("run-1", "call-1")
    store.park(key, deadline_at=None)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(store.wait_for, key, 30)
        assert store.resolve(key, ok=[1, 2]) == "accepted"
        assert waiting.result() == Resolution("ok", [1, 2], 1000.0)


def test_wait_for_gives_up_after_its_timeout(store: RunStore) -> None:
    key = store.issue_key("run-1", "call-1")
    assert store.wait_for(key, timeout=0.01) is None


def test_a_key_resolved_from_another_process_wakes_the_waiter(
    store: RunStore, db: str
) -> None:
    key = store.issue_key("run-1", "call-1")
    store.park(key, deadline_at=None)
    with subprocess.Popen(
        [sys.executable, "-c", RESOLVE_IN_CHILD, str(db), key, "ok", '{"from": "child"}'],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        resolution = store.wait_for(key, timeout=60)
        out, _ = child.communicate(timeout=60)
    assert out.strip() == "accepted"
    assert resolution is not None and resolution.value == {"from": "child"}
    again = python(RESOLVE_IN_CHILD, str(db), key, "error", '"late"')
    assert again.stdout.strip() == "already_resolved", again.stderr


def test_racing_resolvers_in_threads_have_exactly_one_winner(db: str) -> None:
    with open_store(db) as setup:
        setup.create_run("r")
        keys = [setup.issue_key("r", f"call-{i}") for i in range(3)]
    racers = 6
    for key in keys:
        start = threading.Barrier(racers)

        def race(value: int, key: str = key, start: threading.Barrier = start) -> str:
            with open_store(db) as own:  # each racer its own connection
                start.wait()
                return own.resolve(key, ok=value)

        with ThreadPoolExecutor(racers) as pool:
            outcomes = list(pool.map(race, range(racers)))
        assert sorted(outcomes) == ["accepted"] + ["already_resolved"] * (racers - 1)
        with open_store(db) as check:
            resolution = check.resolution(key)
        assert resolution is not None and resolution.value == outcomes.index("accepted")


def test_a_racing_resolver_and_expiry_have_exactly_one_winner(db: str) -> None:
    with open_store(db, clock=FakeClock()) as setup:
        setup.create_run("r")
        keys = [setup.issue_key("r", f"call-{i}") for i in range(5)]
        for due, key in enumerate(keys):
            setup.park(key, deadline_at=float(due))
    with open_store(db) as resolver, open_store(db) as expirer:
        for due, key in enumerate(keys):
            start = threading.Barrier(2)

            def resolve(key: str = key, start: threading.Barrier = start) -> str:
                start.wait()
                return resolver.resolve(key, ok="won")

            def expire(now: float = float(due), start: threading.Barrier = start) -> list[str]:
                start.wait()
                return [wait.key for wait in expirer.expire_due(now)]

            with ThreadPoolExecutor(2) as pool:
                resolved, expired = pool.submit(resolve), pool.submit(expire)
                outcome, expired_keys = resolved.result(), expired.result()
            resolution = resolver.resolution(key)
            assert resolution is not None
            if outcome == "accepted":
                assert expired_keys == [] and resolution.kind == "ok"
            else:
                assert outcome == "already_resolved"
                assert expired_keys == [key] and resolution.kind == "timeout"


# -- expiry and cancellation -----------------------------------------------------------------------


def test_expiry_resolves_due_waits_and_records_on_timeout(
    store: RunStore, clock: FakeClock
) -> None:
    soft = store.issue_key("run-1", "soft")
    hard = store.issue_key("run-1", "hard")
    later = store.issue_key("run-1", "later")
    never = store.issue_key("run-1", "never")
    store.park(soft, deadline_at=1010.0, on_timeout="error_as_result")
    store.park(hard, deadline_at=1010.0, on_timeout="fail_turn")
    store.park(later, deadline_at=1020.0)
    store.park(never, deadline_at=None)
    assert store.expire_due(1009.0) == []
    expired = store.expire_due(1010.0)
    assert {(w.call_id, w.on_timeout) for w in expired} == {
        ("soft", "error_as_result"),
        ("hard", "fail_turn"),
    }
    for wait in expired:
        assert wait.resolution == Resolution("timeout", {"on_timeout": wait.on_timeout}, 1010.0)
        assert store.resolution(wait.key) == wait.resolution
    assert store.resolution(hard) == Resolution("timeout", {"on_timeout": "fail_turn"}, 1010.0)
    assert store.resolve(soft, ok="too late") == "already_resolved"
    assert store.expire_due(1010.0) == []
    assert [w.call_id for w in store.expire_due(10**9)] == ["later"]
    assert [w.call_id for w in store.open_waits()] == ["never"]


def test_expire_one_key_lets_an_earlier_resolution_win(store: RunStore) -> None:
    resolved = store.issue_key("run-1", "call-1")
    open_key = store.issue_key("run-1", "call-2")
    store.park(open_key, deadline_at=1.0, on_timeout="fail_turn")
    store.resolve(resolved, ok="first")
    assert store.expire(resolved, 2000.0) == Resolution("ok", "first", 1000.0)
    assert store.expire(open_key, 2000.0) == Resolution(
        "timeout", {"on_timeout": "fail_turn"}, 2000.0
    )


def test_cancel_run_resolves_its_open_keys_and_reports_external_work(
    store: RunStore, clock: FakeClock
) -> None:
    store.create_run("run-2")
    external = store.issue_key("run-1", "external")
    ignored = store.issue_key("run-1", "ignored")
    unparked = store.issue_key("run-1", "unparked")
    done = store.issue_key("run-1", "done")
    elsewhere = store.issue_key("run-2", "elsewhere")
    store.park(external, deadline_at=None, on_cancel="cancel_external_work")
    store.park(ignored, deadline_at=None, on_cancel="ignore")
    store.park(elsewhere, deadline_at=None, on_cancel="cancel_external_work")
    store.resolve(done, ok="finished")
    clock.now += 1
    cancelled = store.cancel_run("run-1")
    assert [(w.call_id, w.needs_external_cancel) for w in cancelled] == [
        ("external", True),
        ("ignored", False),
    ]
    assert store.resolution(external) == Resolution(
        "cancelled", {"on_cancel": "cancel_external_work"}, 1001.0
    )
    assert store.resolution(ignored) == Resolution("cancelled", {"on_cancel": "ignore"}, 1001.0)
    assert store.resolution(unparked) == Resolution("cancelled", None, 1001.0)
    assert store.resolution(done) == Resolution("ok", "finished", 1000.0)
    assert store.resolve(unparked, ok=1) == "already_resolved"
    assert store.resolution(elsewhere) is None
    run = store.get_run("run-1")
    assert run is not None and run.status == "cancelled"
    assert store.cancel_run("run-1") == []
    with pytest.raises(UnknownRunError):
        store.cancel_run("nope")


# -- atomicity -------------------------------------------------------------------------------------


class Interrupted(Exception):
    """What the interrupted statement raises."""


def interrupt_at(store: RunStore, statement_prefix: str,
                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the store's transactions fail (``Interrupted``) when they run ``statement_prefix``,
    before the database sees it: whatever the transaction wrote before must roll back."""
    with store._db.read() as tx:  # type: ignore[attr-defined]
        transaction = type(tx)
    execute = transaction.execute

    def interrupted(self: Any, sql: str, params: Any = (), /) -> Any:
        if sql.startswith(statement_prefix):
            raise Interrupted(sql)
        return execute(self, sql, params)

    monkeypatch.setattr(transaction, "execute", interrupted)


def test_an_exception_between_two_writes_rolls_back_the_first(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.save_checkpoint("run-1", 1, '{"at": 1}')
    with monkeypatch.context() as patch:
        interrupt_at(store, "UPDATE runs", patch)
        with pytest.raises(Interrupted):
            store.save_checkpoint("run-1", 2, '{"at": 2}', status="waiting")
    assert [c.effect_id for c in store.checkpoints("run-1")] == [1]
    run = store.get_run("run-1")
    assert run is not None and run.status == "running"
    store.save_checkpoint("run-1", 2, '{"at": 2}', status="waiting")  # still writable
    assert [c.effect_id for c in store.checkpoints("run-1")] == [1, 2]


CRASH_IN_CHILD = """
import os, sys
from toolvisor.durable import open_store
store = open_store(sys.argv[1])
with store._db.read() as tx:
    transaction = type(tx)
execute = transaction.execute
def crash(self, sql, params=(), /):
    if sql.startswith("UPDATE runs"):
        os._exit(17)  # mid-transaction: its earlier writes were sent, not committed
    return execute(self, sql, params)
transaction.execute = crash
if sys.argv[2] == "checkpoint":
    store.save_checkpoint("run-1", 2, '{"at": 2}', status="waiting")
else:
    store.cancel_run("run-1")
"""


@pytest.mark.parametrize("operation", ["checkpoint", "cancel"])
def test_a_process_killed_between_two_writes_leaves_the_run_resumable(
    store: RunStore, db: str, operation: str
) -> None:
    store.save_checkpoint("run-1", 1, '{"at": 1}')
    key = store.issue_key("run-1", "call-1")
    store.park(key, deadline_at=None, on_cancel="cancel_external_work")
    crashed = python(CRASH_IN_CHILD, db, operation)
    assert crashed.returncode == 17, crashed.stderr
    with open_store(db) as after:
        latest = after.latest_checkpoint("run-1")
        assert latest is not None and latest.effect_id == 1
        assert after.resolution(key) is None
        run = after.get_run("run-1")
        assert run is not None and run.status == "running"
        assert [w.key for w in after.cancel_run("run-1")] == [key]  # the lock was released


# -- the shared SQL layer --------------------------------------------------------------------------

DURABLE = Path(__file__).resolve().parents[2] / "toolvisor" / "durable"
SHARED_SQL = ["_sql.py", "_rows.py", "_run_tables.py", "_lease_table.py", "_key_tables.py"]
SQLITE_ONLY = ["sqlite3", "OR IGNORE", "OR REPLACE", "rowid", "PRAGMA", "lastrowid",
               "AUTOINCREMENT"]


@pytest.mark.parametrize("module", SHARED_SQL)
def test_the_table_logic_names_no_sqlite_dialect(module: str) -> None:
    """The tables another store backend reuses speak portable SQL; SQLite's own words stay in
    its connection and schema."""
    text = (DURABLE / module).read_text()
    assert [word for word in SQLITE_ONLY if word in text] == []
