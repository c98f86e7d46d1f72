"""A real PostgreSQL server for the test session (the ``pgserver`` wheel), one schema per test.

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
        self._admin = psycopg.connect(self.url, autocommit=True)
        self._schemas = itertools.count(1)

    def fresh_url(self) -> str:
        """The URL of a new, empty schema of its own."""
        schema = f"test_{next(self._schemas)}"
        self._admin.execute(f"CREATE SCHEMA {schema}")
        return f"{self.url}&options=-csearch_path%3D{schema}"

    def close(self) -> None:
        """Close the admin connection, then stop the server and delete its files."""
        self._admin.close()
        self._server.cleanup()


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
