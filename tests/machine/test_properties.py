"""Properties of the loop over random scripts: termination, one result per call id, one
policy consultation per failure, and identical replays through checkpoints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolvisor.contract import (
    AskUser,
    AssistantMessage,
    CallContext,
    Err,
    Halt,
    HandlerResult,
    ModelResponse,
    Ok,
    Pending,
    Tool,
    ToolCall,
    ToolError,
    ToolResultMessage,
)
from toolvisor.machine import (
    RESERVED_HALT_REASONS,
    CallAttempt,
    ContinueRun,
    HaltRun,
    LlmCall,
    MachineConfig,
    Policy,
    RetryAfter,
    RetryPolicy,
    apply_policy,
)
from toolvisor.testing._drive import drive

RESULTS: list[HandlerResult] = [
    Ok("fine"), Err("reported"), Err(ToolError("timeout")), Err(ToolError("handler_raised")),
    AskUser("sure?"), Pending(), Halt("custom_stop"), Halt("max_turns"),
]
NAMES = ["par", "ser", "retry", "retry", "ghost"]  # ghost is not in the catalog
BASE_POLICIES: list[Policy] = [
    "continue", "halt", RetryPolicy(max_attempts=3, base_delay=0, retry_reported=True),
    lambda call, error: RetryAfter(0) if call.retryable and call.attempt < 4 else ContinueRun(),
]


def is_failure(result: HandlerResult) -> bool:
    return isinstance(result, Err) or (isinstance(result, Halt)
                                       and result.reason in RESERVED_HALT_REASONS)


@dataclass
class Counts:
    failures: int = 0
    consulted: int = 0


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    turns = draw(st.integers(1, 5))
    model = []
    outcomes: dict[str, list[HandlerResult]] = {}
    for t in range(turns):
        names = draw(st.lists(st.sampled_from(NAMES), max_size=4))
        calls = tuple(ToolCall(id=f"t{t}c{i}", name=n) for i, n in enumerate(names))
        for call in calls:
            outcomes[call.id] = draw(st.lists(st.sampled_from(RESULTS), min_size=1, max_size=3))
        model.append(ModelResponse(tool_calls=calls))
    model.append(ModelResponse(text="end"))
    return {
        "model": model,
        "outcomes": outcomes,
        "policy": draw(st.sampled_from(BASE_POLICIES)),
        "mode": draw(st.sampled_from(["sequential", "parallel_batch_approval",
                                      "parallel_streaming"])),
        "max_turns": draw(st.integers(1, 4)),
        "delivery": draw(st.sampled_from(["together", "one_by_one", "reversed"])),
        "one_by_one": draw(st.booleans()),
    }


def build(scenario: dict[str, Any], counts: Counts) -> MachineConfig:
    outcomes: dict[str, list[HandlerResult]] = scenario["outcomes"]

    def handler(arguments: Any, ctx: CallContext) -> HandlerResult:
        assert ctx.tool_call is not None
        sequence = outcomes[ctx.tool_call.id]
        result = sequence[(ctx.attempt - 1) % len(sequence)]
        if isinstance(result, Pending):
            ctx.completion_key()  # a Pending handler takes its key first
        counts.failures += is_failure(result)
        return result

    base = scenario["policy"]

    def policy(call: CallAttempt, error: Any) -> Any:
        counts.consulted += 1
        return apply_policy(base, call, error)

    return MachineConfig(
        tools=[Tool(name="par", handler=handler), Tool(name="ser", handler=handler,
                                                       scheduling="serial"),
               Tool(name="retry", handler=handler, retryable=True)],
        on_tool_error=policy, mode=scenario["mode"], max_turns=scenario["max_turns"])


def answer(waiting: Any) -> Any:
    return "yes"


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_every_run_ends_within_max_turns_and_answers_every_call_exactly_once(
        scenario: dict[str, Any]) -> None:
    counts = Counts()
    run = drive(build(scenario, counts), "go", model=scenario["model"], answers=answer,
                delivery=scenario["delivery"], answer_one_by_one=scenario["one_by_one"],
                max_effects=2_000)
    outcome = run.outcome
    assert outcome.kind in ("completed", "halted")
    assert sum(isinstance(e, LlmCall) for e in run.trace) <= scenario["max_turns"]
    asked = [c.id for m in outcome.messages if isinstance(m, AssistantMessage)
             for c in m.tool_calls]
    answered = [m.tool_call_id for m in outcome.messages if isinstance(m, ToolResultMessage)]
    assert sorted(asked) == sorted(answered)
    assert len(set(answered)) == len(answered)
    ghosts = sum(1 for m in outcome.messages if isinstance(m, AssistantMessage)
                 for c in m.tool_calls if c.name == "ghost")
    assert counts.consulted == counts.failures + ghosts


@settings(max_examples=25, deadline=None)
@given(scenarios())
def test_a_run_checkpointed_at_every_step_replays_identically(scenario: dict[str, Any]) -> None:
    plain = drive(build(scenario, Counts()), "go", model=scenario["model"], answers=answer,
                  delivery=scenario["delivery"], max_effects=2_000)
    replayed = drive(build(scenario, Counts()), "go", model=scenario["model"], answers=answer,
                     delivery=scenario["delivery"], roundtrip=True, max_effects=2_000)
    assert replayed.trace == plain.trace
    assert replayed.outcome == plain.outcome


def test_halt_decisions_from_any_policy_end_the_run_with_tool_error() -> None:
    config = MachineConfig(tools=[Tool(name="par", handler=lambda a: Err("no"))],
                           on_tool_error=lambda call, error: HaltRun())
    run = drive(config, "go", model=[ModelResponse(tool_calls=(ToolCall(id="a", name="par"),))])
    assert run.outcome.kind == "halted" and run.outcome.reason == "tool_error"
