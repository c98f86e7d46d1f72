"""A retried tool call waits for its own backoff, never for a sibling: plain machine calls."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolvisor.contract import Err, Halt, ModelResponse, Ok, Tool, ToolCall, ToolError
from toolvisor.machine import (
    Backoff,
    CallOutcome,
    Halted,
    LlmCall,
    LogEvent,
    MachineConfig,
    ModelReplied,
    ResponseRefused,
    RetryPolicy,
    ToolCalls,
    ToolResults,
    TurnMachine,
)
from toolvisor.testing import drive

SLOW = Tool(name="slow")
FLAKY = Tool(name="flaky", retryable=True)
SHAKY = Tool(name="shaky", retryable=True)
STOP = Tool(name="stop")
QUICK = RetryPolicy(base_delay=0.05, jitter=0)
PATIENT = RetryPolicy(base_delay=0.5, jitter=0)
PARALLEL = ["parallel_batch_approval", "parallel_streaming"]
TIMEOUT = Err(ToolError("timeout"))


def config(mode: str) -> MachineConfig:
    return MachineConfig(tools=[SLOW, FLAKY, SHAKY, STOP], mode=mode,  # type: ignore[arg-type]
                         tool_policies={"flaky": QUICK, "shaky": PATIENT})


def batch(mode: str, *names: str) -> tuple[TurnMachine, ToolCalls]:
    """A run whose first turn asks for one call of each tool named (id = the name)."""
    machine = TurnMachine(config(mode))
    llm = machine.start("go")[-1]
    effect = machine.send(ModelReplied(llm.id, ModelResponse(tool_calls=tuple(
        ToolCall(id=name, name=name) for name in names))))[-1]
    assert isinstance(effect, ToolCalls)
    return machine, effect


def send(machine: TurnMachine, call_id: str, result: Any) -> list[Any]:
    """Send one call's result for the effect the machine waits on (the newest ToolCalls)."""
    waiting = machine.waiting_effect_id
    assert waiting is not None
    return machine.send(ToolResults(waiting, (CallOutcome(call_id, result),)))


@pytest.mark.parametrize("mode", PARALLEL)
def test_a_retry_starts_while_its_slow_sibling_still_runs(mode: str) -> None:
    machine, first = batch(mode, "slow", "flaky")
    effects = send(machine, "flaky", TIMEOUT)
    retry = effects[-1]
    assert isinstance(retry, ToolCalls) and retry.id > first.id  # before slow's result
    slow, flaky = retry.calls
    assert slow == first.calls[0]  # still running: listed as first emitted, not started again
    assert (flaky.call.id, flaky.attempt) == ("flaky", 2)
    assert flaky.backoff == Backoff(seconds=0.05, since=retry.id)  # from its own failure
    [scheduled] = [e for e in effects if isinstance(e, LogEvent) and e.event == "retry_scheduled"]
    assert scheduled.fields == {"turn": 1, "call_ids": ["flaky"], "seconds": 0.05}


@pytest.mark.parametrize("mode", PARALLEL)
@pytest.mark.parametrize("last", ["slow", "flaky"])
def test_the_batch_settles_when_every_call_retries_included_is_done(mode: str,
                                                                     last: str) -> None:
    machine, _ = batch(mode, "slow", "flaky")
    send(machine, "flaky", TIMEOUT)
    first = "flaky" if last == "slow" else "slow"
    waiting = send(machine, first, Ok(first))[-1]
    assert not isinstance(waiting, LlmCall)
    assert [c.call.id for c in machine.outstanding.calls] == [last]  # type: ignore[union-attr]
    llm = send(machine, last, Ok(last))[-1]
    assert isinstance(llm, LlmCall)
    assert [m.content for m in llm.request.messages[-2:]] == ["slow", "flaky"]


def test_results_go_to_the_newest_effect_and_a_superseded_one_is_stale() -> None:
    machine, first = batch("parallel_streaming", "slow", "flaky")
    send(machine, "flaky", TIMEOUT)
    before = machine.checkpoint()
    with pytest.raises(ResponseRefused, match=f"stale effect id {first.id}"):
        machine.send(ToolResults(first.id, (CallOutcome("slow", Ok(1)),)))
    assert machine.checkpoint() == before


def test_each_retry_waits_its_own_backoff_counted_from_its_own_failure() -> None:
    machine, _ = batch("parallel_batch_approval", "slow", "flaky", "shaky")
    flaky = send(machine, "flaky", TIMEOUT)[-1]
    shaky = send(machine, "shaky", TIMEOUT)[-1]
    assert isinstance(flaky, ToolCalls) and isinstance(shaky, ToolCalls)
    assert [(c.call.id, c.attempt, c.backoff) for c in shaky.calls] == [
        ("slow", 1, None),
        ("flaky", 2, Backoff(seconds=0.05, since=flaky.id)),  # as it was first listed
        ("shaky", 2, Backoff(seconds=0.5, since=shaky.id)),
    ]


def test_a_restored_run_re_emits_the_retry_with_its_backoff_and_the_running_sibling() -> None:
    machine, _ = batch("parallel_streaming", "slow", "flaky")
    retry = send(machine, "flaky", TIMEOUT)[-1]
    restored = TurnMachine.restore(machine.config, json.loads(json.dumps(
        machine.checkpoint().to_json())))
    assert restored.reemit() == [retry]
    send(restored, "flaky", Ok("second"))
    assert [c.call.id for c in restored.reemit()[0].calls] == ["slow"]  # type: ignore[attr-defined]
    assert isinstance(send(restored, "slow", Ok("slow"))[-1], LlmCall)


def test_no_retry_starts_while_a_sibling_halts_the_run() -> None:
    machine, _ = batch("parallel_streaming", "stop", "flaky", "slow")
    send(machine, "stop", Halt("enough"))
    effects = send(machine, "flaky", TIMEOUT)
    assert not any(isinstance(e, ToolCalls) for e in effects)
    done = send(machine, "slow", Ok("slow"))[-1]
    assert isinstance(done.outcome, Halted) and done.outcome.reason == "enough"
    flaky = next(m for m in done.outcome.messages if getattr(m, "tool_call_id", "") == "flaky")
    assert flaky.is_error and "timeout" in flaky.content


def test_a_sequential_retry_is_a_call_with_a_backoff_not_a_sleep() -> None:
    run = drive(config("sequential"), "go",
                model=[ModelResponse(tool_calls=(ToolCall(id="f", name="flaky"),)), "ok"],
                tools={"flaky": [TIMEOUT, Ok(1)]})
    assert run.tool_batches == [["f"], ["f"]] and run.sleeps == [0.05]
    assert run.outcome.kind == "completed"


@pytest.mark.parametrize("delivery", ["one_by_one", "reversed"])
def test_drive_runs_a_retry_beside_its_running_sibling(delivery: Any) -> None:
    run = drive(config("parallel_streaming"), "go", delivery=delivery, roundtrip=True,
                model=[ModelResponse(tool_calls=(ToolCall(id="s", name="slow"),
                                                 ToolCall(id="f", name="flaky"))), "ok"],
                tools={"slow": Ok("slow"), "flaky": [TIMEOUT, Ok("second")]})
    assert run.sleeps == [0.05] and run.outcome.kind == "completed"
    retried = [b for b in run.tool_batches if "f" in b][1:]
    assert retried == ([["s", "f"]] if delivery == "reversed" else [["f"]])
