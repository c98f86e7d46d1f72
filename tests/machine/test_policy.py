"""on_tool_error policies: in isolation with ``decide``, and through a driven run."""

from __future__ import annotations

from typing import Any

import pytest

from toolvisor.contract import Err, ModelResponse, Ok, Tool, ToolCall, ToolError, ToolResultMessage
from toolvisor.machine import (
    BrokenPolicy,
    CallAttempt,
    ContinueRun,
    Halted,
    HaltRun,
    LogEvent,
    MachineConfig,
    RetryAfter,
    RetryPolicy,
    ToolCalls,
)
from toolvisor.machine._policy import is_crash
from toolvisor.testing._drive import drive
from toolvisor.testing._policy import decide

CALL = ToolCall(id="c1", name="fetch")
CRASH = ToolError("timeout")


def test_continue_and_halt() -> None:
    assert decide("continue", CALL, CRASH) == ContinueRun()
    assert decide("halt", "fetch", Err("reported")) == HaltRun()


def test_retry_only_for_retryable_tools_chosen_reasons_and_attempts_left() -> None:
    policy = RetryPolicy(max_attempts=3, base_delay=1, jitter=0)
    assert decide(policy, CALL, CRASH, retryable=True) == RetryAfter(1)
    assert decide(policy, CALL, CRASH, retryable=True, attempt=2) == RetryAfter(2)
    assert decide(policy, CALL, CRASH, retryable=True, attempt=3) == ContinueRun()
    assert decide(policy, CALL, CRASH, retryable=False) == ContinueRun()
    assert decide(policy, CALL, ToolError("not_found"), retryable=True) == ContinueRun()
    assert decide(policy, CALL, "reported", retryable=True) == ContinueRun()
    reported = RetryPolicy(retry_reported=True, jitter=0, otherwise="halt")
    assert decide(reported, CALL, Err("reported"), retryable=True) == RetryAfter(0.5)
    assert decide(reported, CALL, ToolError("invalid_return"), retryable=True) == HaltRun()


def test_backoff_is_capped_jittered_and_the_same_for_the_same_seed() -> None:
    policy = RetryPolicy(max_attempts=20, base_delay=1, multiplier=2, max_delay=5, jitter=0.5)
    delays = [decide(policy, CALL, CRASH, retryable=True, attempt=n, seed=7)
              for n in range(1, 8)]
    seconds = [d.delay for d in delays if isinstance(d, RetryAfter)]
    assert len(seconds) == 7
    ceilings = [1, 2, 4, 5, 5, 5, 5]
    assert all(c / 2 <= s <= c for s, c in zip(seconds, ceilings, strict=True))
    again = [decide(policy, CALL, CRASH, retryable=True, attempt=n, seed=7) for n in range(1, 8)]
    assert again == delays
    other = [decide(policy, CALL, CRASH, retryable=True, attempt=n, seed=8) for n in range(1, 8)]
    assert other != delays


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_attempts": 0}, "max_attempts"),
    ({"base_delay": -1}, "base_delay"),
    ({"max_delay": float("inf")}, "max_delay"),
    ({"multiplier": 0.5}, "multiplier"),
    ({"jitter": 2}, "jitter"),
    ({"reasons": frozenset({"oops"})}, "reasons"),
    ({"reasons": "timeout"}, "reasons"),
    ({"otherwise": "retry"}, "otherwise"),
])
def test_a_bad_retry_policy_is_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**kwargs)


def test_a_function_tells_crashes_from_reported_errors() -> None:
    def policy(call: CallAttempt, error: Any) -> Any:
        if is_crash(error):
            return RetryAfter(0) if call.retryable else HaltRun({"crashed": call.name})
        return ContinueRun(Ok(f"fallback for {call.id} after {error}"))

    assert decide(policy, CALL, CRASH, retryable=True) == RetryAfter(0)
    assert decide(policy, CALL, CRASH) == HaltRun({"crashed": "fetch"})
    assert decide(policy, CALL, Err("nope")) == ContinueRun(Ok("fallback for c1 after nope"))


@pytest.mark.parametrize(("returned", "message"), [
    ("continue", "returned str"),
    (None, "returned NoneType"),
    (ContinueRun("text"), "must be Ok or Err"),  # type: ignore[arg-type]
    (RetryAfter(-1), "finite number"),
    (RetryAfter(float("nan")), "finite number"),
])
def test_a_function_returning_a_non_decision_fails_the_policy(returned: Any,
                                                              message: str) -> None:
    decision = decide(lambda call, error: returned, CALL, CRASH, retryable=True)
    assert isinstance(decision, BrokenPolicy) and message in decision.detail


def test_a_function_that_raises_or_retries_a_non_retryable_tool_fails_the_policy() -> None:
    def boom(call: CallAttempt, error: Any) -> Any:
        raise KeyError("x")

    assert "raised KeyError" in decide(boom, CALL, CRASH).detail  # type: ignore[union-attr]
    decision = decide(lambda c, e: RetryAfter(1), CALL, CRASH, retryable=False)
    assert isinstance(decision, BrokenPolicy) and "not declared retryable" in decision.detail


def test_decide_refuses_what_is_not_a_policy() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        decide("retry", CALL, CRASH)  # type: ignore[arg-type]


# -- through a run ---------------------------------------------------------------------------

FETCH = Tool(name="fetch", handler=lambda a: Ok("fetched"), retryable=True)
SLOW = Tool(name="slow", handler=lambda a: Ok("slow"))
TURN = ModelResponse(tool_calls=(ToolCall(id="c1", name="fetch"), ToolCall(id="c2", name="slow")))


def results(outcome: Any) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in outcome.messages if isinstance(m, ToolResultMessage)}


def test_continue_gives_the_model_the_encoded_error() -> None:
    run = drive(MachineConfig(tools=[FETCH, SLOW]), "go", model=[TURN, "ok"],
                tools={"fetch": Err({"code": 7})})
    message = results(run.outcome)["c1"]
    assert message.is_error and message.content == '{"error":{"code":7}}'


def test_halt_lets_siblings_finish_and_ends_with_tool_error() -> None:
    run = drive(MachineConfig(tools=[FETCH, SLOW], on_tool_error="halt"), "go", model=[TURN],
                tools={"fetch": Err(ToolError("timeout", tool_name="fetch"))})
    outcome = run.outcome
    assert isinstance(outcome, Halted) and outcome.reason == "tool_error"
    assert outcome.result["tool_call_id"] == "c1"
    assert outcome.result["error"]["reason"] == "timeout"
    assert results(outcome)["c2"].content == "slow"


def test_retry_sleeps_then_runs_only_that_call_again() -> None:
    policy = RetryPolicy(max_attempts=3, base_delay=0.25, jitter=0)
    run = drive(MachineConfig(tools=[FETCH, SLOW], on_tool_error=policy), "go",
                model=[TURN, "ok"],
                tools={"fetch": [Err(ToolError("handler_raised")), Err(ToolError("timeout")),
                                 Ok("third time")]})
    assert run.sleeps == [0.25, 0.5]
    assert run.tool_batches == [["c1", "c2"], ["c1"], ["c1"]]
    attempts = [[c.attempt for c in e.calls] for e in run.trace if isinstance(e, ToolCalls)]
    assert attempts == [[1, 1], [2], [3]]
    assert results(run.outcome)["c1"].content == "third time"


def test_per_tool_overrides_win_over_the_default() -> None:
    config = MachineConfig(tools=[FETCH, SLOW], on_tool_error="halt",
                           tool_policies={"fetch": "continue"})
    run = drive(config, "go", model=[TURN, "ok"], tools={"fetch": Err("x")})
    assert run.outcome.kind == "completed"
    run = drive(config, "go", model=[TURN], tools={"slow": Err("x")})
    assert isinstance(run.outcome, Halted) and run.outcome.reason == "tool_error"


def test_a_policy_function_is_consulted_once_per_failure_and_can_replace_the_result() -> None:
    seen: list[tuple[str, int, Any]] = []

    def policy(call: CallAttempt, error: Any) -> Any:
        seen.append((call.id, call.attempt, error))
        return RetryAfter(0) if call.attempt < 2 and call.retryable else ContinueRun(Ok("spare"))

    run = drive(MachineConfig(tools=[FETCH, SLOW], on_tool_error=policy), "go",
                model=[TURN, "ok"], tools={"fetch": Err("a"), "slow": Err("b")})
    assert sorted(seen, key=str) == [("c1", 1, "a"), ("c1", 2, "a"), ("c2", 1, "b")]
    assert results(run.outcome)["c1"].content == "spare"
    assert not results(run.outcome)["c1"].is_error


def test_a_failing_policy_function_halts_with_invalid_return() -> None:
    run = drive(MachineConfig(tools=[FETCH, SLOW], on_tool_error=lambda c, e: "retry"), "go",
                model=[TURN], tools={"fetch": Err("x")})
    outcome = run.outcome
    assert isinstance(outcome, Halted) and outcome.reason == "invalid_return"
    assert "returned str" in outcome.result["detail"]
    assert any(isinstance(e, LogEvent) and e.event == "policy_failed" for e in run.trace)


def test_an_unknown_tool_goes_through_the_policy_as_not_found() -> None:
    errors: list[Any] = []

    def policy(call: CallAttempt, error: Any) -> Any:
        errors.append((call.known, error.reason))
        return ContinueRun()

    turn = ModelResponse(tool_calls=(ToolCall(id="c1", name="nope"),
                                     ToolCall(id="c2", name="slow")))
    run = drive(MachineConfig(tools=[FETCH, SLOW], on_tool_error=policy), "go",
                model=[turn, "ok"])
    assert errors == [(False, "not_found")]
    assert run.tool_batches == [["c2"]]
    assert "not_found" in results(run.outcome)["c1"].content


def test_max_call_attempts_bounds_a_policy_that_always_retries() -> None:
    config = MachineConfig(tools=[FETCH, SLOW], on_tool_error=lambda c, e: RetryAfter(0),
                           tool_policies={"slow": "continue"}, max_call_attempts=3)
    run = drive(config, "go", model=[TURN, "ok"], tools={"fetch": Err("x")})
    assert run.tool_batches == [["c1", "c2"], ["c1"], ["c1"]]
    assert run.outcome.kind == "completed"
