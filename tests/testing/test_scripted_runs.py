"""A scripted model scripts each run from its own start: runs at once on one model, and a durable
run resumed by a new agent with a new model built from the same script. Real agents."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from toolvisor import Agent, AskUser, Completed, Ok, Suspended, Tool
from toolvisor.contract import AssistantMessage, Message
from toolvisor.durable import SqliteRunStore
from toolvisor.testing import ScriptedModel, call, calls


def lookup(arguments: dict[str, Any]) -> Ok:
    return Ok(arguments["q"])


def confirm(arguments: dict[str, Any]) -> AskUser:
    return AskUser("go on?")


TOOLS = [Tool(name="lookup", handler=lookup), Tool(name="confirm", handler=confirm)]


def call_ids(messages: tuple[Message, ...]) -> list[str]:
    return [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]


def test_three_runs_at_once_on_one_scripted_model_each_follow_the_script() -> None:
    script = [calls(call("lookup", {"q": 1}, id="l1")), calls(call("lookup", {"q": 2}, id="l2")),
              "done"]

    async def three(agent: Agent) -> list[Any]:
        return list(await asyncio.gather(*(agent.arun(p) for p in ("a", "b", "c"))))

    with ScriptedModel(script) as model, Agent(model, TOOLS) as agent:
        outcomes = asyncio.run(three(agent))
    assert [type(o) for o in outcomes] == [Completed] * 3
    assert [(o.text, o.turns, call_ids(o.messages)) for o in outcomes] == [
        ("done", 3, ["l1", "l2"])] * 3
    assert len(model.requests) == 9


def test_a_durable_run_resumed_by_a_new_agent_goes_on_at_its_step(tmp_path: Path) -> None:
    script = [calls(call("lookup", {"q": 1}, id="l1")), calls(call("confirm", id="c2")),
              calls(call("lookup", {"q": 3}, id="l3")), "done"]
    path = tmp_path / "runs.sqlite"
    with SqliteRunStore(path) as store, Agent(ScriptedModel(script), TOOLS,
                                                  store=store) as first:
        suspended = first.run("go")
    assert isinstance(suspended, Suspended) and suspended.run_id is not None
    with SqliteRunStore(path) as store, ScriptedModel(script) as model, \
            Agent(model, TOOLS, store=store) as second:
        outcome = second.resume(suspended, "yes")
    assert isinstance(outcome, Completed) and outcome.text == "done"
    assert call_ids(outcome.messages) == ["l1", "c2", "l3"]  # no turn asked twice
    assert len(model.requests) == 2  # turns 3 and 4: this agent's part of the run
