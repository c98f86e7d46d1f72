"""What is PostgreSQL's own in a store: its URL, its server, its schema, its driver.

The behaviour a store shares with SQLite is tested on both in ``test_store`` and the others
that take ``store_target``; these tests use the session's real server (``postgres_server``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.support.postgres import PostgresServer, behind_the_store
from toolvisor.durable import PostgresRunStore, SqliteRunStore, open_store
from toolvisor.durable._sql import lock_run

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    """A local TCP port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_open_store_opens_each_backend_by_its_target(
        postgres_server: PostgresServer, tmp_path: Path) -> None:
    with open_store(postgres_server.fresh_url()) as remote:
        assert isinstance(remote, PostgresRunStore)
        assert "postgresql://" in repr(remote) and "open" in repr(remote)
    assert "closed" in repr(remote)
    with open_store(tmp_path / "runs.sqlite") as local:
        assert isinstance(local, SqliteRunStore)
    with pytest.raises(ValueError, match=r"no run store for mysql:// URLs.*postgresql://"):
        open_store("mysql://db/runs")
    with pytest.raises(TypeError, match="a SQLite file's path or a postgresql:// URL, got int"):
        open_store(3)  # type: ignore[arg-type]


def test_a_url_psycopg_cannot_read_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"'postgresql://a b' is not a PostgreSQL URL .*"
                                         r"give postgresql://user:password@host"):
        PostgresRunStore("postgresql://a b")


def test_a_server_that_cannot_be_reached_is_named_without_its_password() -> None:
    url = f"postgresql://toolvisor:s3cret@127.0.0.1:{closed_port()}/runs"
    with pytest.raises(ConnectionError, match=r"cannot open the PostgreSQL run store "
                                              r"'postgresql://toolvisor:\*\*\*@127\.0\.0\.1.*"
                                              r"refused") as refused:
        open_store(url, create=False)
    assert "s3cret" not in str(refused.value)


def test_a_database_that_does_not_exist_is_named(postgres_server: PostgresServer) -> None:
    url = postgres_server.url.replace("/postgres?", "/nowhere?")
    with pytest.raises(ConnectionError, match='database "nowhere" does not exist'):
        open_store(url)


def test_without_create_a_schema_that_holds_no_store_is_left_unchanged(
        postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh_url()
    with pytest.raises(ValueError, match=r"holds no run store.*left unchanged"):
        open_store(url, create=False)
    with pytest.raises(ValueError, match="holds no run store"):  # still nothing there
        open_store(url, create=False)
    with open_store(url) as created:
        created.create_run("r")
    with open_store(url, create=False) as reopened:
        assert [run.run_id for run in reopened.runs()] == ["r"]


def test_a_store_from_a_newer_schema_is_refused(postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh_url()
    open_store(url).close()
    behind_the_store(url, "UPDATE meta SET value = '99' WHERE name = 'schema_version'")
    with pytest.raises(RuntimeError, match="schema version 99; this toolvisor reads version"):
        open_store(url)


def test_a_schema_that_does_not_exist_is_named_and_not_created(
        postgres_server: PostgresServer) -> None:
    url = f"{postgres_server.url}&options=-csearch_path%3Dnowhere"
    with pytest.raises(ValueError, match=r"names no schema that exists.*create the schema"):
        open_store(url)
    with pytest.raises(ValueError, match="names no schema that exists"):  # still none
        open_store(url)


def test_a_write_waits_only_for_a_write_of_its_own_run_and_at_most_its_busy_timeout(
        postgres_server: PostgresServer) -> None:
    url = postgres_server.fresh_url()
    with open_store(url) as holder, PostgresRunStore(url, busy_timeout=0.1) as waiter:
        holder.create_run("r", status="queued")
        holder.save_checkpoint("r", 0, "{}")  # runnable: submitted, no host
        key = holder.issue_key("r", "c")
        waiter.create_run("s")
        with holder._db.write() as tx:  # a writer of run r, paused in its transaction
            lock_run(tx, holder._db.dialect, "r")
            with pytest.raises(psycopg.errors.LockNotAvailable, match="lock timeout"):
                waiter.save_checkpoint("r", 1, "{}")
            # what another run's host writes, and a resolution from anywhere, do not wait
            waiter.create_run("t")
            waiter.acquire_lease("s", "other-host", 30.0)
            waiter.save_checkpoint("s", 1, "{}", fence=waiter.leases()[0].token)
            waiter.record_step("s", "c", "0", "{}", "{}")
            assert waiter.claim_runs("other-host", 30.0, 10) == []  # r's row is passed over
            assert waiter.resolve(key, ok=1) == "accepted"
            assert waiter.get_run("r") is not None  # reads do not wait
        waiter.save_checkpoint("r", 1, "{}")  # the lock was let go
        assert [lease.run_id for lease in waiter.claim_runs("other-host", 30.0, 10)] == ["r"]
    with pytest.raises(ValueError, match="busy_timeout must be a positive"):
        PostgresRunStore(url, busy_timeout=0)


def test_stores_in_two_schemas_of_one_database_are_apart(
        postgres_server: PostgresServer) -> None:
    with open_store(postgres_server.fresh_url()) as one, \
            open_store(postgres_server.fresh_url()) as two:
        one.create_run("r")
        assert two.get_run("r") is None
        assert one.issue_key("r", "c") and two.runs() == []


def test_without_psycopg_the_error_says_what_to_install() -> None:
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from toolvisor.durable import open_store\n"
            "open_store('postgresql://localhost/runs')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert ("ImportError: a PostgreSQL run store needs psycopg 3, which is not installed: "
            "pip install '.[postgres]' in toolvisor's clone") in done.stderr


def test_the_command_line_names_a_server_it_cannot_reach() -> None:
    url = f"postgresql://toolvisor:s3cret@127.0.0.1:{closed_port()}/runs"
    done = subprocess.run([sys.executable, "-m", "toolvisor.cli", "runs", "--store", url],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("error: cannot open the PostgreSQL run store "
                                  "'postgresql://toolvisor:***@127.0.0.1")
    assert "s3cret" not in done.stderr and "Traceback" not in done.stderr
