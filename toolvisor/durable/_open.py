"""``open_store``: the store a target names, a SQLite file's path or a PostgreSQL URL."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from toolvisor.durable._postgres_store import PostgresRunStore
from toolvisor.durable._sql_store import POLL_INTERVAL
from toolvisor.durable._sqlite import SqliteRunStore

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""The URL prefixes :func:`open_store` opens as a :class:`PostgresRunStore`."""


def is_store_url(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` is a URL (``scheme://...``) rather than a file's path."""
    return isinstance(target, str) and "://" in target


def open_store(
    target: str | os.PathLike[str],
    *,
    create: bool = True,
    read_only: bool = False,
    clock: Callable[[], float] = time.time,
    poll_interval: float = POLL_INTERVAL,
) -> SqliteRunStore | PostgresRunStore:
    """Open the run store ``target`` names: a ``postgresql://`` (or ``postgres://``) URL
    opens a :class:`PostgresRunStore`, anything else is the path of a SQLite file
    (:class:`SqliteRunStore`). ``create=False`` opens only a store that exists;
    ``read_only=True`` one that exists, for reading alone (nothing is written to it);
    ``clock`` and ``poll_interval`` are the stores' own. Another URL scheme is a
    ``ValueError``."""
    if not isinstance(target, str | os.PathLike):
        raise TypeError(f"a store target is a SQLite file's path or a postgresql:// URL, got "
                        f"{type(target).__name__}")
    if isinstance(target, str) and target.startswith(POSTGRES_SCHEMES):
        return PostgresRunStore(target, create=create, read_only=read_only, clock=clock,
                                    poll_interval=poll_interval)
    if is_store_url(target):
        scheme = str(target).partition("://")[0]
        raise ValueError(f"no run store for {scheme}:// URLs ({str(target)[:60]!r}): give "
                         "a postgresql:// URL or the path of a SQLite file")
    return SqliteRunStore(target, create=create, read_only=read_only, clock=clock,
                              poll_interval=poll_interval)
