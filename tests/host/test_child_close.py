"""A normal close is as safe as a crash: a parent waiting on its child's completion key, and the
child, both wait in the store, their leases released, after either agent is closed first
(leaving its ``with`` block), or the worker driving them is stopped by ``SIGTERM``; the key,
resolved later from another process, completes the child and then the parent, each of the
child's steps run once. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.programs.relay_host import agents
from tests.support.workers import ROOT, WAIT
from toolvisor import Suspended
from toolvisor.durable import RunStore, open_store


@pytest.fixture
def store(store_target: str) -> Iterator[RunStore]:
    with open_store(store_target) as opened:
        yield opened


def resolve_elsewhere(target: str, key: str, value: str) -> None:
    """Resolve ``key`` from another process, with the command line."""
    done = subprocess.run([sys.executable, "-m", "toolvisor.cli", "resolve", "--store", target,
                           key, "--ok", f'"{value}"'], cwd=ROOT, capture_output=True, text=True,
                          timeout=WAIT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def steps(workdir: Path) -> list[str]:
    return (workdir / "steps.log").read_text(encoding="utf-8").splitlines()


def the_child(store: RunStore, parent: str) -> str:
    (child,) = [r.run_id for r in store.runs() if r.run_id != parent]
    return child


@pytest.mark.parametrize("first", ["writer", "researcher"])
def test_closing_either_agent_first_leaves_both_runs_waiting_and_the_key_completes_both(
        first: str, store_target: str, store: RunStore, tmp_path: Path) -> None:
    researcher, writer = agents("key", store_target, str(tmp_path))
    closing = {"writer": writer, "researcher": researcher}
    with researcher, writer:
        suspended = writer.run("write", wait_for=WAIT)
        assert isinstance(suspended, Suspended)
        closing[first].close()  # the other one stays open a moment, then closes too
    parent = suspended.run_id
    child = the_child(store, parent)
    assert {r.run_id: r.status for r in store.runs()} == {parent: "suspended",
                                                          child: "suspended"}
    assert store.leases() == []
    (child_key,) = suspended.keys.values()
    assert [w.key for w in store.open_waits(child)] == [child_key]
    resolve_elsewhere(store_target, child_key, "pong")
    researcher, writer = agents("key", store_target, str(tmp_path))
    with researcher, writer:
        assert researcher.resume_run(child, wait_for=WAIT).text == "hook said pong"
        assert writer.resume_run(parent, wait_for=WAIT).text == "wrote: hook said pong"
    assert steps(tmp_path) == ["child-model-1", "hook", "child-model-2"]
    assert store.leases() == []


def test_a_parent_left_open_completes_once_its_closed_childs_key_completes_the_child(
        store_target: str, store: RunStore, tmp_path: Path) -> None:
    researcher, writer = agents("key", store_target, str(tmp_path))
    with writer:
        with researcher:
            suspended = writer.run("write", wait_for=WAIT)
            assert isinstance(suspended, Suspended)
        # the researcher closed: the writer stops following its child, and waits on
        (child_key,) = suspended.keys.values()
        resolve_elsewhere(store_target, child_key, "pong")
        again, other = agents("key", store_target, str(tmp_path))
        with again, other:
            child = the_child(store, suspended.run_id)
            assert again.resume_run(child, wait_for=WAIT).text == "hook said pong"
        assert writer.resume_run(suspended.run_id, wait_for=WAIT).text == "wrote: hook said pong"
    assert steps(tmp_path) == ["child-model-1", "hook", "child-model-2"]
