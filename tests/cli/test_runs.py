"""``python -m toolvisor.cli runs``: a store's runs, as a table and as JSON lines, run in a real
subprocess on a real store; a reader that stops early, and stores that are not there."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.postgres import behind_the_store, set_version
from toolvisor import Agent
from toolvisor.durable import open_store
from toolvisor.testing import ScriptedModel, call, calls

ROOT = Path(__file__).resolve().parents[2]
DAY = 86400.0


def cli(*args: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolvisor.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)


def dead_pid() -> int:
    """The pid of a process of this machine that has ended (and was reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.fixture
def stored(store_target: str) -> tuple[str, int]:
    """A store with four runs (ages, on the store clock, whole minutes past the hour, so a
    slow start of the command cannot change what it shows): one waiting on a key, hosted by a
    process that died (its pid is returned); one hosted by this live process; one whose host's
    lease has expired; one that completed."""
    path, dead = store_target, dead_pid()
    now = time.time()
    here = socket.gethostname()
    with open_store(path, clock=lambda: now - 2 * DAY - 3 * 3600 - 120) as old:
        old.create_run("waiting", status="suspended")
        key = old.issue_key("waiting", "1.1.c_hook")
        old.park(key, deadline_at=None)
        old.acquire_lease("waiting", f"{here}:{dead}:aaaa", 30)
    with open_store(path, clock=lambda: now - 3 * 3600 - 60) as later:
        later.create_run("hosted")
        later.acquire_lease("hosted", f"{here}:{os.getpid()}:bbbb", 10 * DAY)
    with open_store(path, clock=lambda: now - 2 * 3600 - 30 * 60 - 20) as recent:
        recent.create_run("abandoned")
        recent.acquire_lease("abandoned", "elsewhere:77:cccc", 30)
        recent.create_run("done", status="completed")
    return path, dead


def test_runs_lists_each_run_newest_first_with_status_age_host_and_waiting_calls(
        stored: tuple[str, int]) -> None:
    path, dead = stored
    done = cli("runs", "--store", path)
    assert (done.returncode, done.stderr) == (0, "")
    rows = [line.split() for line in done.stdout.splitlines()]
    here = socket.gethostname()
    assert rows == [
        ["RUN", "AGENT", "STATUS", "AGE", "HOST", "PROCESSES", "WAITING"],
        ["done", "-", "completed", "2h30m", "-", "-", "-"],
        ["abandoned", "-", "running", "2h30m", "elsewhere:77", "(expired)", "-", "-"],
        ["hosted", "-", "running", "3h01m", f"{here}:{os.getpid()}", "-", "-"],
        ["waiting", "-", "suspended", "2d03h", f"{here}:{dead}", "(gone)", "-", "1.1.c_hook"]]


def test_runs_json_gives_one_object_a_line_with_the_waiting_keys(
        stored: tuple[str, int]) -> None:
    store_path, _ = stored
    done = cli("runs", "--store", store_path, "--json", "--status", "suspended")
    assert (done.returncode, done.stderr) == (0, "")
    (line,) = [json.loads(text) for text in done.stdout.splitlines()]
    with open_store(store_path) as store:
        (wait,) = store.open_waits()
        (run,) = store.runs(status="suspended")
    assert line["run_id"] == "waiting" and line["status"] == "suspended"
    assert (line["created_at"], line["updated_at"]) == (run.created_at, run.updated_at)
    assert 2 * DAY + 3 * 3600 + 120 <= line["age"] < 2 * DAY + 4 * 3600
    assert line["host"]["state"] == "gone" and line["host"]["holder"].endswith(":aaaa")
    assert line["waiting"] == [{"call_id": "1.1.c_hook", "purpose": "call", "key": wait.key,
                                "deadline_at": None}]


def test_runs_with_no_match_says_so(stored: tuple[str, int]) -> None:
    store_path, _ = stored
    done = cli("runs", "--store", store_path, "--status", "failed")
    assert (done.returncode, done.stdout) == (0, "no runs with status 'failed'\n")
    assert cli("runs", "--store", store_path, "--status", "failed", "--json").stdout == ""


def test_runs_piped_into_head_stops_quietly(store_target: str) -> None:
    """More lines than a pipe holds, so ``head`` closes it while the command still writes."""
    path = shlex.quote(store_target)
    with open_store(store_target) as store:
        for _ in range(2000):
            store.create_run()
    for json_lines in ("", " --json"):
        piped = subprocess.run(
            ["bash", "-c", f"{sys.executable} -m toolvisor.cli runs --store {path}{json_lines}"
                           " | head -3; echo \"exit ${PIPESTATUS[0]}\" >&2"],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
        assert len(piped.stdout.splitlines()) == 3
        assert piped.stderr == "exit 141\n"  # a writer whose reader left, without a traceback


def test_a_store_that_is_not_there_is_named_and_not_created(tmp_path: Path) -> None:
    for command in (["runs"], ["waits"], ["resolve", "tvk1.x.y", "--ok", "1"]):
        missing = cli(*command, "--store", tmp_path / "nowhere" / "runs.sqlite")
        assert (missing.returncode, missing.stdout) == (2, "")
        assert f"the folder {str(tmp_path / 'nowhere')!r} does not exist" in missing.stderr
        absent = cli(*command, "--store", tmp_path / "runs.sqlite")
        assert absent.returncode == 2
        assert f"the folder {str(tmp_path)!r} has no file 'runs.sqlite'" in absent.stderr
        assert "Agent(..., store=PATH)" in absent.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_holds_no_store_is_refused_and_left_alone(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    done = cli("runs", "--store", notes)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "notes.txt' is not a run store (file is not a database)" in done.stderr
    assert notes.read_text() == "hello\n"


def test_the_toolvisor_command_is_the_cli(tmp_path: Path) -> None:
    """The install puts pyproject's console script ``toolvisor`` beside the interpreter; it runs
    the very commands of ``python -m toolvisor.cli``."""
    command = Path(sys.executable).parent / "toolvisor"
    assert command.is_file(), f"no {command}: reinstall toolvisor (pip install -e '.[dev]')"
    path = tmp_path / "runs.sqlite"
    with open_store(path) as store:
        store.create_run("r1", status="completed")
    listed = subprocess.run([command, "runs", "--store", path, "--json"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)
    assert (listed.returncode, listed.stderr) == (0, "")
    as_module = cli("runs", "--store", path, "--json")
    row, same = json.loads(listed.stdout), json.loads(as_module.stdout)
    assert row.pop("age") > 0 and same.pop("age") > 0  # seconds since: read at each listing
    assert row == same and row["run_id"] == "r1"
    usage = subprocess.run([command, "--help"], capture_output=True, text=True, timeout=60,
                           check=False)
    assert usage.stdout.startswith("usage: toolvisor [-h]")


def test_child_sessions_show_under_their_parent_with_each_agent(tmp_path: Path) -> None:
    """A writer whose tool runs a researcher, on one store: the table is a tree (the child
    indented under the run whose call started it), ``--json`` names each run's agent and
    parent, and ``resume_run`` of the child on the writer names the parent to resume."""
    store = tmp_path / "runs.sqlite"
    researcher = Agent(ScriptedModel(["found it"]), name="researcher", store=store)
    writer_model = ScriptedModel([calls(call("research", {"prompt": "dig"}, id="r")), "wrote"])
    with researcher, Agent(writer_model, [researcher.as_tool(
            name="research", description="Ask the researcher")], name="writer",
            store=store) as writer:
        parent = writer.run("write")
        (child,) = [r.run_id for r in writer.store.runs() if r.run_id != parent.run_id]
        with pytest.raises(ValueError, match=(
                f"run '{child}' is a child session \\(of agent 'researcher'\\) started by a "
                f"call of run '{parent.run_id}' \\(of agent 'writer'\\).*"
                f"resume_run\\('{parent.run_id}'\\) on agent 'writer'")):
            writer.resume_run(child)
        assert researcher.resume_run(child).text == "found it"  # the child's own agent
        assert writer.resume_run(parent.run_id).text == "wrote"
    done = cli("runs", "--store", store)
    assert (done.returncode, done.stderr) == (0, "")
    rows = [line.split()[:3] for line in done.stdout.splitlines()]
    assert rows == [["RUN", "AGENT", "STATUS"], [parent.run_id, "writer", "completed"],
                    ["-", child, "researcher"]]
    assert done.stdout.splitlines()[2].startswith(f"  - {child}")
    listed = cli("runs", "--store", store, "--json").stdout
    lines = [json.loads(text) for text in listed.splitlines()]
    assert {(line["run_id"], line["agent"], line["parent"]) for line in lines} == {
        (parent.run_id, "writer", None), (child, "researcher", parent.run_id)}


def test_a_store_of_schema_version_3_is_migrated_and_its_runs_listed(store_target: str) -> None:
    with open_store(store_target) as store:
        store.create_run("old", status="completed")
    for column in ("agent", "parent_run_id"):  # as toolvisor before the run tree left it
        behind_the_store(store_target, f"ALTER TABLE runs DROP COLUMN {column}")
    set_version(store_target, 3)
    with open_store(store_target) as store:
        old = store.get_run("old")
        assert old is not None and (old.status, old.agent, old.parent_run_id) == (
            "completed", None, None)
        store.create_run("new", agent="writer", parent_run_id="old")
    done = cli("runs", "--store", store_target)
    assert [line.split()[:2] for line in done.stdout.splitlines()] == [
        ["RUN", "AGENT"], ["old", "-"], ["-", "new"]]
