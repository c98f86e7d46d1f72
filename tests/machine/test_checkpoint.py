"""Checkpoints: JSON round trips in every waiting state, identical replays, tampering refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolvisor.contract import (
    AskUser,
    Err,
    HandlerResult,
    ModelError,
    ModelResponse,
    Ok,
    Pending,
    Tool,
    ToolCall,
    ToolError,
)
from toolvisor.machine import (
    CHECKPOINT_VERSION,
    CallOutcome,
    Checkpoint,
    CheckpointError,
    Done,
    Effect,
    LlmCall,
    MachineConfig,
    ModelReplied,
    NotPerformed,
    RetryPolicy,
    Sleep,
    Slept,
    Suspended,
    ToolCalls,
    ToolResults,
    TurnMachine,
)

FLAKY = Tool(name="flaky", retryable=True)
ASK = Tool(name="ask")
PLAIN = Tool(name="plain")
CONFIG = MachineConfig(tools=[FLAKY, ASK, PLAIN], seed=11,
                       tool_policies={"flaky": RetryPolicy(base_delay=1, jitter=0.5)})

MODEL = {
    1: ModelResponse(text="working", tool_calls=(
        ToolCall(id="f", name="flaky", arguments={"x": [1, 2]}),
        ToolCall(id="q", name="ask"),
        ToolCall(id="p", name="plain"))),
    2: ModelResponse(text="all done"),
}


def tool_result(call_id: str, attempt: int) -> tuple[HandlerResult, dict[str, Any]]:
    """What each call returns, by id and attempt: the same in every process."""
    if call_id == "f":
        if attempt == 1:
            return Err(ToolError("timeout", cause=TimeoutError("slow"))), {"f": attempt}
        return Ok({"attempt": attempt}), {"f": attempt}
    if call_id == "q":
        return AskUser("go on?", ("yes", "no")), {"q": True}
    return Ok("plain"), {"p": "p"}


def phase_of(machine: TurnMachine) -> str:
    effect = machine.outstanding
    if isinstance(effect, Done):
        return effect.outcome.kind
    if isinstance(effect, ToolCalls):
        emitted = machine.checkpoint().run.outstanding
        partial = emitted is not None and len(emitted.calls) != len(effect.calls)  # type: ignore[union-attr]
        if any(c.backoff is not None for c in effect.calls):
            return "retry_beside_siblings" if len(effect.calls) > 1 else "retry"
        return "partial_batch" if partial else "tool_batch"
    return {LlmCall: "model", Sleep: "sleeping"}[type(effect)]  # type: ignore[index]


def run(checkpoint_at: int | None = None) -> tuple[list[Effect], Any, list[str]]:
    """Drive the run step by step; at step ``checkpoint_at`` go through JSON into a new machine.

    Returns the effects after start, the outcome and the phase at every step.
    """
    machine = TurnMachine(CONFIG)
    trace: list[Effect] = list(machine.start("begin"))
    phases: list[str] = []
    step = 0
    while True:
        phases.append(phase_of(machine))
        if step == checkpoint_at:
            before = machine.reemit()
            text = machine.checkpoint().to_json()
            machine = TurnMachine.restore(CONFIG, json.loads(json.dumps(text)))
            assert machine.reemit() == before
        step += 1
        effect = machine.outstanding
        if isinstance(effect, Done):
            if isinstance(effect.outcome, Suspended):
                trace.extend(machine.resume({"q": "yes"}))
                continue
            return trace, effect.outcome, phases
        if isinstance(effect, LlmCall) and (effect.turn, effect.attempt) == (2, 1):
            trace.extend(machine.send(NotPerformed(effect.id, ModelError("unavailable"))))
        elif isinstance(effect, LlmCall):
            trace.extend(machine.send(ModelReplied(effect.id, MODEL[effect.turn])))
        elif isinstance(effect, Sleep):
            trace.extend(machine.send(Slept(effect.id)))
        else:
            assert isinstance(effect, ToolCalls)
            first = effect.calls[0]
            result, writes = tool_result(first.call.id, first.attempt)
            trace.extend(machine.send(ToolResults(effect.id, (
                CallOutcome(first.call.id, result, writes=writes),))))


WAITING_STATES = {"model", "tool_batch", "retry_beside_siblings", "partial_batch", "sleeping",
                  "suspended"}


def test_the_reference_run_passes_through_every_waiting_state() -> None:
    _, outcome, phases = run()
    assert set(phases) >= WAITING_STATES
    assert outcome.kind == "completed" and outcome.text == "all done"
    assert outcome.state == {"f": 2, "q": True, "p": "p"}


def test_a_checkpoint_in_every_waiting_state_finishes_identically() -> None:
    reference_trace, reference_outcome, phases = run()
    covered = set()
    for step, phase in enumerate(phases):
        trace, outcome, _ = run(checkpoint_at=step)
        assert trace == reference_trace, f"step {step} ({phase})"
        assert outcome == reference_outcome
        covered.add(phase)
    assert covered >= WAITING_STATES | {"completed"}


def test_a_partial_batch_re_emits_only_the_outstanding_calls_as_first_emitted() -> None:
    machine = TurnMachine(CONFIG)
    llm = machine.start("begin")[-1]
    batch = machine.send(ModelReplied(llm.id, MODEL[1]))[-1]
    assert isinstance(batch, ToolCalls)
    machine.send(ToolResults(batch.id, (CallOutcome("q", AskUser("go on?")),)))
    restored = TurnMachine.restore(CONFIG, machine.checkpoint().to_json())
    [again] = restored.reemit()
    assert isinstance(again, ToolCalls) and again.id == batch.id
    assert again.calls == tuple(c for c in batch.calls if c.call.id != "q")
    with pytest.raises(Exception, match="not running"):
        restored.send(ToolResults(batch.id, (CallOutcome("q", Ok(1)),)))


def test_a_suspended_outcome_carries_a_checkpoint_that_resumes_elsewhere() -> None:
    machine = TurnMachine(CONFIG)
    llm = machine.start("begin")[-1]
    batch = machine.send(ModelReplied(llm.id, ModelResponse(
        tool_calls=(ToolCall(id="q", name="ask"),))))[-1]
    done = machine.send(ToolResults(batch.id, (CallOutcome("q", AskUser("go on?")),)))[-1]
    assert isinstance(done, Done) and isinstance(done.outcome, Suspended)
    text = done.outcome.model_dump_json()
    suspended = Suspended.model_validate_json(text)
    assert suspended == done.outcome
    elsewhere = TurnMachine.restore(CONFIG, suspended.checkpoint)
    assert elsewhere.reemit() == [done]
    effects = elsewhere.resume({"q": "yes"})
    assert effects == machine.resume({"q": "yes"})


def waiting_to_retry() -> tuple[TurnMachine, ToolCalls]:
    """Turn 1 with every call's first result: ``f`` failed, and its retry waits its backoff."""
    machine = TurnMachine(CONFIG)
    llm = machine.start("begin")[-1]
    batch = machine.send(ModelReplied(llm.id, MODEL[1]))[-1]
    outcomes = tuple(CallOutcome(c.call.id, tool_result(c.call.id, 1)[0]) for c in batch.calls)
    retry = machine.send(ToolResults(batch.id, outcomes))[-1]
    assert isinstance(retry, ToolCalls)
    return machine, retry


def test_retry_jitter_replays_identically_after_a_restore() -> None:
    machine, retry = waiting_to_retry()
    [(call_id, backoff)] = [(c.call.id, c.backoff) for c in retry.calls]
    assert call_id == "f" and backoff is not None and backoff.since == retry.id
    assert 0.5 <= backoff.seconds <= 1
    restored = TurnMachine.restore(CONFIG, machine.checkpoint())
    assert restored.reemit() == [retry]


def test_a_restored_retry_keeps_the_turn_and_attempt_of_its_calls() -> None:
    machine, retry = waiting_to_retry()
    restored = TurnMachine.restore(CONFIG, machine.checkpoint().to_json())
    assert restored.reemit() == [retry]
    assert [(c.call.id, c.turn, c.attempt) for c in retry.calls] == [("f", 1, 2)]
    assert restored.turn == restored.checkpoint().run.turns == 1
    assert restored.last_effect_id == machine.last_effect_id == retry.id


def as_version_3(data: dict[str, Any]) -> dict[str, Any]:
    """A version 4 checkpoint waiting on tool retries, as version 3 wrote that state: the run
    sleeping before the retries (the same effect id), each call waiting with its delay."""
    run = data["run"]
    effect = run["outstanding"]
    retries = {c["call"]["id"]: c["backoff"]["seconds"] for c in effect["calls"]}
    for record in run["calls"]:
        if record["call"]["id"] in retries:
            record.update(status="retry_wait", attempt=record["attempt"] - 1,
                          retry_delay=retries[record["call"]["id"]])
    run.update(phase="sleeping", outstanding={
        "kind": "sleep", "id": effect["id"], "seconds": max(retries.values()),
        "call_ids": list(retries), "reason": "tool_retry"})
    return {**data, "version": 3}


def test_a_version_3_run_sleeping_before_a_retry_reads_as_its_retry() -> None:
    machine, retry = waiting_to_retry()
    current = json.loads(machine.checkpoint().to_json())
    restored = TurnMachine.restore(CONFIG, json.dumps(as_version_3(current)))
    assert restored.checkpoint() == machine.checkpoint()
    assert restored.reemit() == [retry]  # the backoff counts from the sleep: same id


def test_a_version_3_model_backoff_reads_as_version_4() -> None:
    machine = TurnMachine(CONFIG)
    llm = machine.start("begin")[-1]
    sleep = machine.send(NotPerformed(llm.id, ModelError("unavailable")))[-1]
    assert isinstance(sleep, Sleep)
    data = json.loads(machine.checkpoint().to_json())
    data["version"] = 3
    data["run"]["outstanding"]["call_ids"] = []
    restored = TurnMachine.restore(CONFIG, json.dumps(data))
    assert restored.reemit() == [sleep]
    assert isinstance(restored.send(Slept(sleep.id))[-1], LlmCall)


def test_a_retry_whose_backoff_counts_from_a_later_effect_is_refused() -> None:
    machine, retry = waiting_to_retry()
    data = json.loads(machine.checkpoint().to_json())
    data["run"]["outstanding"]["calls"][0]["backoff"]["since"] = retry.id + 1
    with pytest.raises(CheckpointError, match="backoff counts from an effect after"):
        TurnMachine.restore(CONFIG, json.dumps(data))


def pending_checkpoint_data() -> dict[str, Any]:
    machine = TurnMachine(CONFIG)
    llm = machine.start("begin")[-1]
    batch = machine.send(ModelReplied(llm.id, ModelResponse(
        tool_calls=(ToolCall(id="p", name="plain"),))))[-1]
    done = machine.send(ToolResults(batch.id, (CallOutcome("p", Pending()),)))[-1]
    assert isinstance(done, Done) and isinstance(done.outcome, Suspended)
    [pending] = done.outcome.pending
    assert (pending.turn, pending.attempt) == (1, 1)
    data: dict[str, Any] = json.loads(machine.checkpoint().to_json())
    return data


@pytest.mark.parametrize(("field", "value"), [("turn", 2), ("attempt", 2), ("call_id", "q")])
def test_a_pending_call_that_contradicts_its_call_is_refused(field: str, value: Any) -> None:
    data = pending_checkpoint_data()
    TurnMachine.restore(CONFIG, json.dumps(data))
    data["run"]["calls"][0]["pending"][field] = value
    with pytest.raises(CheckpointError, match="pending call's id, turn or attempt"):
        TurnMachine.restore(CONFIG, json.dumps(data))


def checkpoint_data() -> dict[str, Any]:
    machine = TurnMachine(CONFIG)
    llm = machine.start("begin")[-1]
    machine.send(ModelReplied(llm.id, MODEL[1]))
    data: dict[str, Any] = json.loads(machine.checkpoint().to_json())
    return data


@pytest.mark.parametrize("version", [1, CHECKPOINT_VERSION + 1])
def test_an_older_or_unknown_version_is_refused_clearly(version: int) -> None:
    data = checkpoint_data()
    data["version"] = version
    with pytest.raises(CheckpointError, match=f"version {version} is not supported"):
        Checkpoint.from_data(data)
    with pytest.raises(CheckpointError, match=f"version {version} is not supported"):
        TurnMachine.restore(CONFIG, json.dumps(data))


@pytest.mark.parametrize(("tamper", "message"), [
    (lambda d: d["run"].pop("mode"), "not a valid toolvisor checkpoint"),
    (lambda d: d["run"].update(surprise=1), "not a valid toolvisor checkpoint"),
    (lambda d: d["run"]["calls"][0].update(surprise=1), "calls.0.surprise"),
    (lambda d: d["run"]["steps"][0].update(surprise=1), "steps.0.surprise"),
    (lambda d: d["run"]["calls"][0].update(status="exploded"), "not a valid"),
    (lambda d: d["run"].update(phase="awaiting_model"), "does not go with"),
    (lambda d: d["run"].update(next_effect_id=1), "never emitted"),
    (lambda d: d["run"]["calls"][0].update(status="queued"), "queued, not running"),
    (lambda d: d["run"]["calls"][2].update(status="running", step=0) or
     d["run"]["outstanding"]["calls"].pop(), "running outside"),
    (lambda d: d["run"]["steps"][0]["calls"].append(99), "step plan"),
    (lambda d: d["run"].update(mode="sequential"), "cannot be restored in mode"),
    (lambda d: d["run"]["outstanding"]["calls"][0].update(turn=2), "another turn than 1"),
])
def test_a_tampered_checkpoint_is_refused_clearly(tamper: Any, message: str) -> None:
    data = checkpoint_data()
    tamper(data)
    with pytest.raises(CheckpointError, match=message):
        TurnMachine.restore(CONFIG, json.dumps(data))


def test_not_json_is_refused_clearly() -> None:
    with pytest.raises(CheckpointError, match="not a valid toolvisor checkpoint"):
        Checkpoint.from_json("{nope")
    with pytest.raises(TypeError, match="Checkpoint or its JSON text"):
        TurnMachine.restore(CONFIG, {"version": 1})  # type: ignore[arg-type]
