"""A host that paused past its lease (SIGSTOP, as a GC pause or a frozen VM would) is refused
its next write once another host has taken its run over, and stops driving the run.

The paused host is a real process (``tests.programs.fenced_host``) on a real store of each backend;
the host that takes over is this test's, whose store clock runs an hour ahead: for it the
paused host's lease has expired, with no sleep. Every step waits on something observable (a
line the host prints, the kernel saying the process stopped).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.programs.fenced_host import fenced_agent
from tests.support.hosts import ROOT, next_line
from toolvisor import Completed, RunLeasedError
from toolvisor.durable import open_store


@contextlib.contextmanager
def paused_host(store: str, fifo: Path) -> Iterator[subprocess.Popen[str]]:
    """The host process; however the test ends, it is resumed, killed if still running, and
    reaped."""
    process = subprocess.Popen([sys.executable, "-m", "tests.programs.fenced_host", store,
                                str(fifo)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def test_a_paused_host_is_refused_its_next_write_after_another_took_its_run_over(
        store_target: str, tmp_path: Path) -> None:
    fifo = tmp_path / "work.fifo"
    os.mkfifo(fifo)
    with paused_host(store_target, fifo) as host:
        run_id = next_line(host)["blocked"]  # its tool runs; the run's lease is the host's
        host.send_signal(signal.SIGSTOP)
        os.waitpid(host.pid, os.WUNTRACED)  # returns once the kernel has stopped it
        with open_store(store_target) as store:
            (lease,) = store.leases()
            assert lease.holder.startswith(f"{socket.gethostname()}:{host.pid}:")
            paused_token = lease.token
            # a stopped process is alive: its lease holds until it expires
            with fenced_agent(store, fifo) as early, pytest.raises(RunLeasedError):
                early.resume_run(run_id)

        with open_store(store_target, clock=lambda: time.time() + 3600) as later, \
                fenced_agent(later, fifo) as taker:
            taken = taker.resume_run(run_id, wait_for=60)  # past the lease's ttl on its clock
            assert isinstance(taken, Completed) and taken.text.startswith("work said ")
            assert "interrupted" in taken.text  # the call was not journaled: not run again
            assert later.leases() == []  # the run ended: the taker let its lease go
        with open_store(store_target) as store:
            saved = [c.seq for c in store.checkpoints(run_id)]

        host.send_signal(signal.SIGCONT)
        fifo.write_text("go\n", encoding="utf-8")  # the paused tool goes on, and writes
        refused = next_line(host)
        assert refused["journal"] == "StaleLeaseError"
        assert f"this host's write carries fencing token {paused_token}, but" in \
            refused["message"]
        ended = next_line(host)  # the host let the run go: its checkpoint was refused too
        assert ended["refused"] == "StaleLeaseError", ended
        assert "another host took the run over" in ended["message"]
        assert next_line(host) == {"closed": host.pid}
        assert host.wait() == 0

    with open_store(store_target) as store:
        assert [c.seq for c in store.checkpoints(run_id)] == saved  # the paused host wrote none
        assert store.journal_record(run_id, "1.1.c_work", "after") is None
        assert store.get_run(run_id).status == "completed"  # type: ignore[union-attr]
        assert store.leases() == []
