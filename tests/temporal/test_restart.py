"""The Temporal server restarted under a run: a dev server keeping its state in a database
file is stopped and started again on it, and the run goes on where it was."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from tests.programs.temporal_worker import AGENT
from tests.temporal._harness import Temporal, eventually, on_loop, ran, run_id, working
from toolvisor import Completed
from toolvisor.temporal import answer, dev_server_path, outcome, questions, start_run


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _start(loop: asyncio.AbstractEventLoop, database: Path, port: int) -> WorkflowEnvironment:
    return on_loop(loop, WorkflowEnvironment.start_local(
        dev_server_existing_path=dev_server_path(), ui=False, dev_server_log_level="error",
        dev_server_database_filename=str(database), port=port))


def test_a_run_goes_on_across_a_server_restart(temporal_loop: asyncio.AbstractEventLoop,
                                               tmp_path: Path) -> None:
    database, port = tmp_path / "temporal.db", _free_port()
    first = _start(temporal_loop, database, port)
    server = Temporal(temporal_loop, first)  # its client reconnects to the restarted server
    again: WorkflowEnvironment | None = None
    try:
        with working(server, AGENT, sticky_timeout=1) as queue:
            handle = server.run(start_run(server.client, AGENT, f"ask {tmp_path}",
                                          run_id=run_id(), task_queue=queue))
            eventually(lambda: server.run(questions(handle)), "the run's question")
            on_loop(temporal_loop, first.shutdown())
            again = _start(temporal_loop, database, port)
            server.run(answer(handle, "c2", "yes"), timeout=60)
            done = server.run(outcome(handle))
    finally:
        if again is not None:
            on_loop(temporal_loop, again.shutdown())
        else:
            on_loop(temporal_loop, first.shutdown())
    assert isinstance(done, Completed) and done.text == "c1=noted; c2=yes"
    assert [name for name, _, _ in ran(tmp_path)] == ["note"]
