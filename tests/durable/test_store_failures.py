"""When the store itself fails: a full disk or a refused write ends the run at once, naming the
store, and the run resumes once the store takes writes again; a damaged or read-only store is
named in one line by every command (exit 2) and by the agent, which write nothing to it.

Real parts: a small tmpfs filled to the last byte, a read-only bind mount, a store file whose
last quarter is overwritten, the real CLI in subprocesses, and on PostgreSQL the session's
server refusing writes (a trigger raising the server's own SQLSTATE for a full disk or a
read-only transaction, and a session whose transactions are read-only by default, as a
standby's are). Mounting needs root, as `make test` runs in CI: without it those tests fail,
saying so (none skips).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.postgres import PostgresServer, behind_the_store, set_version
from toolvisor import Agent, CallContext, Completed, Durability, Failed, Ok, Tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.durable import SqliteRunStore, StoreError, open_store
from toolvisor.testing import FunctionModel, call, calls

ROOT = Path(__file__).resolve().parents[2]
WORKER_APP = "tests.programs.worker_app:make_agent"


def clis(*commands: list[Any]) -> list[subprocess.CompletedProcess[str]]:
    """Run each command line of the CLI in a subprocess of its own, all at once."""
    started = [subprocess.Popen([sys.executable, "-m", "toolvisor.cli", *map(str, args)],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for args in commands]
    done = []
    for process in started:
        out, err = process.communicate(timeout=60)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return done


def named_in_one_line(done: subprocess.CompletedProcess[str], store: str, what: str) -> None:
    """The command failed with exit 2 and one line naming the store and what is wrong."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"error: run store {store!r} {what} ("), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, timeout=30)


def umount(folder: Path) -> None:
    subprocess.run(["umount", str(folder)], check=True, capture_output=True, timeout=30)


def require_mounts() -> None:
    if os.geteuid() != 0:
        pytest.fail("these tests mount a 1 MiB tmpfs and a read-only bind, which needs root: "
                    "run make test as root (as CI does)")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a 1 MiB tmpfs of its own, unmounted after the test."""
    require_mounts()
    folder = tmp_path / "disk"
    folder.mkdir()
    mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder))
    yield folder
    umount(folder)


@pytest.fixture
def read_only_view(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A folder and the same folder seen through a read-only bind mount (root cannot write
    there either, unlike a folder chmod-ed 0555)."""
    require_mounts()
    folder, view = tmp_path / "folder", tmp_path / "view"
    folder.mkdir()
    view.mkdir()
    mount("--bind", str(folder), str(view))
    try:
        mount("-o", "remount,bind,ro", str(view))
        yield folder, view
    finally:
        umount(view)


def fill(folder: Path) -> None:
    """Write a file in ``folder`` until its disk has not a byte left."""
    with (folder / "filler").open("wb") as filler:
        try:
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        except OSError:
            pass  # ENOSPC: the disk is full; closing flushes nothing more


def counted(counts: Path, name: str) -> None:
    with counts.open("a") as file:
        file.write(f"{name}\n")


def tools(counts: Path, fill_store: Any) -> list[Tool]:
    """``pay`` counts itself; ``fill`` counts itself and, the first time, fills the store's
    disk (``fill_store``), so the checkpoint of its result is the write that is refused."""
    def pay(arguments: dict[str, Any]) -> Ok:
        counted(counts, "pay")
        return Ok("paid")

    def filling(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        counted(counts, "fill")
        if counts.read_text().count("fill") == 1:
            fill_store()
        return Ok("filled")

    return [Tool("pay", handler=pay), Tool("fill", handler=filling)]


def respond(request: ModelRequest) -> ModelResponse:
    """Turn 1 calls ``pay``, turn 2 ``fill``, turn 3 answers."""
    results = sum(isinstance(m, ToolResultMessage) for m in request.messages)
    if results < 2:
        return calls(call(("pay", "fill")[results], {}, id=f"c{results + 1}"))
    return ModelResponse(text="done")


def stopped_by_the_store(agent: Agent, store: str, what: str) -> Failed:
    """Run the script; the run ends at once, failed with the store's one line."""
    started = time.monotonic()
    outcome = agent.run("go", wait_for=20)
    assert time.monotonic() - started < 10
    assert isinstance(outcome, Failed), outcome
    assert outcome.error.startswith(f"run store {store!r} {what} ("), outcome.error
    assert f"resume it (agent.resume_run({outcome.run_id!r}))" in outcome.error
    return outcome


def resumed_without_rerunning(target: str, run_id: str, counts: Path) -> None:
    """Another agent resumes the run and no call runs again: ``pay``'s result was saved;
    ``fill``'s was not, and a call that is not retryable is not run twice (the model is told
    it was interrupted)."""
    with Agent(FunctionModel(respond), tools(counts, lambda: None), store=target) as again:
        outcome = again.resume_run(run_id, wait_for=20)
    assert isinstance(outcome, Completed), outcome
    assert outcome.text == "done"
    assert counts.read_text().split() == ["pay", "fill"]


@pytest.mark.parametrize("released_by", ["renewal", "close"])
def test_a_full_disk_ends_the_run_naming_the_store_and_it_resumes_once_there_is_room(
        small_disk: Path, tmp_path: Path, released_by: str) -> None:
    path = str(small_disk / "runs.sqlite")
    counts = tmp_path / "counts"
    counts.touch()
    ttl = 0.6 if released_by == "renewal" else 30  # renewal ticks every third of it
    agent = Agent(FunctionModel(respond), tools(counts, lambda: fill(small_disk)),
                  durability=Durability(store=path, lease_ttl=ttl))
    try:
        outcome = stopped_by_the_store(agent, path, "is full")
        assert "database or disk is full" in outcome.error
        store = agent.store
        assert store is not None
        with pytest.raises(StoreError) as refused:  # the disk is still full
            store.create_run()
        assert refused.value.problem == "full"
        assert [lease.run_id for lease in store.leases()] == [outcome.run_id]
        (small_disk / "filler").unlink()
        if released_by == "renewal":  # the next tick releases it: no row left, not expired
            deadline = time.monotonic() + 10
            while store.leases() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert store.leases() == []
    finally:
        agent.close()  # releases it ("close"), the full disk kept it from releasing
    with open_store(path, read_only=True) as reader:
        assert reader.leases() == []
        assert reader.get_run(outcome.run_id).status == "running"  # type: ignore[union-attr]
    resumed_without_rerunning(path, outcome.run_id, counts)


@pytest.mark.parametrize(("errcode", "what"), [("disk_full", "is full"),
                                               ("read_only_sql_transaction", "is read-only")])
def test_a_write_postgres_refuses_ends_the_run_naming_the_store_and_it_resumes_after(
        postgres_server: PostgresServer, tmp_path: Path, errcode: str, what: str) -> None:
    url = postgres_server.fresh_url()
    schema = url.rpartition("%3D")[2]
    refuse = (f"CREATE FUNCTION {schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
              f"RAISE EXCEPTION USING ERRCODE = '{errcode}', MESSAGE = 'refused by the test'; "
              f"END $$; CREATE TRIGGER refuse BEFORE INSERT ON {schema}.checkpoints "
              f"FOR EACH ROW EXECUTE FUNCTION {schema}.refuse()")

    def behind(sql: str) -> None:
        with psycopg.connect(postgres_server.url, autocommit=True) as conn:
            conn.execute(sql.encode())

    counts = tmp_path / "counts"
    counts.touch()
    with Agent(FunctionModel(respond), tools(counts, lambda: behind(refuse)),
               store=url) as agent:
        outcome = stopped_by_the_store(agent, agent.store.path, what)  # type: ignore[union-attr]
        assert "refused by the test" in outcome.error
        assert agent.store.leases() == []  # type: ignore[union-attr]
    behind(f"DROP TRIGGER refuse ON {schema}.checkpoints")
    resumed_without_rerunning(url, outcome.run_id, counts)


def test_a_read_only_postgres_store_is_read_by_runs_and_named_by_the_agent(
        postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh_url()
    with open_store(url) as store:
        store.create_run("r1", status="completed")
    standby = f"{url}%20-cdefault_transaction_read_only%3Don"  # writes refused, as a standby's
    [listed] = clis(["runs", "--store", standby])
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split()[:3] == ["r1", "-", "completed"]
    with pytest.raises(StoreError) as refused:
        Agent(FunctionModel(respond), [], store=standby)
    assert refused.value.problem == "read_only"
    assert str(refused.value).startswith(f"run store {refused.value.store!r} is read-only")


def damaged_store(folder: Path) -> Path:
    """A store with a few runs whose big checkpoints fill many pages, its last quarter
    overwritten."""
    path = folder / "runs.sqlite"
    with SqliteRunStore(path) as store:
        for n in range(8):
            store.create_run(f"r{n}")
            store.save_checkpoint(f"r{n}", 1, json.dumps({"pad": "x" * 20_000}))
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.seek(size - size // 4)
        file.write(b"\xa5" * (size // 4))
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_damaged_store_is_named_by_every_command_and_the_agent_writes_nothing_to_it(
        tmp_path: Path) -> None:
    path = damaged_store(tmp_path)
    before = digest(path)
    for done in clis(["runs", "--store", path], ["resolve", "--store", path, "key", "--ok", "1"],
                     ["worker", "--store", path, WORKER_APP]):
        named_in_one_line(done, str(path), "is damaged")
    with pytest.raises(StoreError) as refused:
        Agent(FunctionModel(respond), [], store=str(path))
    assert refused.value.problem == "damaged"
    assert str(refused.value).startswith(f"run store {str(path)!r} is damaged (")
    assert f"{str(path)!r} is damaged ()" not in str(refused.value)  # SQLite's own words
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.sqlite"]


def test_a_read_only_store_is_read_by_runs_and_waits_and_named_by_what_writes(
        read_only_view: tuple[Path, Path]) -> None:
    folder, view = read_only_view
    with SqliteRunStore(folder / "runs.sqlite") as store:
        store.create_run("r1", status="suspended")
        store.park(store.issue_key("r1", "c1"), deadline_at=None)
    path = view / "runs.sqlite"
    listed, waits, worker = clis(["runs", "--store", path], ["waits", "--store", path],
                                 ["worker", "--store", path, WORKER_APP])
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split()[:3] == ["r1", "-", "suspended"]
    assert listed.stdout.splitlines()[1].split()[-1] == "c1"
    assert waits.returncode == 0, waits.stderr
    assert '"call_id": "c1"' in waits.stdout
    named_in_one_line(worker, str(path), "is read-only")
    with pytest.raises(StoreError) as refused:
        Agent(FunctionModel(respond), [], store=str(path))
    assert refused.value.problem == "read_only"
    with pytest.raises(StoreError) as new:
        Agent(FunctionModel(respond), [], store=str(view / "new.sqlite"))
    assert str(new.value).startswith(f"run store {str(view / 'new.sqlite')!r} is read-only")


def test_a_read_only_open_of_an_older_store_is_refused_and_leaves_it_unchanged(
        store_target: str) -> None:
    with open_store(store_target) as store:
        store.create_run("r")
    for statement in ("ALTER TABLE leases DROP COLUMN token", "ALTER TABLE runs DROP COLUMN fence",
                      "ALTER TABLE runs DROP COLUMN agent",
                      "ALTER TABLE runs DROP COLUMN parent_run_id"):
        behind_the_store(store_target, statement)
    set_version(store_target, 2)  # as toolvisor before fencing left it
    for _ in range(2):  # the first refusal migrated nothing: the second sees version 2 too
        with pytest.raises(ValueError, match="has schema version 2; this toolvisor reads "
                                             "version 4"):
            open_store(store_target, read_only=True)
    with open_store(store_target) as store:  # an open that may write migrates it
        assert [run.run_id for run in store.runs()] == ["r"]
    with open_store(store_target, read_only=True) as store:
        assert [run.run_id for run in store.runs()] == ["r"]
