"""What the model really sent reaches the machine: raw arguments text, arguments that are no
object (that call fails, its siblings run), a response cut off at the token limit (no call of
it runs), and the usage of every model call summed into the run's outcome."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from toolvisor.contract import (
    AskUser,
    Err,
    InvalidArguments,
    ModelError,
    ModelResponse,
    Ok,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from toolvisor.machine import (
    CallAttempt,
    Checkpoint,
    Completed,
    ContinueRun,
    Failed,
    Halted,
    HaltRun,
    LogEvent,
    MachineConfig,
    ModelReplied,
    Progress,
    RetryPolicy,
    Suspended,
    TurnMachine,
)
from toolvisor.testing import drive

LOOKUP = Tool(name="lookup", retryable=True)
CONFIG = MachineConfig(tools=[LOOKUP])
GOOD = ToolCall.from_text("good", "lookup", '{ "q" : "a" }')
BROKEN = ToolCall.from_text("broken", "lookup", '{"q": "a"')
LISTED = ToolCall.from_text("listed", "lookup", '["a"]')


def results(outcome: Any) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in outcome.messages if isinstance(m, ToolResultMessage)}


def test_raw_arguments_are_parsed_and_kept_byte_for_byte() -> None:
    assert GOOD.arguments == {"q": "a"} and GOOD.arguments_violation() is None
    assert ToolCall.from_text("e", "lookup", "  ").arguments == {}
    again = ToolCall.model_validate_json(GOOD.model_dump_json())
    assert again == GOOD and again.raw_arguments == '{ "q" : "a" }'


def test_arguments_given_with_their_text_must_be_what_it_parses_to() -> None:
    assert GOOD.model_fields_set == {"id", "name", "arguments", "raw_arguments"}
    assert GOOD.model_dump(exclude_unset=True)["arguments"] == {"q": "a"}
    assert ToolCall(id="good", name="lookup", arguments={"q": "a"},
                    raw_arguments='{ "q" : "a" }') == GOOD
    with pytest.raises(ValidationError, match="must be what raw_arguments parses to"):
        ToolCall(id="good", name="lookup", arguments={"q": "b"}, raw_arguments='{"q": "a"}')
    with pytest.raises(ValidationError, match="frozen"):
        setattr(GOOD, "arguments", {})  # the filled-in arguments stay frozen


def test_arguments_that_are_no_object_fail_that_call_only_through_the_policy() -> None:
    seen: list[tuple[CallAttempt, Any]] = []

    def policy(failed: CallAttempt, error: Any) -> ContinueRun:
        seen.append((failed, error))
        return ContinueRun()

    config = MachineConfig(tools=[LOOKUP], on_tool_error=policy)
    result = drive(config, "go", model=[
        ModelResponse(tool_calls=(GOOD, BROKEN, LISTED)), "done"],
        tools={"lookup": Ok("found")}, roundtrip=True)

    assert isinstance(result.outcome, Completed)
    assert result.tool_batches == [["good"]]
    assert [f.id for f, _ in seen] == ["broken", "listed"]
    broken, listed = (error for _, error in seen)
    assert isinstance(broken, InvalidArguments) and broken.violations[0].validator == "json"
    assert isinstance(listed, InvalidArguments) and "got an array" in str(listed)
    sent = results(result.outcome)
    assert sent["good"].content == "found" and not sent["good"].is_error
    assert sent["broken"].is_error and "not valid JSON" in sent["broken"].content
    assert json.loads(sent["listed"].content)["error"]["reason"] == "invalid_arguments"


def test_a_retry_cannot_fix_arguments_the_model_wrote() -> None:
    config = MachineConfig(tools=[LOOKUP],
                           on_tool_error=RetryPolicy(retry_reported=True, base_delay=0))
    result = drive(config, "go", model=[ModelResponse(tool_calls=(BROKEN,)), "done"])
    assert result.sleeps == [] and result.tool_batches == []
    assert any(isinstance(e, LogEvent) and e.event == "retry_not_possible"
               and e.fields["why"] == "its arguments cannot run" for e in result.trace)


def test_halt_on_invalid_arguments_halts_before_the_batch_starts_as_not_found_does() -> None:
    config = MachineConfig(tools=[LOOKUP], on_tool_error="halt")
    result = drive(config, "go", model=[ModelResponse(tool_calls=(GOOD, BROKEN))],
                   tools={"lookup": Ok("found")})
    assert isinstance(result.outcome, Halted) and result.outcome.reason == "tool_error"
    assert result.tool_batches == []
    assert "not_run" in results(result.outcome)["good"].content


def test_a_truncated_response_runs_none_of_its_calls_and_tells_the_model() -> None:
    cut = ModelResponse(text="Let me", tool_calls=(GOOD, BROKEN), finish_reason="length")
    result = drive(CONFIG, "go", model=[cut, "sorry, again"], roundtrip=True)
    assert isinstance(result.outcome, Completed)
    assert result.tool_batches == []
    for message in results(result.outcome).values():
        assert message.is_error
        assert json.loads(message.content)["error"]["reason"] == "truncated"
    assert any(isinstance(e, LogEvent) and e.event == "model_output_truncated"
               for e in result.trace)


def test_a_truncated_final_answer_completes_and_says_so() -> None:
    result = drive(CONFIG, "go", model=[ModelResponse(text="Once upon a",
                                                      finish_reason="length")])
    assert isinstance(result.outcome, Completed) and result.outcome.finish_reason == "length"


def test_usage_is_summed_over_the_runs_model_calls() -> None:
    calls = ModelResponse(tool_calls=(GOOD,), usage=Usage(input_tokens=10, output_tokens=3))
    final = ModelResponse(text="ok", usage=Usage(input_tokens=20, output_tokens=4,
                                                 cached_tokens=8))
    result = drive(CONFIG, "go", model=[calls, ModelError("unavailable"), final],
                   tools={"lookup": Ok(1)}, roundtrip=True)
    assert result.outcome.usage == Usage(input_tokens=30, output_tokens=7, cached_tokens=8)
    replied = [e.data for e in result.trace if isinstance(e, Progress)
               and e.event == "model_replied"]
    assert [r["usage"] for r in replied] == [calls.usage.model_dump(),  # type: ignore[union-attr]
                                             final.usage.model_dump()]  # type: ignore[union-attr]


def test_halted_failed_and_suspended_runs_keep_their_usage() -> None:
    used = Usage(input_tokens=5, output_tokens=1)
    asks = Tool(name="asks", handler=lambda a: Err("no"))
    halted = drive(MachineConfig(tools=[asks], on_tool_error=lambda f, e: HaltRun()), "go",
                   model=[ModelResponse(tool_calls=(ToolCall(id="a", name="asks"),),
                                        usage=used)])
    failed = drive(CONFIG, "go", model=[ModelResponse(tool_calls=(GOOD,), usage=used),
                                        ModelError("rejected")], tools={"lookup": Ok(1)})
    suspended = drive(CONFIG, "go", model=[ModelResponse(tool_calls=(GOOD,), usage=used)],
                      tools={"lookup": AskUser("sure?")})
    assert isinstance(halted.outcome, Halted) and halted.outcome.usage == used
    assert isinstance(failed.outcome, Failed) and failed.outcome.usage == used
    assert isinstance(suspended.outcome, Suspended) and suspended.outcome.usage == used


def test_the_model_and_response_id_are_reported_with_each_reply() -> None:
    machine = TurnMachine(CONFIG)
    llm = machine.start("go")[-1]
    effects = machine.send(ModelReplied(llm.id, ModelResponse(
        text="hi", model="gpt-x-2026", response_id="resp_9", finish_reason="stop")))
    (replied,) = [e for e in effects if isinstance(e, Progress) and e.event == "model_replied"]
    assert replied.data == {"turn": 1, "attempt": 1, "model": "gpt-x-2026",
                            "response_id": "resp_9", "finish_reason": "stop", "usage": None}


def test_a_version_2_checkpoint_reads_as_the_current_version() -> None:
    machine = TurnMachine(CONFIG)
    llm = machine.start("go")[-1]
    machine.send(ModelReplied(llm.id, ModelResponse(tool_calls=(ToolCall(id="a",
                                                                          name="lookup"),))))
    data = json.loads(machine.checkpoint().to_json())
    data["version"] = 2
    del data["run"]["usage"]
    for message in data["run"]["messages"]:
        for call in message.get("tool_calls", ()):
            del call["raw_arguments"]
    restored = TurnMachine.restore(CONFIG, json.dumps(data))
    assert restored.checkpoint() == Checkpoint.from_json(machine.checkpoint().to_json())
