"""A child session survives its parent's process being SIGKILLed: the child's run id is
journaled in the parent's call, so the resumed parent re-attaches to the same child, which runs
once (a child that finished meanwhile is not run again)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.hosts import ROOT, Start, kill, next_line, started_hosts
from toolvisor.durable import SqliteRunStore

HOST = [sys.executable, "-m", "tests.programs.child_session_host"]


@pytest.fixture
def first_host() -> Iterator[Start]:
    with started_hosts("tests.programs.child_session_host") as start:
        yield start


def steps(workdir: Path) -> list[str]:
    return (workdir / "steps.log").read_text(encoding="utf-8").splitlines()


def crash_and_resume(scenario: str, workdir: Path, start: Start) -> tuple[str, str, str]:
    """Run the first host until it blocks, SIGKILL it, resume in a new process; the parent's
    run id, the child's, and the resumed run's final text."""
    store = workdir / "runs.sqlite"
    first = start(scenario, "first", store, workdir)
    parent = next_line(first)["parent"]
    child = next_line(first)["child"]
    kill(first)
    done = subprocess.run([*HOST, scenario, "resume", str(store), str(workdir), parent],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0] == {"parent": parent}  # the delegating call ran again (it journaled)
    with SqliteRunStore(store) as opened:
        assert sorted(r.run_id for r in opened.runs()) == sorted([parent, child])
    return parent, child, lines[-1]["outcome"]


def test_a_parent_killed_while_its_child_runs_re_attaches_to_the_same_child(
        tmp_path: Path, first_host: Start) -> None:
    _, child, text = crash_and_resume("running", tmp_path, first_host)
    assert text.startswith(f"done: {child} found: ")
    assert "interrupted" in text  # the child's dig was cut by the kill: at most once
    assert steps(tmp_path) == ["child-model-1", "dig", "child-model-2"]


def test_a_child_that_finished_before_the_kill_is_not_run_again(
        tmp_path: Path, first_host: Start) -> None:
    _, child, text = crash_and_resume("finished", tmp_path, first_host)
    assert text == f"done: {child} found: gold"
    assert steps(tmp_path) == ["child-model-1", "dig", "child-model-2"]
