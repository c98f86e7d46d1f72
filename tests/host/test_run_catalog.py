"""A run's own catalog: ``ctx.sessions.set_tool_membership`` edits the calling run's catalog
(kept in its checkpoint), never the agent's registry; agent-wide changes go through
``agent.registry`` and reach every run."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from toolvisor import Agent, AskUser, CallContext, Completed, Ok, Suspended, Tool
from toolvisor.contract import (
    CapabilityError,
    ModelRequest,
    ModelResponse,
    ToolResultMessage,
    UserMessage,
)
from toolvisor.machine import (
    CallOutcome,
    Checkpoint,
    MachineConfig,
    ModelReplied,
    ToolResults,
    TurnMachine,
)
from toolvisor.testing import ScriptedModel, call, calls


def results(outcome: Any) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in outcome.messages
            if isinstance(m, ToolResultMessage)}


def offered_to(model: ScriptedModel, prompt: str) -> list[list[str]]:
    """The tools each request of the run started with ``prompt`` offered, in order."""
    def prompt_of(request: ModelRequest) -> str:
        return next(str(m.content) for m in request.messages if isinstance(m, UserMessage))
    return [[spec.name for spec in request.tools] for request in model.requests
            if prompt_of(request) == prompt]


def unlock(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    assert ctx.sessions is not None
    return Ok(sorted(ctx.sessions.set_tool_membership(["admin"], True)))


ADMIN = Tool(name="admin", handler=lambda a: Ok("root"))


def test_two_concurrent_runs_and_a_later_one_each_see_only_their_own_edits() -> None:
    unlocked = threading.Event()

    def unlock_then_tell(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        done = unlock(arguments, ctx)
        unlocked.set()
        return done

    def probe(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert unlocked.wait(10)  # the other run's edit is made while this run is in flight
        assert ctx.sessions is not None
        return Ok([e.name for e in ctx.sessions.tool_catalog() if e.present])

    model = ScriptedModel({
        "a": [calls(call("unlock", id="u")), calls(call("admin", id="a1")), "a done"],
        "b": [calls(call("probe", id="p")), calls(call("admin", id="b1")), "b done"],
        "c": [calls(call("admin", id="c1")), "c done"]})
    tools = [Tool(name="unlock", handler=unlock_then_tell), Tool(name="probe", handler=probe),
             ADMIN]
    with Agent(model, tools) as agent:
        agent.registry.remove_member("admin")
        with ThreadPoolExecutor(2) as pool:
            a, b = pool.map(agent.run, ["a", "b"])
        c = agent.run("c")
        assert agent.registry.members() == {"unlock", "probe"}
    assert all(isinstance(outcome, Completed) for outcome in (a, b, c))
    assert results(a) == {"u": '["admin"]', "a1": "root"}
    assert offered_to(model, "a")[1] == ["unlock", "probe", "admin"]
    assert results(b)["p"] == '["unlock","probe"]' and "not_found" in results(b)["b1"]
    assert offered_to(model, "b") == [["unlock", "probe"]] * 3
    assert "not_found" in results(c)["c1"] and offered_to(model, "c")[0] == ["unlock", "probe"]


def test_a_run_restored_in_a_new_agent_keeps_its_own_edits(tmp_path: Path) -> None:
    store = str(tmp_path / "runs.sqlite")

    def ask(arguments: dict[str, Any]) -> AskUser:
        return AskUser("go on?")

    model = ScriptedModel({
        "get root": [calls(call("unlock", id="u")), calls(call("ask", id="q")),
                     calls(call("admin", id="a1")), "done"],
        "later": [calls(call("admin", id="a2")), "later done"]})
    tools = [Tool(name="unlock", handler=unlock), Tool(name="ask", handler=ask), ADMIN]
    with Agent(model, tools, store=store) as agent:
        agent.registry.remove_member("admin")
        suspended = agent.run("get root")
    assert isinstance(suspended, Suspended)
    assert suspended.checkpoint.run.membership == {"admin": True}
    assert Checkpoint.from_json(suspended.checkpoint.to_json()) == suspended.checkpoint

    with Agent(model, tools, store=store) as restarted:
        restarted.registry.remove_member("admin")
        restarted.registry.remove_member("unlock")  # agent-wide: reaches the resumed run too
        outcome = restarted.resume(suspended, "yes")
        later = restarted.run("later")
        assert restarted.registry.members() == {"ask"}
    assert isinstance(outcome, Completed) and results(outcome)["a1"] == "root"
    assert offered_to(model, "get root")[2] == ["ask", "admin"]
    assert "not_found" in results(later)["a2"] and offered_to(model, "later")[0] == ["ask"]


def test_a_child_session_has_its_own_catalog() -> None:
    def delegate(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert ctx.sessions is not None
        ctx.sessions.set_tool_membership(["admin"], True)
        child = ctx.sessions.start_turn("child")
        return Ok(results(child)["c1"])

    model = ScriptedModel({"parent": [calls(call("delegate", id="d")), "parent done"],
                           "child": [calls(call("admin", id="c1")), "child done"]})
    with Agent(model, [Tool(name="delegate", handler=delegate), ADMIN]) as agent:
        agent.registry.remove_member("admin")
        outcome = agent.run("parent")
    assert "not_found" in results(outcome)["d"]
    assert offered_to(model, "child") == [["delegate"]] * 2


def test_an_edit_fed_to_a_bare_machine_is_in_its_checkpoint_and_survives_a_restore() -> None:
    admin = Tool(name="admin", handler=lambda a: Ok("root"))
    config = MachineConfig(tools=[Tool(name="unlock")], catalog=lambda name: None,
                           catalog_available={"admin": admin}.get)
    machine = TurnMachine(config)
    llm = machine.start("go")[-1]
    batch = machine.send(ModelReplied(llm.id, ModelResponse(tool_calls=(call("unlock"),))))[-1]
    llm = machine.send(ToolResults(batch.id, (CallOutcome(
        batch.calls[0].call.id, Ok("ok"), membership={"admin": True, "unlock": False}),)))[-1]
    assert machine.membership == {"admin": True, "unlock": False}
    restored = TurnMachine.restore(config, machine.checkpoint().to_json())
    assert restored.membership == {"admin": True, "unlock": False}
    batch = restored.send(ModelReplied(llm.id, ModelResponse(tool_calls=(
        call("admin", id="x"), call("unlock", id="y")))))[-1]
    assert [c.call.name for c in batch.calls] == ["admin"]  # unlock left this run's catalog


def test_an_edit_after_the_call_returned_is_refused_and_the_run_keeps_none() -> None:
    kept: list[Any] = []
    refused: list[str] = []

    def keep(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        kept.append(ctx.sessions)
        return Ok("kept")

    def late(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        try:
            kept[0].set_tool_membership(["admin"], True)  # the first call's, long returned
        except CapabilityError as exc:
            refused.append(exc.code)
        return Ok([e.name for e in ctx.sessions.tool_catalog() if e.present])  # type: ignore[union-attr]

    model = ScriptedModel([calls(call("keep")), calls(call("late", id="l")), "done"])
    with Agent(model, [Tool(name="keep", handler=keep), Tool(name="late", handler=late),
                       ADMIN]) as agent:
        agent.registry.remove_member("admin")
        outcome = agent.run("go")
    assert refused == ["call_finished"] and results(outcome)["l"] == '["keep","late"]'
