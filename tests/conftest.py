"""Every test in this suite is checked for leaked threads, processes and files."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_supervisor import Events

from toolvisor._logging import set_event_sink
from toolvisor.executor import prepare_process_isolation


@pytest.fixture(scope="session", autouse=True)
def _process_isolation_helpers() -> None:
    """The forkserver and resource tracker live as long as the test process: start them first,
    so the per-test leak check does not count their descriptors."""
    prepare_process_isolation()


@pytest.fixture(autouse=True)
def _no_leaks(toolvisor_no_leaks: object) -> None:
    """Apply the plugin's leak check to every test."""


@pytest.fixture
def events() -> Iterator[Events]:
    """Records toolvisor's events for one test (see ``test_supervisor.Events``)."""
    recorder = Events()
    previous = set_event_sink(recorder.sink)
    yield recorder
    set_event_sink(previous)
