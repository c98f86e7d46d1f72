"""Every test in this suite is checked for leaked threads, processes and files."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from temporalio.runtime import Runtime

from tests.support.events import Events
from tests.support.postgres import PostgresServer, StoreTargets
from tests.support.provider_server import ProviderServer
from tests.support.ray_cluster import start_cluster, worker_sockets
from toolvisor._logging import set_event_sink
from toolvisor.isolation import prepare_process_isolation
from toolvisor.testing import tolerate_fds


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` runs the suite on two processes (pytest-xdist, `--dist loadgroup`). The tests
    that share a machine-wide resource run on one of them: those marked ``machine_wide`` (the
    sandbox's leak check looks at every sandbox process of the machine), and every test that
    takes the session's Ray cluster (one local cluster at a time)."""
    for item in items:
        if "ray_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.machine_wide)
        if item.get_closest_marker("machine_wide") is not None:
            item.add_marker(pytest.mark.xdist_group("machine_wide"))


@pytest.fixture(scope="session", autouse=True)
def _process_isolation_helpers() -> None:
    """The forkserver and resource tracker live as long as the test process: start them first,
    so the per-test leak check does not count their descriptors."""
    prepare_process_isolation()


@pytest.fixture(scope="session", autouse=True)
def _temporal_runtime() -> None:
    """Temporal's core runtime (its threads, an event poll and a socket pair) lives as long as
    the test process once a client connects (the guide's examples, ``tests/temporal``): start
    it first, so the per-test leak check does not count its descriptors."""
    Runtime.default()


@pytest.fixture(autouse=True)
def _no_leaks(toolvisor_no_leaks: object) -> None:
    """Apply the plugin's leak check to every test."""


@pytest.fixture(scope="session")
def _provider_server() -> Iterator[ProviderServer]:
    """One local provider server for the whole session: started before any test's leak check
    takes its snapshot (its thread and socket are not the test's), stopped and joined last."""
    server = ProviderServer()
    yield server
    server.close()


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[ModuleType]:
    """One local Ray cluster (2 CPUs, no dashboard, its files in a folder of its own) for
    the whole session, started before the first test that needs it takes its leak snapshot."""
    # Ray's socket paths must fit in 107 bytes: a short folder of its own, not pytest's (whose
    # path grows with the session's number and, on several processes, the worker's name).
    temp = Path(tempfile.mkdtemp(prefix="tv-ray-"))
    ray = start_cluster(temp)
    # The driver connects to each worker process the cluster starts (new actors, killed
    # tasks' replacements) on demand: those connections belong to the session's cluster.
    withdraw = tolerate_fds(worker_sockets(ray.util.get_node_ip_address()))
    yield ray
    withdraw()
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL server for the whole session, started before the first test that
    needs it takes its leak snapshot (its admin connection is the session's), deleted last."""
    server = PostgresServer()
    yield server
    server.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store_targets(request: pytest.FixtureRequest, tmp_path: Path,
                  postgres_server: PostgresServer) -> StoreTargets:
    """New, empty run stores' places, once per backend: SQLite files in ``tmp_path``, or
    fresh schemas on the session's PostgreSQL server (``open_store`` takes either)."""
    if request.param == "sqlite":
        return StoreTargets("sqlite", lambda n: str(tmp_path / f"store-{n}.sqlite"))
    return StoreTargets("postgres", lambda _: postgres_server.fresh_url())


@pytest.fixture
def store_target(store_targets: StoreTargets) -> str:
    """Where a new, empty run store goes, on each backend in turn."""
    return store_targets.fresh()


@pytest.fixture
def provider(_provider_server: ProviderServer) -> ProviderServer:
    """The local provider server, with no scripted reply and no recorded request."""
    _provider_server.script()
    return _provider_server


@pytest.fixture
def events() -> Iterator[Events]:
    """Records toolvisor's events for one test (see ``tests.support.events.Events``)."""
    recorder = Events()
    previous = set_event_sink(recorder.sink)
    yield recorder
    set_event_sink(previous)
