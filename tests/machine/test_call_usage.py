"""What a batch's calls spent reaches the run's usage: only the calls that spent something are
summed, and a call that spent nothing leaves it exactly as it was."""

from __future__ import annotations

from toolvisor import Ok, Tool
from toolvisor.contract import ModelResponse, ToolCall, Usage
from toolvisor.machine import (
    CallOutcome,
    Completed,
    Done,
    MachineConfig,
    ModelReplied,
    ToolResults,
    TurnMachine,
)


def _noop(arguments: dict[str, object]) -> Ok:
    return Ok(None)


def _run(spent: list[Usage]) -> Usage:
    machine = TurnMachine(MachineConfig(tools=[Tool("noop", handler=_noop)]))
    waiting = machine.start("go")[-1]
    calls = tuple(ToolCall(id=f"c{i}", name="noop") for i in range(len(spent)))
    effects = machine.send(ModelReplied(waiting.id, ModelResponse(
        tool_calls=calls, usage=Usage(input_tokens=10, output_tokens=1))))
    outcomes = tuple(CallOutcome(f"c{i}", Ok(None), usage=used) for i, used in enumerate(spent))
    effects = machine.send(ToolResults(effects[-1].id, outcomes))
    done = machine.send(ModelReplied(effects[-1].id, ModelResponse(text="ok")))[-1]
    assert isinstance(done, Done) and isinstance(done.outcome, Completed)
    return done.outcome.usage


def test_calls_that_spent_nothing_leave_the_usage_as_it_was() -> None:
    assert _run([Usage(), Usage()]) == Usage(input_tokens=10, output_tokens=1)


def test_what_calls_spent_is_summed_among_calls_that_spent_nothing() -> None:
    used = _run([Usage(), Usage(input_tokens=3, output_tokens=2), Usage(),
                 Usage(input_tokens=4, cached_tokens=0)])
    assert used == Usage(input_tokens=17, output_tokens=3, cached_tokens=0)
