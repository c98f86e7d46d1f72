"""``ctx.sessions``, the session's own view: the run's model, a snapshot of the run, the flat
catalog and its membership, in process and over the context link."""

from __future__ import annotations

import json
import os
from types import ModuleType
from typing import Any

import pytest

from tests.support import session_handlers as sh
from toolvisor import Agent, CallContext, Completed, Limits, Ok, Timeouts, Tool
from toolvisor.contract import ModelInfo, SessionSnapshot, ToolResultMessage
from toolvisor.isolation import prepare_process_isolation
from toolvisor.testing import ScriptedModel, call, calls


def results(outcome: Any) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in outcome.messages
            if isinstance(m, ToolResultMessage)}


def test_a_handler_reads_its_runs_model_and_snapshot() -> None:
    seen: list[tuple[ModelInfo, SessionSnapshot]] = []

    def look(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert ctx.sessions is not None
        seen.append((ctx.sessions.model(), ctx.sessions.snapshot_current()))
        return Ok("looked")

    model = ScriptedModel([calls(call("look", id="l1")), "done"])
    with Agent(model, [Tool(name="look", handler=look)], system_prompt="be brief") as agent:
        outcome = agent.run("hello", state={"k": 1})
    assert isinstance(outcome, Completed)
    info, snapshot = seen[0]
    assert info == ModelInfo(provider="ScriptedModel", name="ScriptedModel", variant=None)
    assert snapshot.run_id == outcome.run_id and snapshot.status == "running"
    assert [m.role for m in snapshot.messages] == ["system", "user", "assistant"]
    assert snapshot.state == {"k": 1} and snapshot.turns == 1
    assert snapshot.parent_run_id is None


def test_the_catalog_lists_every_tool_and_membership_is_set_by_name() -> None:
    def admit(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert ctx.sessions is not None
        before = {e.name: e.present for e in ctx.sessions.tool_catalog()}
        changed = ctx.sessions.set_tool_membership(["admin", "admit"], arguments["present"])
        return Ok({"before": before, "changed": sorted(changed)})

    admin = Tool(name="admin", description="root access", handler=lambda a: Ok("root"))
    tools = [Tool(name="admit", handler=admit), admin]
    model = ScriptedModel([calls(call("admin", id="a1")),
                           calls(call("admit", {"present": True}, id="u")),
                           calls(call("admin", id="a2")), "done"])
    with Agent(model, tools) as agent:
        agent.registry.remove_member("admin")
        outcome = agent.run("get root")
        assert agent.registry.members() == {"admit"}  # the run edited its own catalog
    got = results(outcome)
    assert "not_found" in got["a1"] and got["a2"] == "root"
    assert got["u"] == '{"before":{"admit":true,"admin":false},"changed":["admin"]}'
    assert [s.name for s in model.requests[2].tools] == ["admit", "admin"]


def test_bad_membership_edits_are_refused_clearly() -> None:
    errors: list[str] = []

    def edit(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert ctx.sessions is not None
        for names, present in (("admin", True), (["admin"], "yes"), (["nowhere"], True)):
            try:
                ctx.sessions.set_tool_membership(names, present)  # type: ignore[arg-type]
            except (TypeError, LookupError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
        return Ok("tried")

    model = ScriptedModel([calls(call("edit")), "done"])
    with Agent(model, [Tool(name="edit", handler=edit)]) as agent:
        agent.run("edit")
    assert errors[0].startswith("TypeError: names must be a collection")
    assert "pass ['admin']" in errors[0]
    assert errors[1] == "TypeError: present must be a bool, got 'yes'"
    assert errors[2].startswith("UnknownToolError") and "nowhere" in errors[2]


@pytest.fixture(scope="module")
def _process_helpers() -> None:
    prepare_process_isolation()


@pytest.mark.parametrize("isolation", ["process", "ray"])
def test_a_worker_uses_its_sessions_over_the_context_link(
        isolation: str, _process_helpers: None, ray_cluster: ModuleType) -> None:
    model = ScriptedModel({"parent prompt": [calls(call("inspect", id="i")), "parent done"],
                           "child prompt": ["child answer"]})
    tools = [Tool(name="inspect", handler=sh.inspects, isolation=isolation),  # type: ignore[arg-type]
             Tool(name="extra", handler=lambda a: Ok(1))]
    with Agent(model, tools, limits=Limits(process_workers=1), timeouts=Timeouts(tool=60)) as agent:
        agent.registry.remove_member("extra")
        outcome = agent.run("parent prompt")
    assert isinstance(outcome, Completed)
    got = json.loads(results(outcome)["i"])
    assert got["pid"] != os.getpid()
    assert got["model"] == "ScriptedModel" and got["status"] == "running"
    assert got["prompt"] == "parent prompt" and got["changed"] == ["extra"]
    assert got["present"] == ["extra", "inspect"]
    assert got["child"] == "child answer" and got["child_parent"] == outcome.run_id
