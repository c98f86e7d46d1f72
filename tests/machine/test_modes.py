"""Scheduling, execution modes, suspension and state writes, driven inline."""

from __future__ import annotations

from typing import Any

import pytest

from toolvisor.contract import (
    AskUser,
    CallContext,
    Halt,
    ModelResponse,
    Ok,
    Tool,
    ToolCall,
    ToolResultMessage,
)
from toolvisor.machine import (
    Completed,
    Halted,
    LogEvent,
    MachineConfig,
    Progress,
    StateConflict,
    Suspended,
)
from toolvisor.testing._drive import DriveScriptError, drive


def writer(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Writes ``arguments["value"]`` to ``arguments["key"]`` and reports what it read first."""
    assert ctx.state is not None
    seen = ctx.state.get(arguments["key"])
    ctx.state.set(arguments["key"], arguments["value"])
    return Ok({"seen": seen})


PAR = Tool(name="par", handler=writer)
SER = Tool(name="ser", handler=writer, scheduling="serial")
ASK = Tool(name="ask", handler=lambda a: AskUser(f"ok {a.get('n')}?", ("yes", "no")))
TOOLS = [PAR, SER, ASK]


def c(id: str, name: str, key: str = "k", value: Any = None, **extra: Any) -> ToolCall:
    return ToolCall(id=id, name=name, arguments={"key": key, "value": value or id, **extra})


def turn(*calls: ToolCall) -> ModelResponse:
    return ModelResponse(tool_calls=calls)


def results(outcome: Any) -> list[ToolResultMessage]:
    return [m for m in outcome.messages if isinstance(m, ToolResultMessage)]


@pytest.mark.parametrize("mode", ["parallel_batch_approval", "parallel_streaming"])
def test_parallel_calls_run_first_together_then_serial_ones_in_order(mode: Any) -> None:
    calls = turn(c("s1", "ser", "a"), c("p1", "par", "b"), c("s2", "ser", "c"),
                 c("p2", "par", "d"))
    run = drive(MachineConfig(tools=TOOLS, mode=mode), "go", model=[calls, "done"])
    assert run.tool_batches == [["p1", "p2"], ["s1"], ["s2"]]
    assert [m.tool_call_id for m in results(run.outcome)] == ["s1", "p1", "s2", "p2"]


def test_sequential_runs_one_call_per_effect_in_emitted_order_with_fresh_state() -> None:
    calls = turn(c("s1", "ser", value=1), c("p1", "par", value=2), c("p2", "par", value=3))
    run = drive(MachineConfig(tools=TOOLS, mode="sequential"), "go", model=[calls, "done"])
    assert run.tool_batches == [["s1"], ["p1"], ["p2"]]
    assert [m.content for m in results(run.outcome)] == [
        '{"seen":null}', '{"seen":1}', '{"seen":2}']
    assert run.outcome.state == {"k": 3}
    assert run.outcome.state_conflicts == ()


def test_sequential_stops_at_the_first_suspension_and_runs_the_rest_after_resume() -> None:
    calls = turn(c("p1", "par"), c("q1", "ask"), c("p2", "par", "j"), c("q2", "ask"))
    config = MachineConfig(tools=TOOLS, mode="sequential")
    first = drive(config, "go", model=[calls])
    assert first.tool_batches == [["p1"], ["q1"]]
    assert isinstance(first.outcome, Suspended)
    assert [q.call_id for q in first.outcome.questions] == ["q1"]
    run = drive(config, "go", model=[calls, "done"], answers=lambda q: "yes")
    assert run.tool_batches == [["p1"], ["q1"], ["p2"], ["q2"]]
    assert [m.content for m in results(run.outcome)][1::2] == ["yes", "yes"]


def test_batch_approval_waits_for_every_answer_before_the_batch_goes_on() -> None:
    calls = turn(c("q1", "ask", n=1), c("s1", "ser"), c("q2", "ask", n=2), c("p1", "par", "b"))
    config = MachineConfig(tools=TOOLS, mode="parallel_batch_approval")
    first = drive(config, "go", model=[calls])
    assert first.tool_batches == [["q1", "q2", "p1"]]  # the sibling finished, serial waits
    assert isinstance(first.outcome, Suspended)
    assert [(q.call_id, q.question, q.options) for q in first.outcome.questions] == [
        ("q1", "ok 1?", ("yes", "no")), ("q2", "ok 2?", ("yes", "no"))]
    run = drive(config, "go", model=[calls, "done"], answers={"q1": "yes", "q2": "no"},
                answer_one_by_one=True)
    suspensions = [e.outcome for e in run.trace if getattr(e, "kind", "") == "done"]
    assert [[q.call_id for q in s.questions] for s in suspensions[:-1]] == [["q1", "q2"],
                                                                            ["q2"]]
    assert run.tool_batches == [["q1", "q2", "p1"], ["s1"]]
    assert [m.content for m in results(run.outcome)][::2] == ["yes", "no"]


def test_streaming_lets_the_rest_of_the_batch_run_while_calls_wait() -> None:
    calls = turn(c("q1", "ask", n=1), c("s1", "ser"), c("q2", "ask", n=2), c("p1", "par", "b"))
    config = MachineConfig(tools=TOOLS, mode="parallel_streaming")
    first = drive(config, "go", model=[calls])
    assert first.tool_batches == [["q1", "q2", "p1"], ["s1"]]
    assert isinstance(first.outcome, Suspended) and first.outcome.call_ids == ("q1", "q2")
    run = drive(config, "go", model=[calls, "done"], answers={"q1": "yes", "q2": "no"},
                answer_one_by_one=True)
    assert isinstance(run.outcome, Completed)
    assert [m.content for m in results(run.outcome)][::2] == ["yes", "no"]


def test_a_halt_in_a_serial_step_leaves_later_calls_unrun_but_answered() -> None:
    stop = Tool(name="stop", handler=lambda a: Halt("user_quit", "bye"), scheduling="serial")
    calls = turn(c("p1", "par"), c("h1", "stop"), c("s1", "ser", "z"))
    run = drive(MachineConfig(tools=[*TOOLS, stop]), "go", model=[calls])
    outcome = run.outcome
    assert isinstance(outcome, Halted) and (outcome.reason, outcome.result) == ("user_quit",
                                                                                "bye")
    assert run.tool_batches == [["p1"], ["h1"]]
    messages = results(outcome)
    assert [m.tool_call_id for m in messages] == ["p1", "h1", "s1"]
    assert messages[2].is_error and "not_run" in messages[2].content
    assert outcome.state == {"k": "p1"}


def test_a_halt_while_calls_wait_for_answers_still_answers_them() -> None:
    stop = Tool(name="stop", handler=lambda a: Halt("user_quit"))
    calls = turn(c("q1", "ask"), c("h1", "stop"))
    outcome = drive(MachineConfig(tools=[*TOOLS, stop]), "go", model=[calls]).outcome
    assert isinstance(outcome, Halted)
    assert "not_answered" in results(outcome)[0].content


@pytest.mark.parametrize("delivery", ["together", "one_by_one", "reversed"])
def test_parallel_writes_to_one_key_keep_the_first_in_call_order(delivery: Any) -> None:
    calls = turn(c("p1", "par", value="first"), c("p2", "par", value="second"),
                 c("p3", "par", "other", value=3), c("s1", "ser", value="serial"))
    run = drive(MachineConfig(tools=TOOLS), "go", model=[calls, "done"], delivery=delivery)
    outcome = run.outcome
    assert outcome.state_conflicts == (StateConflict(key="k", kept_call_id="p1",
                                                     dropped_call_id="p2", turn=1),)
    messages = results(outcome)
    assert [m.content.splitlines()[0] for m in messages] == [
        '{"seen":null}', '{"seen":null}', '{"seen":null}', '{"seen":"first"}']
    assert "write to state key 'k' was discarded" in messages[1].content
    assert outcome.state == {"k": "serial", "other": 3}
    warnings = [e for e in run.trace if isinstance(e, LogEvent) and e.level == "warning"]
    assert [e.event for e in warnings] == ["state_write_conflict"]
    assert any(isinstance(e, Progress) and e.event == "state_conflict" for e in run.trace)


def test_an_initial_state_is_what_the_first_calls_read() -> None:
    run = drive(MachineConfig(tools=TOOLS), "go", model=[turn(c("p1", "par")), "done"],
                state={"k": "initial"})
    assert results(run.outcome)[0].content == '{"seen":"initial"}'
    assert run.outcome.state == {"k": "p1"}


def test_the_driver_runs_scripted_handlers_inline_and_fails_loudly_on_gaps() -> None:
    def handler(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        return Ok(f"attempt {ctx.attempt} of {ctx.tool_call_id}")

    bare = Tool(name="bare")
    calls = turn(ToolCall(id="b1", name="bare"))
    run = drive(MachineConfig(tools=[bare]), "go", model=[calls, "done"], tools={"b1": handler})
    assert results(run.outcome)[0].content == "attempt 1 of b1"
    with pytest.raises(DriveScriptError, match="no scripted outcome for call 'b1'"):
        drive(MachineConfig(tools=[bare]), "go", model=[calls, "done"])
    with pytest.raises(DriveScriptError, match="asked the model for a response"):
        drive(MachineConfig(tools=[bare]), "go", model=[calls], tools={"bare": Ok(1)})
    with pytest.raises(DriveScriptError, match="has 1 step"):
        drive(MachineConfig(tools=[bare]), "go", model=[calls, calls, "done"],
              tools={"bare": [Ok(1)]})
