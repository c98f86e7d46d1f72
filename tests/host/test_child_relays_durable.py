"""A child's question or key relayed by its parent survives the parent's host being SIGKILLed:
the relay is read back from the parent's signed checkpoint and journal, so a new process
answering the parent answers the child (which runs once), resolving the child's key completes
the parent, and cancelling the parent cancels the child. Another agent on the same store
resumes the parent the same way, and one that cannot find the child's agent says what to pass.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.programs.relay_host import agents
from tests.support.hosts import ROOT, Start, kill, next_line, started_hosts
from toolvisor import Agent, AlreadyResumedError, AskUser, Suspended, Tool
from toolvisor.contract import CapabilityError, ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.testing import FunctionModel, call, calls

HOST = [sys.executable, "-m", "tests.programs.relay_host"]


@pytest.fixture
def first_host() -> Iterator[Start]:
    with started_hosts("tests.programs.relay_host") as start:
        yield start


def suspend_and_kill(scenario: str, workdir: Path, start: Start,
                     phase: str = "first") -> dict[str, Any]:
    """Run a host until it blocks (the first: once the parent suspends on what its child
    relays), then SIGKILL it; what it printed."""
    first = start(scenario, phase, workdir / "runs.sqlite", workdir)
    printed = next_line(first)
    kill(first)
    return printed


def then(scenario: str, phase: str, workdir: Path, run_id: str = "") -> list[dict[str, Any]]:
    """Run ``phase`` in a new process; what it printed."""
    done = subprocess.run([*HOST, scenario, phase, str(workdir / "runs.sqlite"), str(workdir),
                           run_id], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def steps(workdir: Path) -> list[str]:
    return (workdir / "steps.log").read_text(encoding="utf-8").splitlines()


def test_a_new_process_answering_the_parent_answers_the_child_once(
        tmp_path: Path, first_host: Start) -> None:
    suspended = suspend_and_kill("question", tmp_path, first_host)
    assert suspended["questions"] == ["researcher > Which year?"]
    assert steps(tmp_path) == ["child-model-1"]
    (done,) = then("question", "answer", tmp_path)
    assert done == {"outcome": "wrote: report for 2025"}
    assert steps(tmp_path) == ["child-model-1", "child-model-2", "record 2025", "child-model-3"]


def test_a_child_that_took_its_answer_before_a_second_kill_is_followed_not_asked_again(
        tmp_path: Path, first_host: Start) -> None:
    suspend_and_kill("question", tmp_path, first_host)
    assert suspend_and_kill("question", tmp_path, first_host, "answer-blocks") == {
        "blocked": "record"}  # the child took 2025 and was killed inside its next call
    (done,) = then("question", "answer", tmp_path, "2024")  # the same Suspended, again
    assert done == {"outcome": "wrote: report for 2025"}  # the child kept its first answer
    assert steps(tmp_path) == ["child-model-1", "child-model-2", "record 2025", "child-model-3"]


def test_after_a_restart_resolving_the_childs_key_completes_the_parent(
        tmp_path: Path, first_host: Start) -> None:
    suspended = suspend_and_kill("key", tmp_path, first_host)
    (child_key,) = suspended["keys"].values()
    shown, done = then("key", "resolve", tmp_path, suspended["parent"])
    assert shown == {"keys": {"r": child_key}, "resolved": "accepted"}  # still the child's
    assert done == {"outcome": "wrote: hook said pong"}
    assert steps(tmp_path) == ["child-model-1", "hook", "child-model-2"]


def test_a_restored_parent_that_attached_to_its_child_before_its_key_was_resolved_completes(
        tmp_path: Path, first_host: Start) -> None:
    suspended = suspend_and_kill("key", tmp_path, first_host)
    researcher, writer = agents("key", str(tmp_path / "runs.sqlite"), str(tmp_path))
    with researcher, writer:
        waiting = writer.resume_run(suspended["parent"], wait_for=30)
        assert isinstance(waiting, Suspended)
        # the parent attached to its child before giving this out; a round trip through the
        # child's orchestrator makes sure the child was restored (re-emitting its suspension
        # on its key, which is no outcome yet) before its key is resolved
        child = researcher.sessions.snapshot(suspended["child"])
        assert child.status == "suspended"
        (child_key,) = waiting.keys.values()
        assert writer.resolve(child_key, ok="pong") == "accepted"
        done = writer.resume_run(suspended["parent"], wait_for=30)
    assert done.text == "wrote: hook said pong"
    assert steps(tmp_path) == ["child-model-1", "hook", "child-model-2"]


@pytest.mark.parametrize("scenario", ["question", "key"])
def test_cancelling_a_restored_parent_cancels_the_child_it_relays(
        scenario: str, tmp_path: Path, first_host: Start) -> None:
    suspended = suspend_and_kill(scenario, tmp_path, first_host)
    (tmp_path / "child").write_text(json.dumps(suspended["child"]), encoding="utf-8")
    (done,) = then(scenario, "cancel", tmp_path, suspended["parent"])
    assert done == {"parent": "cancelled", "child": "cancelled"}


def test_another_agent_on_the_store_answers_the_child_and_one_without_its_agent_says_what_to_pass(
        tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    researcher, writer = agents("question", str(store), str(tmp_path))
    with researcher, writer:
        suspended = writer.run("write", wait_for=30)
        assert isinstance(suspended, Suspended)
    lone = Agent(FunctionModel(lambda request: calls(call("research", {"prompt": "dig"}))),
                 [Tool(name="research", handler=lambda arguments: "no child")], store=store,
                 name="writer")
    with lone, pytest.raises(CapabilityError, match=r"researcher\.as_tool") as refused:
        lone.resume(suspended, "2025")
    assert refused.value.code == "child_agent_not_found"
    researcher, writer = agents("question", str(store), str(tmp_path))
    with researcher, writer:
        outcome = writer.resume(suspended, "2024", wait_for=30)
    assert outcome.text == "wrote: report for 2024"
    assert steps(tmp_path) == ["child-model-1", "child-model-2", "record 2024", "child-model-3"]


def chain(store: Path) -> tuple[Agent, Agent, Agent]:
    """writer > researcher > analyst, each relaying the question below it; the analyst asks
    twice."""
    def ask(arguments: dict[str, Any]) -> AskUser:
        return AskUser(("Which year?", "Which month?")[arguments["n"]], options=("1", "2"))

    def analyst_model(request: ModelRequest) -> ModelResponse:
        got = answered(request)
        return calls(call("ask", {"n": len(got)}, id=f"q{len(got)}")) if len(got) < 2 else \
            ModelResponse(text="report for " + "/".join(got))

    def relaying(tool: str) -> FunctionModel:
        return FunctionModel(lambda request: ModelResponse(text=f"{tool}: {answered(request)[0]}")
                             if answered(request) else calls(call(tool, {"prompt": "dig"},
                                                                  id=tool[0])))

    analyst = Agent(FunctionModel(analyst_model), [Tool(name="ask", handler=ask)],
                    store=store, name="analyst")
    researcher = Agent(relaying("analyse"), [analyst.as_tool(name="analyse", description="a")],
                       store=store, name="researcher")
    writer = Agent(relaying("research"), [researcher.as_tool(name="research", description="r")],
                   store=store, name="writer")
    return analyst, researcher, writer


def answered(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if isinstance(m, ToolResultMessage)]


def test_new_agents_answer_a_chain_of_three_and_a_spent_suspended_is_refused(
        tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    analyst, researcher, writer = chain(store)
    with analyst, researcher, writer:
        first = writer.run("write", wait_for=30)
        assert isinstance(first, Suspended)
    assert first.questions[0].question == "researcher > analyst > Which year?"
    analyst, researcher, writer = chain(store)
    with analyst, researcher, writer:
        second = writer.resume(first, "1", wait_for=30)
    assert isinstance(second, Suspended)
    assert second.questions[0].question == "researcher > analyst > Which month?"
    analyst, researcher, writer = chain(store)
    with analyst, researcher, writer:
        with pytest.raises(AlreadyResumedError, match="resumed already"):
            writer.resume(first, "2", wait_for=30)  # its question was answered
        outcome = writer.resume(second, "2", wait_for=30)
    assert outcome.text == "research: analyse: report for 1/2"
