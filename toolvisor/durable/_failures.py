"""``StoreError``: the store itself failed (full, read-only, damaged), named in one line.

A store's database errors that say something is wrong with the store rather than with the
request are turned into :class:`StoreError` where the connection is used (``Guarded``), by the
backend's reader of its driver's errors: :func:`sqlite_failure` or :func:`postgres_failure`.
Every other error passes through unchanged.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Literal, TypeAlias

from toolvisor.contract import ToolvisorError

StoreProblem: TypeAlias = Literal["full", "read_only", "damaged", "io_error"]

_SAID: dict[StoreProblem, tuple[str, str]] = {  # what is wrong, what to do
    "full": ("is full", "free space on its disk (on PostgreSQL, the server's); what was "
                        "saved before is intact"),
    "read_only": ("is read-only", "toolvisor writes to it: make the file and its folder "
                                  "writable (SQLite keeps its -wal and -shm files beside "
                                  "the file), or, on PostgreSQL, point the URL at the primary "
                                  "server"),
    "damaged": ("is damaged", "nothing was written to it; restore it from a backup, or move "
                              "it aside and start a new store"),
    "io_error": ("could not be read or written", "check the disk (or the server) it is on"),
}


class StoreError(ToolvisorError, RuntimeError):
    """The run store at ``store`` (a file's path, or a URL without its password) cannot
    be used as it is: ``problem`` is ``full``, ``read_only``, ``damaged`` or ``io_error``,
    and the message says, in one line, which store, what is wrong and what to do. Nothing was
    written by the operation that raised it."""

    store: str
    problem: StoreProblem

    def __init__(self, store: str, problem: StoreProblem, detail: str) -> None:
        """``store``: the store's path or redacted URL; ``problem``: what is wrong;
        ``detail``: the database's own words for it."""
        what, todo = _SAID[problem]
        super().__init__(f"run store {store!r} {what} ({' '.join(detail.split())}): {todo}")
        self.store = store
        self.problem = problem


_SQLITE_PROBLEMS: dict[int, StoreProblem] = {
    sqlite3.SQLITE_FULL: "full",
    sqlite3.SQLITE_READONLY: "read_only",
    sqlite3.SQLITE_CORRUPT: "damaged",
    sqlite3.SQLITE_IOERR: "io_error",
}


def sqlite_failure(path: str, exc: BaseException) -> StoreError | None:
    """What ``exc``, raised by SQLite on the store file ``path``, says about the store; ``None``
    when it is not the store's fault (a busy lock, a bad statement, not an SQLite file at all).
    A file SQLite cannot open in a folder it cannot write to is read-only: SQLite could not
    create the file's ``-wal`` and ``-shm`` files there."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return None
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code == sqlite3.SQLITE_CANTOPEN:
        folder = os.path.dirname(path)
        if os.path.isdir(folder) and not os.access(folder, os.W_OK):
            return StoreError(path, "read_only", f"{exc}: its folder is not writable")
        return StoreError(path, "io_error", str(exc))
    problem = _SQLITE_PROBLEMS.get(code)
    return None if problem is None else StoreError(path, problem, str(exc))


_POSTGRES_PROBLEMS: dict[str, StoreProblem] = {
    "53100": "full",  # disk_full
    "25006": "read_only",  # read_only_sql_transaction: a standby, or a read-only default
    "XX001": "damaged",  # data_corrupted
    "XX002": "damaged",  # index_corrupted
    "58030": "io_error",  # io_error
}


def postgres_failure(url: str, exc: BaseException) -> StoreError | None:
    """What ``exc``, raised by psycopg on the store at ``url`` (redacted), says about the
    store, by its SQLSTATE; ``None`` when it is not the store's fault."""
    problem = _POSTGRES_PROBLEMS.get(getattr(exc, "sqlstate", None) or "")
    return None if problem is None else StoreError(url, problem, str(exc))
