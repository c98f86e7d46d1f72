"""The agent's settings objects (``Limits``, ``Timeouts``, ``Tracing``, ``Clocks``), its
one-argument catalog and per-tool ``on_tool_error``, and its documented surface."""

from __future__ import annotations

import inspect
import re
import threading
from typing import Any

import pytest

from toolvisor import (
    Agent,
    CallContext,
    Clocks,
    Completed,
    Err,
    Halted,
    Limits,
    Ok,
    RetryPolicy,
    Timeouts,
    Tool,
    ToolError,
    Tracing,
)
from toolvisor.contract import ToolResultMessage
from toolvisor.registry import ToolRegistry
from toolvisor.testing import ScriptedModel, call, calls


def results(outcome: Any) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in outcome.messages
            if isinstance(m, ToolResultMessage)}


@pytest.mark.parametrize(("build", "error", "message"), [
    (lambda: Limits(turns=0), ValueError, r"Limits\.turns must be an int >= 1, got 0"),
    (lambda: Limits(concurrent_calls=True), ValueError, r"Limits\.concurrent_calls must be"),
    (lambda: Limits(process_workers=0), ValueError, r"Limits\.process_workers must be an int"),
    (lambda: Limits(session_depth=-1), ValueError, r"Limits\.session_depth must be an int >= 0"),
    (lambda: Limits(child_sessions=1.5), ValueError, r"Limits\.child_sessions must be an int"),
    (lambda: Limits(tool_output=100), TypeError, r"Limits\.tool_output must be an "
                                                 r"OutputProjection or None, got int"),
    (lambda: Limits(per_tool={"t": 3}), TypeError, r"Limits\.per_tool must be a Resilience, a "
                                                   r"mapping from tool name to Resilience"),
    (lambda: Timeouts(tool=-1), ValueError, r"Timeouts\.tool must be a positive, finite number "
                                            r"of seconds, got -1"),
    (lambda: Timeouts(model=float("inf")), ValueError, r"Timeouts\.model must be a positive"),
    (lambda: Timeouts(model_warn_after=0), ValueError, r"Timeouts\.model_warn_after must be a "
                                                       r"positive, finite number of seconds or "
                                                       r"None"),
    (lambda: Tracing(provider="otel"), TypeError, r"Tracing\.provider must be an OpenTelemetry "
                                                  r"TracerProvider or None, got str"),
    (lambda: Tracing(content="yes"), TypeError, r"Tracing\.content must be True or False"),
    (lambda: Tracing(on_progress=print), None, None),
    (lambda: Tracing(on_progress=3), TypeError, r"Tracing\.on_progress must be a function"),
    (lambda: Clocks(wall=1.0), TypeError, r"Clocks\.wall must be a function \(\) -> seconds"),
    (lambda: Clocks(monotonic=None), TypeError, r"Clocks\.monotonic must be a function"),
    (lambda: Clocks(seed="1"), TypeError, r"Clocks\.seed must be an int, got '1'"),
    (lambda: Limits(max_turns=3), TypeError, r"Limits has no field 'max_turns'; its fields are "
                                             r"turns, concurrent_calls, process_workers"),
    (lambda: Timeouts(tool_timeout=3), TypeError, r"Timeouts has no field 'tool_timeout'; its "
                                                  r"fields are tool, model, model_warn_after"),
])
def test_a_settings_object_refuses_a_bad_field_naming_it(build: Any, error: type[Exception] | None,
                                                         message: str | None) -> None:
    if error is None:
        build()
        return
    with pytest.raises(error, match=message):
        build()


@pytest.mark.parametrize(("setting", "message"), [
    ({"limits": {"turns": 3}}, r"limits must be a toolvisor\.Limits "
                               r"\(limits=Limits\(\.\.\.\)\), got dict"),
    ({"timeouts": 30}, r"timeouts must be a toolvisor\.Timeouts \(timeouts=Timeouts\(\.\.\.\)\)"),
    ({"tracing": Timeouts()}, r"tracing must be a toolvisor\.Tracing .*, got Timeouts"),
    ({"clocks": Limits()}, r"clocks must be a toolvisor\.Clocks .*, got Limits"),
])
def test_the_agent_refuses_a_settings_object_of_the_wrong_kind(setting: dict[str, Any],
                                                                message: str) -> None:
    with pytest.raises(TypeError, match=message):
        Agent(ScriptedModel([]), **setting)


def test_settings_objects_are_frozen() -> None:
    limits = Limits(turns=2)
    with pytest.raises(AttributeError):
        limits.turns = 3  # type: ignore[misc]


def test_the_settings_take_effect() -> None:
    release = threading.Event()

    def hang(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        ctx.cancelled.wait(10)
        release.set()
        return Ok("late")

    model = ScriptedModel([calls(call("hang", id="h")), calls(call("hang", id="again"))])
    with Agent(model, [Tool("hang", handler=hang, isolation="thread")],
               limits=Limits(turns=2), timeouts=Timeouts(tool=0.2)) as agent:
        outcome = agent.run("go")
    assert release.wait(5)
    assert isinstance(outcome, Halted) and outcome.reason == "max_turns"
    assert '"reason":"timeout"' in results(outcome)["h"].replace(" ", "")


def test_on_tool_error_by_tool_name_with_a_default_for_every_other_tool() -> None:
    tries: dict[str, int] = {"flaky": 0, "charge": 0}

    def failing(name: str) -> Any:
        def handler(arguments: dict[str, Any]) -> Ok | Err:
            tries[name] += 1
            if name == "flaky" and tries[name] > 1:
                return Ok("fine")
            return Err(ToolError("handler_raised", f"{name} failed"))
        return handler

    tools = [Tool("flaky", handler=failing("flaky"), retryable=True),
             Tool("charge", handler=failing("charge"))]
    retry = RetryPolicy(max_attempts=3, base_delay=0, jitter=0, retry_reported=True)
    model = ScriptedModel([calls(call("flaky", id="f")), calls(call("charge", id="c")), "done"])
    with Agent(model, tools, on_tool_error={"charge": "halt", "*": retry}) as agent:
        outcome = agent.run("go")
    assert tries == {"flaky": 2, "charge": 1}  # "*" retried flaky; charge halted at once
    assert isinstance(outcome, Halted) and outcome.reason == "tool_error"
    assert results(outcome)["f"] == "fine"


def test_on_tool_error_without_a_default_continues_and_an_unknown_name_is_refused() -> None:
    broken = Tool("broken", handler=lambda a: Err(ToolError("handler_raised", "no")))
    other = Tool("other", handler=lambda a: Ok(1))
    model = ScriptedModel([calls(call("broken", id="b")), "went on"])
    with Agent(model, [broken, other], on_tool_error={"other": "halt"}) as agent:
        assert isinstance(agent.run("go"), Completed)  # broken: the default, "continue"
    with pytest.raises(ValueError, match=r"on_tool_error names unknown tool 'chrage'; known "
                                         r"tools: \['broken', 'other'\] \(use '\*' for every "):
        Agent(ScriptedModel([]), [broken, other], on_tool_error={"chrage": "halt"})


def test_tools_take_one_registry_and_refuse_what_is_no_tool() -> None:
    with pytest.raises(TypeError, match="tools holds two ToolRegistry objects"):
        Agent(ScriptedModel([]), [ToolRegistry(), ToolRegistry()])
    with pytest.raises(TypeError, match="tools holds Tool, McpToolProvider and ToolRegistry "
                                        "objects only, got function"):
        Agent(ScriptedModel([]), [lambda a: Ok(1)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"got Tool \(wrap one tool in a list\)"):
        Agent(ScriptedModel([]), Tool("t", handler=lambda a: Ok(1)))  # type: ignore[arg-type]


def test_as_tool_call_timeout_is_the_deadline_of_each_call() -> None:
    def hang(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        ctx.cancelled.wait(10)
        return Ok("late")

    child_model = ScriptedModel([calls(call("hang", id="h"))])
    parent_model = ScriptedModel([calls(call("child", {"prompt": "dig"}, id="c")), "gave up"])
    with Agent(child_model, [Tool("hang", handler=hang, isolation="thread")],
               name="child") as child:
        tool = child.as_tool(name="child", description="digs", call_timeout=0.3)
        assert tool.timeout == 0.3
        with Agent(parent_model, [tool]) as parent:
            outcome = parent.run("go")
    assert isinstance(outcome, Completed) and outcome.text == "gave up"
    assert "timeout" in results(outcome)["c"]


def _documented_arguments(doc: str) -> set[str]:
    """The names an ``Args:`` section of a Google-style docstring documents."""
    section = doc.split("Args:", 1)[1] if "Args:" in doc else ""
    section = re.split(r"\n\s*(?:Returns|Raises|Yields):", section, maxsplit=1)[0]
    return set(re.findall(r"^\s{4,}(\w+):", section, flags=re.MULTILINE))


def test_every_public_method_and_parameter_of_the_agent_is_documented_where_defined() -> None:
    init = inspect.signature(Agent.__init__).parameters
    assert len(init) - 1 <= 15, "Agent.__init__ takes at most 15 parameters"
    undocumented = {}
    for name, member in inspect.getmembers(Agent):
        if (name.startswith("_") and name != "__init__") or not inspect.isfunction(member):
            continue
        parameters = [p for p in inspect.signature(member).parameters if p != "self"]
        doc = inspect.getdoc(member) or ""
        missing = set(parameters) - _documented_arguments(doc)
        if not doc or missing:
            undocumented[name] = sorted(missing) or ["no docstring"]
    assert undocumented == {}
    assert "processes" in vars(Agent), "agent.processes is a method of Agent"
