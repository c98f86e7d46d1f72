"""A run survives its process being SIGKILLed: listed by the command line, resumed in a new
process from the store (a SQLite file, or a PostgreSQL database: ``store_targets``).

Each host is a real subprocess (``tests.programs.durable_handlers``); the test reads its stdout
lines to know when it reached the point to kill it, so nothing here sleeps.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.programs.durable_handlers import scenario_agent, step_runs
from tests.support.hosts import ROOT, Start, kill, next_line, started_hosts
from tests.support.postgres import StoreTargets
from toolvisor.durable import open_store

HOST = [sys.executable, "-m", "tests.programs.durable_handlers"]


@pytest.fixture
def start() -> Iterator[Start]:
    with started_hosts("tests.programs.durable_handlers") as host:
        yield host


def finish(*args: Any) -> list[dict[str, Any]]:
    done = subprocess.run([*HOST, *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True)
    return [json.loads(line) for line in done.stdout.splitlines()]


def cli(*args: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolvisor.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)


def listed(store: str) -> dict[str, dict[str, Any]]:
    """``runs --json``: each run's line, by run id."""
    done = cli("runs", "--store", store, "--json")
    assert (done.returncode, done.stderr) == (0, "")
    return {line["run_id"]: line for line in map(json.loads, done.stdout.splitlines())}


def effect_ids(store_target: str, run_id: str) -> list[int]:
    with open_store(store_target) as store:
        return sorted({c.effect_id for c in store.checkpoints(run_id)})


def test_a_run_killed_mid_batch_finishes_in_a_new_process_without_rerunning_steps(
        tmp_path: Path, start: Start, store_targets: StoreTargets) -> None:
    work, store = tmp_path / "crashed", store_targets.fresh()
    work.mkdir()
    first = start("batch", "first", store, work)
    run_id = next_line(first)["run_id"]
    assert next_line(first) == {"blocked": "slow"}  # fast finished and was saved; slow blocks
    kill(first)
    assert step_runs(work / "steps.log", "slow-after") == 0

    lines = finish("batch", "resume", store, work, run_id)
    assert lines[-1]["outcome"] == {"kind": "completed", "text": "done: fast done / slow done"}
    for step in ("fast", "slow-before", "slow-after"):
        assert step_runs(work / "steps.log", step) == 1, step

    straight, straight_store = tmp_path / "straight", store_targets.fresh()
    straight.mkdir()
    lines = finish("batch", "straight", straight_store, straight)
    assert lines[-1]["outcome"]["kind"] == "completed"
    assert effect_ids(store, run_id) == effect_ids(straight_store, lines[0]["run_id"])


def test_a_run_killed_while_pending_is_resolved_by_another_process_and_finishes(
        tmp_path: Path, start: Start, store_target: str) -> None:
    store = store_target
    first = start("webhook", "first", store, tmp_path)
    run_id = next_line(first)["run_id"]
    suspended = next_line(first)["outcome"]
    assert suspended["kind"] == "suspended" and suspended["run_id"] == run_id
    key = suspended["keys"]["c_hook"]
    assert next_line(first) == {"blocked": "suspended"}
    kill(first)

    resolve = [sys.executable, "-m", "toolvisor.cli", "resolve", "--store", store, key]
    accepted = subprocess.run([*resolve, "--ok", '"pong"'], cwd=ROOT, capture_output=True,
                              text=True, timeout=60, check=False)
    assert (accepted.returncode, accepted.stdout.strip()) == (0, "accepted")
    again = subprocess.run([*resolve, "--ok", '"ping"'], cwd=ROOT, capture_output=True,
                           text=True, timeout=60, check=False)
    assert (again.returncode, again.stdout.strip()) == (1, "already_resolved")

    lines = finish("webhook", "resume", store, tmp_path, run_id)
    assert lines[-1]["outcome"] == {"kind": "completed", "text": "hook said pong"}
    assert step_runs(tmp_path / "steps.log", "register") == 1
    with open_store(store) as opened:
        assert opened.get_run(run_id).status == "completed"  # type: ignore[union-attr]
        assert opened.open_waits(run_id) == []


def test_after_a_crash_a_call_runs_at_most_once_unless_retryable_or_journaled(
        tmp_path: Path, start: Start, store_target: str) -> None:
    store, log = store_target, tmp_path / "steps.log"
    first = start("once", "first", store, tmp_path)
    run_id = next_line(first)["run_id"]
    assert next_line(first) == {"blocked": "once"}  # all three ran their side effect
    kill(first)

    lines = finish("once", "resume", store, tmp_path, run_id)
    outcome = lines[-1]["outcome"]
    assert outcome["kind"] == "completed"
    seen = json.loads(outcome["text"])
    assert "interrupted" in seen["c_charge"] and "handler_exit" in seen["c_charge"]
    assert (seen["c_fetch"], seen["c_ship"]) == ("fetched", "shipped")
    assert step_runs(log, "charge") == 1  # not retryable: never twice
    assert step_runs(log, "fetch") == 2  # declared retryable: run again
    assert step_runs(log, "ship") == 1  # journaled: run again, its step replayed


def test_a_journaled_step_in_a_worker_process_is_not_run_again_after_a_crash(
        tmp_path: Path, start: Start, store_target: str) -> None:
    """The step's record was journaled by the host that was killed, over the worker's link."""
    store, fifo = store_target, tmp_path / "blocked.fifo"
    os.mkfifo(fifo)
    first = start("remote", "first", store, tmp_path)
    run_id = next_line(first)["run_id"]
    assert fifo.read_text(encoding="utf-8") == "blocked"  # the worker is past its first step
    kill(first)
    fifo.unlink()

    lines = finish("remote", "resume", store, tmp_path, run_id)
    assert lines[-1]["outcome"] == {"kind": "completed", "text": "done: remote done"}
    assert step_runs(tmp_path / "steps.log", "remote-before") == 1
    assert step_runs(tmp_path / "steps.log", "remote-after") == 1


def test_a_killed_run_is_listed_by_the_command_line_and_resumed_by_its_id(
        tmp_path: Path, start: Start, store_target: str) -> None:
    """The recovery the README shows: after a SIGKILL, ``runs`` finds the run (its host gone),
    and ``agent.resume_run(run_id)`` in another process finishes it."""
    store = store_target
    first = start("batch", "first", store, tmp_path)
    run_id = next_line(first)["run_id"]
    assert next_line(first) == {"blocked": "slow"}
    pid = first.pid
    kill(first)

    table = cli("runs", "--store", store)
    assert (table.returncode, table.stderr) == (0, "")
    header, row = table.stdout.splitlines()
    assert header.split() == ["RUN", "AGENT", "STATUS", "AGE", "HOST", "PROCESSES", "WAITING"]
    assert row.split()[:3] == [run_id, "agent", "running"]
    assert row.split()[4:] == [f"{socket.gethostname()}:{pid}", "(gone)", "-", "-"]
    line = listed(store)[run_id]
    assert (line["status"], line["host"]["state"], line["waiting"]) == ("running", "gone", [])
    assert line["host"]["holder"].startswith(f"{socket.gethostname()}:{pid}:")

    with scenario_agent("batch", "resume", store, str(tmp_path)) as agent:
        outcome = agent.resume_run(run_id, wait_for=60)
    assert (outcome.run_id, outcome.status) == (run_id, "completed")
    assert outcome.text == "done: fast done / slow done"
    line = listed(store)[run_id]
    assert (line["status"], line["host"], line["waiting"]) == ("completed", None, [])


def test_a_killed_run_waiting_on_a_key_is_listed_with_its_key(
        tmp_path: Path, start: Start, store_target: str) -> None:
    store = store_target
    first = start("webhook", "first", store, tmp_path)
    run_id = next_line(first)["run_id"]
    key = next_line(first)["outcome"]["keys"]["c_hook"]
    assert next_line(first) == {"blocked": "suspended"}
    kill(first)

    line = listed(store)[run_id]
    assert (line["status"], line["host"]["state"]) == ("suspended", "gone")
    # the store names a call by its durable id: turn 1, attempt 1, the model's call id
    assert [(w["call_id"], w["key"]) for w in line["waiting"]] == [("1.1.c_hook", key)]
    assert cli("runs", "--store", store).stdout.splitlines()[1].split()[-1] == "1.1.c_hook"

    assert cli("resolve", "--store", store, key, "--ok", '"pong"').returncode == 0
    with scenario_agent("webhook", "resume", store, str(tmp_path)) as agent:
        outcome = agent.resume_run(run_id, wait_for=60)
    assert (outcome.run_id, outcome.text) == (run_id, "hook said pong")
    assert listed(store)[run_id]["waiting"] == []


def test_the_crash_recovery_example_kills_its_host_and_finishes_the_run() -> None:
    """``python -m examples.crash_recovery``, the README's recovery story, as a reader runs it:
    a real SIGKILL, the CLI's listing, and a resume in which nothing runs twice."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "examples.crash_recovery"], cwd=root,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("host killed (exit -9) while charge_card ran in run ")
    run_id = lines[0].split()[-1]
    assert lines[1].split()[:3] == ["RUN", "AGENT", "STATUS"]
    assert lines[2].split()[:3] == [run_id, "agent", "running"] and "(gone)" in lines[2]
    assert lines[3].startswith("completed: The book costs 12.5 EUR.")
    assert lines[4] == "  lookup_price: 12.5" and len(lines) == 6  # each call once
    assert lines[5].startswith("  charge_card: ") and '"handler_exit"' in lines[5]
