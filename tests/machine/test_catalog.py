"""Tools that come and go at run time: the machine resolves them through ``catalog``."""

from __future__ import annotations

from typing import Any

import pytest

from toolvisor import Completed, Ok, Tool
from toolvisor.contract import ToolResultMessage
from toolvisor.machine import MachineConfig
from toolvisor.testing import call, calls, drive


def echo(arguments: dict[str, Any]) -> Ok:
    return Ok(arguments)


def test_a_tool_known_only_to_the_catalog_runs_with_its_own_settings() -> None:
    late = Tool(name="late", handler=echo, scheduling="serial")
    offered: dict[str, Tool] = {}
    config = MachineConfig(tools=[Tool(name="static", handler=echo)], catalog=offered.get)
    before = drive(config, "go", model=[calls(call("late", id="a")), "ok"])
    offered["late"] = late
    after = drive(config, "go", model=[calls(call("late", id="a")), "ok"])
    assert isinstance(before.outcome, Completed) and isinstance(after.outcome, Completed)
    texts = [[m.content for m in r.outcome.messages if isinstance(m, ToolResultMessage)]
             for r in (before, after)]
    assert "not_found" in texts[0][0]
    assert texts[1] == ["{}"]
    assert config.tool_named("static") is config.tools[0]


def test_catalog_must_be_a_lookup() -> None:
    with pytest.raises(TypeError, match="catalog must be a function"):
        MachineConfig(catalog={"late": None})  # type: ignore[arg-type]


def test_an_unknown_tool_is_told_the_whole_catalog_within_bounds() -> None:
    offered = {f"t{i:02d}": Tool(name=f"t{i:02d}", handler=echo) for i in range(60)}
    config = MachineConfig(tools=[Tool(name="static", handler=echo)], catalog=offered.get,
                           catalog_names=offered.keys)
    ran = drive(config, "go", model=[calls(call("ghost", id="a")), "ok"])
    assert isinstance(ran.outcome, Completed)
    (text,) = [m.content for m in ran.outcome.messages if isinstance(m, ToolResultMessage)]
    listed = text.split("known tools: ")[1]
    assert listed.startswith("static, t00, t01,") and "t48, and 11 more" in listed
    assert "t49" not in listed


def test_an_unknown_tool_policy_names_the_catalog_too() -> None:
    with pytest.raises(ValueError, match="known tools: late, static"):
        MachineConfig(tools=[Tool(name="static", handler=echo)], catalog={}.get,
                      catalog_names=lambda: ["late"], tool_policies={"ghost": "continue"})


def test_catalog_names_must_be_a_function() -> None:
    with pytest.raises(TypeError, match="catalog_names must be a function"):
        MachineConfig(catalog_names=["late"])  # type: ignore[arg-type]
