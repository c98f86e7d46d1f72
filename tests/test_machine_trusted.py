"""What the machine builds from its own values without validating them again (its progress and
log effects, model requests, calls to run, result messages) is exactly what validation builds:
every field set, equal, written to the same JSON, and copied with changes as any model."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from toolvisor import Err, Ok, Tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolCall, ToolError
from toolvisor.machine import (
    CallOutcome,
    CallToRun,
    Done,
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
        if isinstance(effect, Progress | LogEvent | LlmCall):
            _as_validated(effect)
        if isinstance(effect, LlmCall):
            _as_validated(effect.request)
    to_run = [c for e in effects if isinstance(e, ToolCalls) for c in e.calls]
    assert any(c.backoff is not None and c.attempt == 2 for c in to_run)  # the retry
    for call in to_run:
        _as_validated(call)
        assert call.state == {"k": [1]}
    done = effects[-1]
    assert isinstance(done, Done)
    for message in done.outcome.messages:
        _as_validated(message)


def test_a_trusted_value_is_copied_with_changes_as_any_model() -> None:
    request = trusted(ModelRequest, messages=(), tools=(), attempt=1, model=None)
    assert request.model_copy(update={"attempt": 2}) == ModelRequest(messages=(), attempt=2)
    call = trusted(CallToRun, call=ToolCall(id="a", name="t"), turn=1, attempt=1, state={},
                   backoff=None)
    assert call == CallToRun(call=ToolCall(id="a", name="t"), turn=1)
    assert call.model_copy(update={"attempt": 2}).attempt == 2
