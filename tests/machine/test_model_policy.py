"""Model failures are a closed set and ``on_model_error`` decides: pure, plain calls."""

from __future__ import annotations

import pickle

import pytest

from toolvisor import Completed, Failed, ModelError, Ok, Tool
from toolvisor.machine import (
    BrokenPolicy,
    FailRun,
    LlmCall,
    MachineConfig,
    ModelRetryPolicy,
    NotPerformed,
    ResponseRefused,
    RetryAfter,
    Sleep,
    TurnMachine,
)
from toolvisor.testing import call, calls, decide_model, drive


def echo(arguments: dict[str, object]) -> Ok:
    return Ok(arguments)


ECHO = Tool("echo", handler=echo)
NO_JITTER = ModelRetryPolicy(base_delay=1.0, multiplier=2.0, max_delay=3.0, jitter=0.0)


def test_a_model_error_has_a_closed_reason_and_round_trips_as_json() -> None:
    error = ModelError("rate_limited", "slow down", retry_after=2, status=429,
                       cause=RuntimeError("429"), attempt=3)
    data = error.to_dict()
    assert data["cause"] == {"type": "RuntimeError", "message": "429"}
    assert ModelError.from_dict(data).to_dict() == data
    assert pickle.loads(pickle.dumps(error)).retry_after == 2.0
    with pytest.raises(ValueError, match="unknown ModelError reason 'nope'"):
        ModelError("nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retry_after must be a finite number"):
        ModelError("rate_limited", retry_after=-1)
    with pytest.raises(ValueError, match="unknown field"):
        ModelError.from_dict({**data, "extra": 1})


@pytest.mark.parametrize(("reason", "attempt", "expected"), [
    ("timeout", 1, RetryAfter(1.0)),
    ("unavailable", 2, RetryAfter(2.0)),
    ("rate_limited", 3, RetryAfter(3.0)),  # capped at max_delay
    ("rate_limited", 4, FailRun()),  # max_attempts reached
    ("rejected", 1, FailRun()),  # never retried: no retry can fix it
    ("invalid_response", 1, FailRun()),
    ("raised", 1, FailRun()),
])
def test_the_retry_policy_retries_what_may_pass(reason: str, attempt: int,
                                                expected: object) -> None:
    assert decide_model(NO_JITTER, reason, attempt=attempt) == expected  # type: ignore[arg-type]


def test_retry_after_is_honoured_up_to_its_cap() -> None:
    assert decide_model(NO_JITTER, "rate_limited", retry_after=7.5) == RetryAfter(7.5)
    assert decide_model(NO_JITTER, "rate_limited", retry_after=0.1) == RetryAfter(1.0)
    assert decide_model(NO_JITTER, "rate_limited", retry_after=61) == FailRun()


def test_jitter_is_drawn_from_the_seed() -> None:
    policy = ModelRetryPolicy(jitter=0.5)
    first = decide_model(policy, "timeout", seed=7)
    assert first == decide_model(policy, "timeout", seed=7)
    assert isinstance(first, RetryAfter) and 0.25 <= first.delay <= 0.5


def test_a_function_policy_that_fails_is_a_policy_failure() -> None:
    def boom(error: ModelError) -> FailRun:
        raise RuntimeError("bug")

    assert isinstance(decide_model(boom, "timeout"), BrokenPolicy)
    assert isinstance(decide_model(lambda e: "retry", "timeout"), BrokenPolicy)  # type: ignore[arg-type,return-value]
    assert isinstance(decide_model(lambda e: RetryAfter(-1), "timeout"), BrokenPolicy)
    assert decide_model(lambda e: RetryAfter(e.attempt), "timeout", attempt=2) == RetryAfter(2)


def test_bad_policies_and_settings_are_refused_with_the_rule() -> None:
    with pytest.raises(TypeError, match="a model policy is 'fail', a ModelRetryPolicy"):
        MachineConfig(on_model_error="retry")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"ModelRetryPolicy\.reasons must be ModelError reasons"):
        ModelRetryPolicy(reasons=frozenset({"handler_raised"}))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"max_attempts must be an int >= 1"):
        ModelRetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="max_model_attempts must be an int >= 1"):
        MachineConfig(max_model_attempts=0)


def test_a_rate_limited_turn_sleeps_then_asks_again_in_the_same_turn() -> None:
    config = MachineConfig(on_model_error=NO_JITTER)
    result = drive(config, "hi", roundtrip=True,
                   model=[ModelError("rate_limited", retry_after=1.5), "done"])
    assert isinstance(result.outcome, Completed) and result.outcome.turns == 1
    assert result.sleeps == [1.5]
    asks = [e for e in result.trace if isinstance(e, LlmCall)]
    assert [(e.turn, e.attempt) for e in asks] == [(1, 1), (1, 2)]
    assert asks[0].request.messages == asks[1].request.messages  # the same turn, asked again
    assert [e.request.attempt for e in asks] == [1, 2]
    assert [e.reason for e in result.trace if isinstance(e, Sleep)] == ["model_retry"]


def test_a_rejected_call_fails_the_run_and_keeps_the_transcript() -> None:
    config = MachineConfig(tools=(ECHO,), on_model_error=NO_JITTER)
    result = drive(config, "hi", model=[
        calls(call("echo", {"x": 1}, id="c1")),
        ModelError("rejected", "bad request: tools[0] invalid", status=400)])
    outcome = result.outcome
    assert isinstance(outcome, Failed)
    assert outcome.model_error is not None
    assert (outcome.model_error.reason, outcome.model_error.attempts,
            outcome.model_error.status) == ("rejected", 1, 400)
    assert "bad request" in outcome.error and "(rejected) after 1 attempt" in outcome.error
    assert [m.role for m in outcome.messages] == ["user", "assistant", "tool"]


def test_attempts_are_bounded_whatever_a_policy_function_says() -> None:
    config = MachineConfig(on_model_error=lambda e: RetryAfter(0), max_model_attempts=3)
    result = drive(config, "hi", model=[ModelError("timeout")] * 3)
    assert isinstance(result.outcome, Failed)
    assert result.outcome.model_error is not None
    assert result.outcome.model_error.attempts == 3
    assert len(result.sleeps) == 2


def test_a_failing_policy_function_fails_the_run_and_says_so() -> None:
    def boom(error: ModelError) -> FailRun:
        raise RuntimeError("policy bug")

    result = drive(MachineConfig(on_model_error=boom), "hi", model=[ModelError("timeout")])
    assert isinstance(result.outcome, Failed) and result.outcome.model_error is not None
    assert "policy bug" in (result.outcome.model_error.policy or "")


def test_other_effect_failures_still_fail_at_once() -> None:
    machine = TurnMachine(MachineConfig())
    ask = machine.start("hi")[-1]
    done = machine.send(NotPerformed(ask.id, "the host broke"))[-1]
    assert isinstance(done.outcome, Failed) and done.outcome.model_error is None  # type: ignore[union-attr]


def test_a_run_that_failed_on_its_model_can_try_again() -> None:
    config = MachineConfig(on_model_error="fail")
    machine = TurnMachine(config)
    ask = machine.start("hi")[-1]
    machine.send(NotPerformed(ask.id, ModelError("unavailable", status=503)))
    assert machine.status == "failed"
    restored = TurnMachine.restore(config, machine.checkpoint().to_json())
    again = restored.retry_model()[-1]
    assert isinstance(again, LlmCall) and (again.turn, again.attempt) == (1, 1)
    assert restored.status == "running"
    with pytest.raises(ResponseRefused, match="needs a run that failed on its model call"):
        TurnMachine(config).retry_model()
