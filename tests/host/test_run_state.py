"""Each collaborator of the orchestrator keeps its per-run state by run id, and forgets it when
the run leaves the host: a run that completes, one cancelled while it waits on a key, one whose
model call is cancelled in flight."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolvisor import Agent, CallContext, Completed, Halted, Ok, Pending, Suspended, Tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.durable import SqliteRunStore
from toolvisor.host import OrchestratorActor
from toolvisor.testing import FunctionModel, call, calls


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteRunStore]:
    with SqliteRunStore(tmp_path / "runs.sqlite", poll_interval=0.01) as opened:
        yield opened


def orchestrator(agent: Agent) -> OrchestratorActor:
    """The agent's orchestrator actor (read only once its runs have replied: each reply is
    set after the run left the host, so what it kept of the run is already gone)."""
    [ref] = [c.ref for c in agent.supervisor.which_children() if c.id == "orchestrator"]
    actor = ref._actor_weakref()  # type: ignore[union-attr]
    assert isinstance(actor, OrchestratorActor)
    return actor


def kept(actor: OrchestratorActor) -> dict[str, Any]:
    """What the orchestrator and its collaborators still keep by run id."""
    waits = actor._waits
    return {"runs": dict(actor._runs), "calls": dict(actor._calls._runs),
            "models": dict(actor._models._calls), "observed": dict(actor._observe._runs),
            "waits": {} if waits is None else dict(waits._runs)}


def nothing() -> dict[str, Any]:
    return {"runs": {}, "calls": {}, "models": {}, "observed": {}, "waits": {}}


def tool_then_answer(name: str) -> FunctionModel:
    def respond(request: ModelRequest) -> ModelResponse:
        if not any(isinstance(m, ToolResultMessage) for m in request.messages):
            return calls(call(name, {}, id="c1"))
        return ModelResponse(text="done")
    return FunctionModel(respond)


def test_a_finished_run_leaves_nothing_behind(store: SqliteRunStore) -> None:
    echo = Tool(name="echo", handler=lambda arguments: Ok("hi"))
    with Agent(tool_then_answer("echo"), [echo], store=store) as agent:
        assert isinstance(agent.run("go"), Completed)
        assert kept(orchestrator(agent)) == nothing()


def test_a_run_cancelled_while_it_waits_on_a_key_leaves_nothing_behind(
        store: SqliteRunStore) -> None:
    def hook(arguments: dict[str, Any], ctx: CallContext) -> Pending:
        ctx.completion_key()
        return Pending(deadline=600)

    with Agent(tool_then_answer("hook"), [Tool(name="hook", handler=hook)],
               store=store) as agent:
        suspended = agent.run("go")
        assert isinstance(suspended, Suspended) and suspended.run_id is not None
        actor = orchestrator(agent)
        assert suspended.run_id in kept(actor)["waits"]  # its key waiter, while it waits
        assert isinstance(agent.cancel_run(suspended.run_id, wait_for=30), Halted)
        assert kept(actor) == nothing()


def test_a_run_cancelled_during_its_model_call_leaves_nothing_behind(
        store: SqliteRunStore) -> None:
    asked, release = threading.Event(), threading.Event()
    run_ids: list[str] = []

    def ident(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        run_ids.append(ctx.session_id)
        return Ok("noted")

    def respond(request: ModelRequest) -> ModelResponse:
        if not any(isinstance(m, ToolResultMessage) for m in request.messages):
            return calls(call("ident", {}, id="c1"))
        asked.set()  # the second model call stays in flight until the run is cancelled
        release.wait(30)
        return ModelResponse(text="late")

    with Agent(FunctionModel(respond), [Tool(name="ident", handler=ident)],
               store=store) as agent:
        outcome: list[Any] = []
        runner = threading.Thread(target=lambda: outcome.append(agent.run("go")))
        runner.start()
        assert asked.wait(30)
        actor = orchestrator(agent)
        assert isinstance(agent.cancel_run(run_ids[0], wait_for=30), Halted)
        release.set()
        runner.join(30)
        assert isinstance(outcome[0], Halted)
        assert kept(actor) == nothing()
