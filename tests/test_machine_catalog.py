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
