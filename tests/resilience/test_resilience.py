"""The resilience state machines alone, on a fake clock: every move of the circuit breaker,
the token bucket, the bulkhead's slots and queue, and one tool's gate putting them together."""

from __future__ import annotations

from typing import Any

import pytest

from toolvisor import Err, Ok, ToolError
from toolvisor.contract import AskUser, InvalidArguments, Violation
from toolvisor.resilience import (
    BULKHEAD_FULL,
    BULKHEAD_WAIT_TIMEOUT,
    CIRCUIT_OPEN,
    RATE_LIMITED,
    Breaker,
    Bulkhead,
    BulkheadSlots,
    CircuitBreaker,
    Moved,
    NotPermitted,
    Permit,
    RateLimit,
    Refuse,
    Resilience,
    Start,
    TokenBucket,
    ToolGate,
    WakeIn,
)
from toolvisor.testing import FakeClock, drive_breaker


def permit(breaker: CircuitBreaker) -> Permit:
    got = breaker.acquire()
    assert isinstance(got, Permit), got
    return got


def fail(breaker: CircuitBreaker, times: int = 1) -> None:
    for _ in range(times):
        breaker.record(permit(breaker), "failure")


# --- circuit breaker: each move -------------------------------------------------------------

def test_closed_to_open_on_consecutive_failures() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(Breaker(consecutive_failures=3, open_for=10), clock=clock)
    fail(breaker, 2)
    breaker.record(permit(breaker), "success")  # a success breaks the streak
    fail(breaker, 2)
    assert breaker.status == "closed"
    fail(breaker)
    assert breaker.status == "open"
    moves = breaker.take_transitions()
    assert [(m.before, m.after, m.why) for m in moves] == [
        ("closed", "open", "3 failures in a row")]
    assert breaker.take_transitions() == []


def test_closed_to_open_on_failure_rate_once_the_window_holds_min_calls() -> None:
    breaker = CircuitBreaker(Breaker(consecutive_failures=None, failure_rate=0.5, min_calls=4,
                                     window=4), clock=FakeClock())
    for outcome in ("failure", "success", "failure"):
        breaker.record(permit(breaker), outcome)  # type: ignore[arg-type]
    assert breaker.status == "closed"  # 2 of 3, but fewer than min_calls
    breaker.record(permit(breaker), "success")
    assert breaker.status == "open"  # 2 of 4 = 0.5
    assert breaker.snapshot().why == "2 of the last 4 calls failed"


def test_the_count_window_forgets_the_oldest_outcomes() -> None:
    breaker = CircuitBreaker(Breaker(consecutive_failures=None, failure_rate=0.5, min_calls=4,
                                     window=4), clock=FakeClock())
    for outcome in ("failure", "success", "success", "success", "success", "failure"):
        breaker.record(permit(breaker), outcome)  # type: ignore[arg-type]
    state = breaker.snapshot()
    assert (state.status, state.calls_in_window, state.failures_in_window) == ("closed", 4, 1)


def test_the_time_window_forgets_outcomes_older_than_window_seconds() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(Breaker(consecutive_failures=None, failure_rate=0.6, min_calls=3,
                                     window=None, window_seconds=10), clock=clock)
    fail(breaker, 2)
    clock.advance(11)  # those two fall out of the window
    breaker.record(permit(breaker), "success")
    fail(breaker)
    assert breaker.snapshot().calls_in_window == 2
    fail(breaker)
    assert breaker.status == "open"  # 2 of 3 within the last 10 s


def test_open_refuses_with_when_it_will_be_tried_again() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(Breaker(consecutive_failures=1, open_for=30), clock=clock)
    fail(breaker)
    clock.advance(12)
    refused = breaker.acquire()
    assert refused == NotPermitted("open", 18.0, "1 failures in a row")
    assert breaker.check() == refused
    state = breaker.snapshot()
    assert (state.status, state.retry_in, state.refused, state.times_opened) == \
        ("open", 18.0, 2, 1)


def test_half_open_after_the_wait_lets_the_configured_trials_through() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(Breaker(consecutive_failures=1, open_for=5, half_open_trials=2),
                             clock=clock)
    fail(breaker)
    clock.advance(5)
    assert breaker.status == "half_open"  # read without moving it
    assert [m.after for m in breaker.take_transitions()] == ["open"]
    first, second = permit(breaker), permit(breaker)
    assert first.trial and second.trial
    assert breaker.acquire() == NotPermitted("half_open", None, "1 failures in a row")
    assert [m.after for m in breaker.take_transitions()] == ["half_open"]
    breaker.record(first, "ignored")  # an ignored trial gives its permit back
    third = permit(breaker)
    breaker.record(second, "success")
    assert breaker.status == "half_open"
    breaker.record(third, "success")
    assert breaker.status == "closed"
    assert breaker.take_transitions()[-1].why == "2 trial call(s) succeeded"


def test_a_failed_trial_opens_it_again_for_a_new_wait() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(Breaker(consecutive_failures=1, open_for=5), clock=clock)
    fail(breaker)
    clock.advance(6)
    fail(breaker)
    assert breaker.status == "open"
    assert breaker.snapshot().retry_in == 5.0
    assert breaker.snapshot().why == "a trial call failed"
    assert breaker.snapshot().times_opened == 2


def test_an_outcome_counts_only_in_the_state_its_call_was_let_through_in() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(Breaker(consecutive_failures=1, open_for=5), clock=clock)
    slow = permit(breaker)  # admitted while closed, finishes after the breaker moved
    fail(breaker)
    clock.advance(5)
    trial = permit(breaker)
    breaker.record(slow, "failure")  # stale: neither a trial nor a closed-state failure
    assert breaker.status == "half_open"
    breaker.record(trial, "success")
    breaker.record(slow, "failure")
    assert breaker.status == "closed"


def test_which_results_count_is_configurable() -> None:
    default = Breaker()
    violation = InvalidArguments("t", [Violation("$", "bad", "type")])
    verdicts = {
        "ok": default.verdict(Ok(1)),
        "ask": default.verdict(AskUser("sure?")),
        "reported": default.verdict(Err("no such user")),
        "raised": default.verdict(Err(ToolError("handler_raised"))),
        "exit": default.verdict(Err(ToolError("handler_exit"))),
        "timeout": default.verdict(Err(ToolError("timeout"))),
        "invalid_return": default.verdict(Err(ToolError("invalid_return"))),
        "cancelled": default.verdict(Err(ToolError("handler_exit", code="cancelled"))),
        "arguments": default.verdict(Err(violation)),
    }
    assert verdicts == {"ok": "success", "ask": "success", "reported": "success",
                        "raised": "failure", "exit": "failure", "timeout": "failure",
                        "invalid_return": "ignored", "cancelled": "ignored",
                        "arguments": "ignored"}
    strict = Breaker(failure_reasons=frozenset({"timeout"}), count_reported=True)
    assert strict.verdict(Err("no such user")) == "failure"
    assert strict.verdict(Err(ToolError("handler_raised"))) == "ignored"


@pytest.mark.parametrize("kwargs", [
    {"consecutive_failures": 0}, {"consecutive_failures": None}, {"failure_rate": 1.5},
    {"failure_rate": 0.5, "min_calls": 30, "window": 20}, {"window": None},
    {"open_for": 0}, {"open_for": float("inf")}, {"half_open_trials": 0},
    {"failure_reasons": "timeout"}, {"failure_reasons": frozenset({"slow"})},
    {"window_seconds": -1},
])
def test_a_bad_breaker_is_refused_naming_the_setting(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="Breaker"):
        Breaker(**kwargs)


def test_drive_breaker_walks_the_states_with_plain_calls() -> None:
    steps = drive_breaker(Breaker(consecutive_failures=2, open_for=30),
                          ["failure", Err(ToolError("timeout")), "success", 29.5, "success",
                           0.5, Ok("back"), Err(ToolError("handler_raised"))])
    assert [s.status for s in steps] == ["closed", "open", "open", "open", "open",
                                         "half_open", "closed", "closed"]
    assert [s.ran for s in steps] == [True, True, False, None, False, None, True, True]
    assert steps[2].refused == NotPermitted("open", 30.0, "2 failures in a row")
    with pytest.raises(TypeError, match="drive_breaker"):
        drive_breaker(Breaker(), ["boom"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="forward"):
        FakeClock().advance(-1)


# --- token bucket ---------------------------------------------------------------------------

def test_the_bucket_spends_its_burst_then_spaces_calls_out() -> None:
    clock = FakeClock()
    bucket = TokenBucket(RateLimit(calls=2, per=1.0, burst=2, max_wait=1.0), clock=clock)
    assert [bucket.take(), bucket.take()] == [0.0, 0.0]
    assert bucket.take() == 0.5  # the next token is due in half a second
    assert bucket.take() == 1.0
    assert bucket.take() is None  # due in 1.5 s, past max_wait: refused, nothing taken
    assert bucket.next_in() == 1.5
    state = bucket.snapshot()
    assert (state.tokens, state.waiting, state.refused) == (-2.0, 2, 1)
    clock.advance(1.0)
    bucket.waited()
    bucket.give_back()  # the other waiting call was cancelled
    assert bucket.snapshot().tokens == 1.0
    clock.advance(10)
    assert bucket.snapshot().tokens == 2.0  # never more than the burst


def test_fail_fast_rate_limit() -> None:
    bucket = TokenBucket(RateLimit(calls=1, per=60, max_wait=0), clock=FakeClock())
    assert bucket.take() == 0.0
    assert bucket.take() is None
    assert bucket.next_in() == 60.0


@pytest.mark.parametrize("kwargs", [{"calls": 0}, {"calls": 1, "per": 0},
                                    {"calls": 1, "burst": 0}, {"calls": 1, "max_wait": -1}])
def test_a_bad_rate_limit_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="RateLimit"):
        RateLimit(**kwargs)


# --- bulkhead -------------------------------------------------------------------------------

def test_bulkhead_slots_first_come_first_served() -> None:
    slots = BulkheadSlots(Bulkhead(max_concurrent=2, max_queue=2))
    assert [slots.enter(t) for t in range(5)] == ["run", "run", "queued", "queued", "full"]
    assert slots.leave() == 2  # the slot goes straight to the first waiting call
    assert slots.withdraw(3) and not slots.withdraw(3)
    assert slots.leave() is None
    state = slots.snapshot()
    assert (state.running, state.queued, state.refused) == (1, 0, 1)


@pytest.mark.parametrize("kwargs", [{"max_concurrent": 0}, {"max_concurrent": 1,
                                                            "max_queue": -1},
                                    {"max_concurrent": 1, "max_wait": float("nan")}])
def test_a_bad_bulkhead_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="Bulkhead"):
        Bulkhead(**kwargs)


# --- one tool's gate ------------------------------------------------------------------------

def test_an_open_gate_refuses_at_arrival_with_circuit_open() -> None:
    clock = FakeClock()
    gate = ToolGate("search", Resilience(breaker=Breaker(consecutive_failures=1, open_for=20)),
                    clock=clock)
    assert gate.arrive(1) == [Start(1)]
    moved = gate.finish(1, Err(ToolError("timeout")))
    assert [(type(a), a.transition.after) for a in moved if isinstance(a, Moved)] == \
        [(Moved, "open")]
    clock.advance(5)
    (refused,) = gate.arrive(2)
    assert isinstance(refused, Refuse)
    assert (refused.refusal.reason, refused.refusal.code, refused.refusal.retry_in) == \
        ("not_found", CIRCUIT_OPEN, 15.0)
    assert "tried again in 15.0 s" in refused.refusal.message
    assert gate.running() == [] and gate.waiting() == []


def test_the_bulkhead_queue_and_its_deadline() -> None:
    gate = ToolGate("db", Resilience(bulkhead=Bulkhead(max_concurrent=1, max_queue=1,
                                                       max_wait=2.0)), clock=FakeClock())
    assert gate.arrive(1) == [Start(1)]
    assert gate.arrive(2) == [WakeIn(2, 2.0)]
    (full,) = gate.arrive(3)
    assert isinstance(full, Refuse) and full.refusal.code == BULKHEAD_FULL
    assert full.refusal.reason == "timeout"
    (late,) = gate.wake(2)  # its wait ran out
    assert isinstance(late, Refuse) and late.refusal.code == BULKHEAD_WAIT_TIMEOUT
    assert gate.wake(2) == []  # a repeated wake does nothing
    assert gate.arrive(4) == [WakeIn(4, 2.0)]
    assert gate.finish(1, Ok()) == [Start(4)]  # the slot goes to the first waiting call
    assert gate.wake(4) == []  # its deadline fired too late: it is running
    gate.drop(4)  # a running call is not dropped: it must finish
    assert gate.finish(4, Ok()) == []
    with pytest.raises(ValueError, match="not running"):
        gate.finish(4, Ok())


def test_queued_calls_are_refused_when_the_breaker_opens_meanwhile() -> None:
    gate = ToolGate("api", Resilience(breaker=Breaker(consecutive_failures=1, open_for=9),
                                      bulkhead=Bulkhead(max_concurrent=1)), clock=FakeClock())
    gate.arrive(1)
    gate.arrive(2)
    gate.arrive(3)
    actions = gate.finish(1, Err(ToolError("handler_raised")))
    assert [type(a).__name__ for a in actions] == ["Moved", "Refuse", "Refuse"]
    assert all(a.refusal.code == CIRCUIT_OPEN for a in actions if isinstance(a, Refuse))
    state = gate.state()
    assert state.bulkhead is not None and (state.bulkhead.running, state.bulkhead.queued) == \
        (0, 0)


def test_a_rate_limited_call_waits_for_its_token_then_takes_a_slot() -> None:
    clock = FakeClock()
    gate = ToolGate("mail", Resilience(rate_limit=RateLimit(calls=1, per=2, max_wait=3),
                                       bulkhead=Bulkhead(max_concurrent=1)), clock=clock)
    assert gate.arrive(1) == [Start(1)]
    assert gate.arrive(2) == [WakeIn(2, 2.0)]
    (refused,) = gate.arrive(3)  # due in 4 s, past max_wait
    assert isinstance(refused, Refuse) and refused.refusal.code == RATE_LIMITED
    assert refused.refusal.retry_in == 4.0
    clock.advance(2)
    assert gate.wake(2) == [WakeIn(2, 60.0)]  # its token came; the slot is still taken
    assert gate.finish(1, Ok()) == [Start(2)]
    gate.drop(99)  # unknown tickets are ignored
    assert gate.arrive(5) == [WakeIn(5, 2.0)]
    gate.drop(5)  # cancelled while waiting for its token: the token goes back
    state = gate.state()
    assert state.rate_limit is not None and state.rate_limit.waiting == 0
    with pytest.raises(ValueError, match="already"):
        gate.arrive(2)


def test_hide_while_open() -> None:
    clock = FakeClock()
    gate = ToolGate("x", Resilience(breaker=Breaker(consecutive_failures=1, open_for=3,
                                                    hide_while_open=True)), clock=clock)
    gate.arrive(1)
    gate.finish(1, "failure")
    assert gate.hidden
    clock.advance(3)
    assert not gate.hidden  # half-open: offered again, so trials can happen


def test_resilience_refuses_what_is_not_its_part() -> None:
    with pytest.raises(TypeError, match=r"Resilience\.breaker"):
        Resilience(breaker=Bulkhead(max_concurrent=1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="clock"):
        CircuitBreaker(Breaker(), clock=3)  # type: ignore[arg-type]
