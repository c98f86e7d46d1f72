"""What the machine builds from its own values without validating them again (its progress and
log effects, model requests, calls to run, result messages) is exactly what validation builds:
every field set, equal, written to the same JSON, and copied with changes as any model."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from toolvisor import Err, Ok, Tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolCall, ToolError
from toolvisor.machine import (
    CallOutcome,
    CallToRun,
    Completed,
    Done,
    Failed,
    Halted,
    LlmCall,
    LogEvent,
    MachineConfig,
    ModelReplied,
    Progress,
    RetryPolicy,
    ToolCalls,
    ToolResults,
    TurnMachine,
)
from toolvisor.machine._trusted import trusted


def _noop(arguments: dict[str, Any]) -> Ok:
    return Ok(None)


def _as_validated(value: BaseModel) -> None:
    cls = type(value)
    assert set(vars(value)) == set(cls.model_fields), cls  # every field, defaults included
    again = cls.model_validate(value.model_dump())
    assert again == value and again.model_dump_json() == value.model_dump_json()


def test_what_the_machine_builds_itself_is_what_validation_builds() -> None:
    config = MachineConfig(tools=[Tool("flaky", handler=_noop, retryable=True)],
                           on_tool_error=RetryPolicy(base_delay=0.0), seed=3)
    machine = TurnMachine(config)
    effects = machine.start("go", state={"k": [1]})
    calls = (ToolCall(id="a", name="flaky"), ToolCall(id="b", name="flaky"))
    effects += machine.send(ModelReplied(effects[-1].id, ModelResponse(tool_calls=calls)))
    failed = Err(ToolError("handler_raised", "boom", tool_name="flaky", tool_call_id="a"))
    effects += machine.send(ToolResults(effects[-1].id, (CallOutcome("a", failed),)))
    effects += machine.send(ToolResults(effects[-1].id, (CallOutcome("b", Ok(1)),
                                                         CallOutcome("a", Ok(2)))))
    effects += machine.send(ModelReplied(effects[-1].id, ModelResponse(text="done")))
    kinds = {type(e) for e in effects}
    assert {Progress, LogEvent, LlmCall, ToolCalls} <= kinds
    for effect in effects:
        if isinstance(effect, Progress | LogEvent | LlmCall | ToolCalls | Done):
            _as_validated(effect)
        if isinstance(effect, LlmCall):
            _as_validated(effect.request)
    to_run = [c for e in effects if isinstance(e, ToolCalls) for c in e.calls]
    assert any(c.backoff is not None and c.attempt == 2 for c in to_run)  # the retry
    for call in to_run:
        _as_validated(call)
        assert call.state == {"k": [1]}
    done = effects[-1]
    assert isinstance(done, Done) and isinstance(done.outcome, Completed)
    _as_validated(done.outcome)
    for message in done.outcome.messages:
        _as_validated(message)


@pytest.mark.parametrize("end", ["max_turns", "cancel", "abort"])
def test_a_run_ends_with_what_validation_builds(end: str) -> None:
    machine = TurnMachine(MachineConfig(tools=[Tool("t", handler=_noop)], max_turns=1))
    waiting = machine.start("go", state={"k": 1})[-1]
    reply = ModelResponse(tool_calls=(ToolCall(id="a", name="t"),))
    waiting = machine.send(ModelReplied(waiting.id, reply))[-1]
    if end == "max_turns":
        done = machine.send(ToolResults(waiting.id, (CallOutcome("a", Ok(1)),)))[-1]
    else:
        done = (machine.cancel() if end == "cancel" else machine.abort("gone"))[-1]
    assert isinstance(done, Done) and isinstance(done.outcome, Halted | Failed)
    _as_validated(done)
    _as_validated(done.outcome)
    assert done.outcome.state == {"k": 1} and done.outcome.state is not machine._run.state


def test_a_trusted_value_is_copied_with_changes_as_any_model() -> None:
    request = trusted(ModelRequest, messages=(), tools=(), attempt=1, model=None)
    assert request.model_copy(update={"attempt": 2}) == ModelRequest(messages=(), attempt=2)
    call = trusted(CallToRun, call=ToolCall(id="a", name="t"), turn=1, attempt=1, state={},
                   backoff=None)
    assert call == CallToRun(call=ToolCall(id="a", name="t"), turn=1)
    assert call.model_copy(update={"attempt": 2}).attempt == 2
