"""Several agent processes share one durable store: a SQLite file, or a PostgreSQL database.

Every host is a real OS process (``tests.programs.shared_host``) driven over its stdin and stdout:
the test writes a command and reads the JSON line that answers it, so nothing here sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolvisor.durable import open_store

ROOT = Path(__file__).resolve().parents[2]
HOST = [sys.executable, "-m", "tests.programs.shared_host"]


class Host:
    """One agent process: ``ask`` writes a command line and returns the line it answers."""

    def __init__(self, store: str) -> None:
        self.process = subprocess.Popen([*HOST, store], cwd=ROOT, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.pid = self.process.pid

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"host {self.pid} exited early with {self.process.wait()}"
        data: dict[str, Any] = json.loads(line)
        return data

    def ask(self, command: str) -> dict[str, Any]:
        self.send(command)
        return self.read()

    def close(self) -> None:
        """A clean exit: the agent closes and gives its leases up."""
        assert self.ask("close") == {"closed": self.pid}
        assert self.process.wait() == 0

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait() == -signal.SIGKILL

    def reap(self) -> None:
        """Whatever happened, leave no process and no pipe behind."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def store(store_target: str) -> str:
    return store_target


Start = Callable[..., list[Host]]


@pytest.fixture
def start(store: str) -> Iterator[Start]:
    """Start ``count`` hosts on ``store``, all at once, each ready when returned; every one is
    reaped when the test ends, however it ends."""
    started: list[Host] = []

    def hosts(count: int) -> list[Host]:
        new = [Host(store) for _ in range(count)]
        started.extend(new)
        for host in new:
            assert host.read() == {"ready": host.pid}
        return new

    try:
        yield hosts
    finally:
        for host in started:
            host.reap()


def suspended_run(host: Host) -> tuple[str, str]:
    """Start a run on ``host``; it parks ``hook``'s key. Its run id and the key."""
    outcome = host.ask("run")["outcome"]
    assert outcome["kind"] == "suspended", outcome
    return outcome["run_id"], outcome["keys"]["c_hook"]


def status(store: str, run_id: str) -> str:
    with open_store(store) as opened:
        run = opened.get_run(run_id)
        assert run is not None
        return run.status


def test_a_run_has_one_host_until_its_host_exits_then_another_finishes_it(
        store: str, start: Start) -> None:
    a, b, c = start(3)
    run_id, key = suspended_run(a)
    refused = b.ask(f"resume {run_id}")
    assert refused["refused"] == "RunLeasedError"
    assert f"run {run_id!r} is hosted by" in refused["message"]
    assert f":{a.pid}:" in refused["message"]  # the holder: host:pid:token
    assert "resume it there, or here once that host has closed its agent" in refused["message"]

    a.close()  # a clean exit gives the lease up
    assert b.ask(f"resume {run_id}") == {
        "outcome": {"kind": "suspended", "run_id": run_id, "keys": {"c_hook": key}}}
    b.send(f"resume {run_id}")
    assert c.ask(f'resolve {key} "pong"') == {"resolved": "accepted"}
    assert b.read() == {"outcome": {"kind": "completed", "text": "hook said pong"}}
    assert status(store, run_id) == "completed"


def test_a_killed_hosts_run_is_taken_over_at_once(store: str, start: Start) -> None:
    a, b = start(2)
    run_id, key = suspended_run(a)
    a.kill()  # its lease has 30 s left, but its holder is a dead process of this machine
    assert b.ask(f"resume {run_id}")["outcome"]["kind"] == "suspended"
    assert b.ask(f'resolve {key} "pong"') == {"resolved": "accepted"}
    assert b.ask(f"resume {run_id}") == {
        "outcome": {"kind": "completed", "text": "hook said pong"}}


def test_a_killed_host_not_yet_reaped_by_its_parent_is_dead_too(
        store: str, start: Start) -> None:
    """A zombie is told apart by ``/proc`` (Linux, where the project runs)."""
    a, b = start(2)
    run_id, _ = suspended_run(a)
    a.process.send_signal(signal.SIGKILL)
    os.waitid(os.P_PID, a.pid, os.WEXITED | os.WNOWAIT)  # a zombie: dead, its pid still taken
    assert b.ask(f"resume {run_id}")["outcome"]["kind"] == "suspended"
    assert a.process.wait() == -signal.SIGKILL


def test_a_key_taken_in_one_process_is_resolved_from_others_and_the_first_answer_stands(
        store: str, start: Start) -> None:
    a, b, c = start(3)
    run_id, key = suspended_run(a)
    a.send(f"resume {run_id}")  # A waits for the outcome; its key waiter polls the file
    b.send(f'resolve {key} "from b"')
    c.send(f'resolve {key} "from c"')  # at once: exactly one of them wins
    heard = {"b": b.read()["resolved"], "c": c.read()["resolved"]}
    assert sorted(heard.values()) == ["accepted", "already_resolved"]
    (winner,) = [name for name, said in heard.items() if said == "accepted"]
    completed = {"outcome": {"kind": "completed", "text": f"hook said from {winner}"}}
    assert a.read() == completed  # A noticed the other process's resolution and went on
    assert status(store, run_id) == "completed"

    late = subprocess.run([sys.executable, "-m", "toolvisor.cli", "resolve", "--store",
                           store, key, "--ok", '"late"'], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert (late.returncode, late.stdout.strip()) == (1, "already_resolved")
    assert b.ask(f'resolve {key} "again"') == {"resolved": "already_resolved"}
    assert a.ask(f"resume {run_id}") == completed  # nothing changed
