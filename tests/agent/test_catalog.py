"""Tools that come and go at run time, through the agent's catalog."""

from __future__ import annotations

from typing import Any

import pytest

from toolvisor import Agent, CallContext, Completed, Ok, Tool
from toolvisor.contract import ToolResultMessage
from toolvisor.registry import DynamicToolProvider, ToolRegistry
from toolvisor.testing import ScriptedModel, call, calls


def offered(model: ScriptedModel, turn: int) -> list[str]:
    return [spec.name for spec in model.requests[turn].tools]


def results(outcome: Any) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in outcome.messages
            if isinstance(m, ToolResultMessage)}


def test_a_tool_added_to_a_provider_mid_session_is_offered_and_runs() -> None:
    plugins = DynamicToolProvider()
    model = ScriptedModel({"weather?": [calls(call("weather", id="w1")), "first"],
                           "weather now?": [calls(call("weather", id="w2")), "second"]})
    with Agent(model, ToolRegistry({"plugins": plugins})) as agent:
        first = agent.run("weather?")
        plugins.add(Tool(name="weather", handler=lambda a: Ok("sunny")))
        second = agent.run("weather now?")
    assert isinstance(first, Completed) and isinstance(second, Completed)
    assert offered(model, 0) == [] and offered(model, 2) == ["weather"]
    assert "not_found" in results(first)["w1"]
    assert results(second)["w2"] == "sunny"


def test_a_handler_edits_the_session_catalog_through_its_context() -> None:
    def unlock(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert ctx.sessions is not None
        return Ok(sorted(ctx.sessions.set_tool_membership(["admin"], True)))

    admin = Tool(name="admin", handler=lambda a: Ok("root"))
    registry = ToolRegistry.from_tools([Tool(name="unlock", handler=unlock), admin])
    registry.remove_member("admin")
    model = ScriptedModel([calls(call("admin", id="a1")), calls(call("unlock", id="u")),
                           calls(call("admin", id="a2")), "done"])
    with Agent(model, registry) as agent:
        outcome = agent.run("get root")
    assert isinstance(outcome, Completed)
    assert offered(model, 0) == ["unlock"] and offered(model, 2) == ["unlock", "admin"]
    got = results(outcome)
    assert "not_found" in got["a1"] and got["u"] == '["admin"]' and got["a2"] == "root"


def test_tools_passed_with_a_registry_join_it_and_a_wrong_catalog_is_refused() -> None:
    registry = ToolRegistry()
    with Agent(ScriptedModel([]), [registry, Tool(name="t", handler=lambda a: Ok(1))]) as agent:
        assert agent.registry is registry and registry.members() == {"t"}
    with pytest.raises(TypeError, match="tools must be a sequence of Tool and McpToolProvider"):
        Agent(ScriptedModel([]), {"t": 1})  # type: ignore[arg-type]
