"""Fixtures the agent's tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from toolvisor.durable import SqliteRunStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteRunStore]:
    """A SQLite run store in ``tmp_path`` that polls every 10 ms, closed after the test."""
    with SqliteRunStore(tmp_path / "runs.sqlite", poll_interval=0.01) as opened:
        yield opened
