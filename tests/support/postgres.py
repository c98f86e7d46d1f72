"""A real PostgreSQL server for the test session (the ``pgserver`` wheel), one schema per test.

A test module that stops and starts a server (``PostgresServer.stop``, ``start``) makes one of
its own: the session's is shared by every other test.

The server starts once, in a folder of its own, and is stopped and its folder deleted when the
session ends. The folder is not under pytest's tmp folder, which pytest keeps private to the
user running the tests: run as root, the server runs as a user of its own (pgserver's). Each
test's store lives in a fresh schema of its own (a URL whose ``search_path`` names it), which
costs one ``CREATE SCHEMA``, not a database.
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
import subprocess
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg


class PostgresServer:
    """The session's server and an admin connection to it (the session's, not a test's)."""

    def __init__(self) -> None:
        data = Path(tempfile.mkdtemp(prefix="toolvisor-postgres-"))
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import pgserver  # noqa: PLC0415

            self._server: Any = pgserver.get_server(data, cleanup_mode="delete")
        self.url: str = self._server.get_uri()
        self._admin: psycopg.Connection[Any] | None = psycopg.connect(self.url, autocommit=True)
        self._schemas = itertools.count(1)
        self.stopped = False

    def fresh_url(self) -> str:
        """The URL of a new, empty schema of its own."""
        schema = f"test_{next(self._schemas)}"
        self._admin_execute(f"CREATE SCHEMA {schema}")
        return f"{self.url}&options=-csearch_path%3D{schema}"

    def kill_connections(self) -> int:
        """Terminate every client connection to the server but the admin's
        (``pg_terminate_backend``, as a DBA or a failover does); how many there were."""
        return len(self._admin_execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> "
            "pg_backend_pid() AND backend_type = 'client backend'"))

    def _admin_execute(self, sql: str) -> list[Any]:
        """``sql``'s rows, on the admin connection (on a connection of its own once the
        server was restarted: one opened during a test would outlive it)."""
        if self._admin is None:
            with self.connect() as conn:
                cursor = conn.execute(sql.encode())
                return cursor.fetchall() if cursor.description else []
        cursor = self._admin.execute(sql.encode())
        return cursor.fetchall() if cursor.description else []

    def stop(self) -> None:
        """Stop the server (``pg_ctl stop -m fast``: connections are dropped), closing the
        admin connection first."""
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        self.stopped = True
        subprocess.run([str(Path(pgserver_bin()) / "pg_ctl"), "-D", str(self._server.pgdata),
                        "-w", "-m", "fast", "stop"], check=True, capture_output=True,
                       user=self._server.system_user, timeout=60)

    def start(self) -> None:
        """Start the stopped server again, on the same folder and socket (so the same URL)."""
        self._server.ensure_postgres_running()
        self.stopped = False

    def connect(self) -> psycopg.Connection[Any]:
        """A connection of its own to the server: another process's, as the store sees it."""
        return psycopg.connect(self.url, autocommit=True)

    def close(self) -> None:
        """Close the admin connection, then stop the server and delete its files."""
        if self._admin is not None:
            self._admin.close()
        self._server.cleanup()


def pgserver_bin() -> str:
    """The folder of the PostgreSQL programs the ``pgserver`` wheel ships (``pg_ctl``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver  # noqa: PLC0415

    return str(Path(pgserver.__file__).parent / "pginstall" / "bin")


class StoreTargets:
    """Places for new, empty stores of one backend (``"sqlite"`` or ``"postgres"``): each
    :meth:`fresh` one is a SQLite file's path or a PostgreSQL URL of its own."""

    def __init__(self, backend: str, make: Callable[[int], str]) -> None:
        self.backend = backend
        self._make = make
        self._made = itertools.count(1)

    def fresh(self) -> str:
        return self._make(next(self._made))


def behind_the_store(target: str, sql: str) -> None:
    """Run ``sql`` on the store at ``target`` with the database's own client, not the store's:
    what someone who edits the data behind its back does."""
    if target.startswith("postgresql://"):
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(sql.encode())
        return
    with contextlib.closing(sqlite3.connect(target)) as db, db:
        db.execute(sql)


def set_version(target: str, version: int) -> None:
    """Mark the store at ``target`` as of schema ``version``, where each backend keeps it."""
    if target.startswith("postgresql://"):
        behind_the_store(target, f"UPDATE meta SET value = '{version}' "
                                 "WHERE name = 'schema_version'")
    else:
        behind_the_store(target, f"PRAGMA user_version = {version}")
