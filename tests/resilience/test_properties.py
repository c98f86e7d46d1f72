"""Properties of one tool's gate under random arrivals, outcomes, cancellations and time: no
call is ever lost or started while its breaker is open, the bulkhead holds, the rate holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolvisor import Err, Ok, ToolError
from toolvisor.contract import HandlerResult
from toolvisor.resilience import (
    Action,
    Breaker,
    Bulkhead,
    Moved,
    RateLimit,
    Refuse,
    Resilience,
    Start,
    ToolGate,
    WakeIn,
)
from toolvisor.testing import FakeClock

OUTCOMES: list[HandlerResult] = [
    Ok("fine"), Err("reported"), Err(ToolError("timeout")), Err(ToolError("handler_raised")),
    Err(ToolError("handler_exit", code="cancelled")), Err(ToolError("invalid_return")),
]

breakers = st.one_of(st.none(), st.builds(
    lambda window, **kwargs: Breaker(window=window[0], window_seconds=window[1], **kwargs),
    window=st.sampled_from([(3, None), (None, 5.0), (3, 5.0)]),
    consecutive_failures=st.sampled_from([None, 1, 2, 3]),
    failure_rate=st.sampled_from([0.5, 1.0]), min_calls=st.integers(1, 3),
    open_for=st.sampled_from([1.0, 4.0]), half_open_trials=st.integers(1, 3)))
bulkheads = st.one_of(st.none(), st.builds(
    Bulkhead, max_concurrent=st.integers(1, 3), max_queue=st.integers(0, 4),
    max_wait=st.sampled_from([None, 0.5, 3.0])))
rate_limits = st.one_of(st.none(), st.builds(
    RateLimit, calls=st.integers(1, 3), per=st.sampled_from([1.0, 2.0]),
    burst=st.sampled_from([None, 1, 4]), max_wait=st.sampled_from([None, 0.0, 2.5])))
arrive = st.just(("arrive",))
finish = st.tuples(st.just("finish"), st.integers(0, 50), st.sampled_from(OUTCOMES))
ops = st.lists(st.one_of(
    arrive, arrive, finish, finish, finish,
    st.tuples(st.just("advance"), st.sampled_from([0.25, 1.0, 3.0])),
    st.tuples(st.just("drop"), st.integers(0, 50)),
), min_size=4, max_size=80)


@dataclass
class Host:
    """Plays the host: performs the gate's actions, keeps the fate of every call."""

    gate: ToolGate
    clock: FakeClock
    status: str = "closed"  # the breaker as its reported moves tell it
    fate: dict[int, str] = field(default_factory=dict)  # started / refused / dropped
    running: list[int] = field(default_factory=list)
    wakes: dict[int, float | None] = field(default_factory=dict)  # waiting: due time

    def perform(self, actions: list[Action]) -> None:
        for action in actions:
            ticket = action.ticket
            match action:
                case Moved(transition=move):
                    assert move.before == self.status, move
                    self.status = move.after
                case Start():
                    assert self.status != "open", "a call started while its breaker was open"
                    assert ticket not in self.fate, f"call {ticket} answered twice"
                    self.fate[ticket] = "started"
                    self.running.append(ticket)
                    self.wakes.pop(ticket, None)
                case Refuse():
                    assert ticket not in self.fate, f"call {ticket} answered twice"
                    self.fate[ticket] = "refused"
                    self.wakes.pop(ticket, None)
                case WakeIn(seconds=seconds):
                    self.wakes[ticket] = None if seconds is None else self.clock() + seconds
        bulkhead = self.gate.config.bulkhead
        if bulkhead is not None:
            assert len(self.running) <= bulkhead.max_concurrent
        if self.gate.breaker is not None:
            assert self.gate.breaker._status == self.status  # every move was reported

    def fire_due_wakes(self) -> None:
        for ticket, due in sorted(self.wakes.items(), key=lambda kv: kv[0]):
            if ticket in self.wakes and due is not None and due <= self.clock():
                del self.wakes[ticket]
                self.perform(self.gate.wake(ticket))


@settings(max_examples=400, deadline=None)
@given(breaker=breakers, bulkhead=bulkheads, rate_limit=rate_limits, script=ops)
def test_no_call_is_lost_or_started_while_its_breaker_is_open(
        breaker: Breaker | None, bulkhead: Bulkhead | None, rate_limit: RateLimit | None,
        script: list[tuple[Any, ...]]) -> None:
    clock = FakeClock()
    gate = ToolGate("dep", Resilience(breaker, bulkhead, rate_limit), clock=clock)
    host = Host(gate, clock)
    tickets = 0
    dropped: set[int] = set()
    for op in script:
        match op:
            case ("arrive",):
                tickets += 1
                host.perform(gate.arrive(tickets))
            case ("finish", index, outcome) if host.running:
                ticket = host.running.pop(index % len(host.running))
                host.perform(gate.finish(ticket, outcome))
            case ("advance", seconds):
                clock.advance(seconds)
                host.fire_due_wakes()
            case ("drop", index) if host.wakes:
                ticket = sorted(host.wakes)[index % len(host.wakes)]
                del host.wakes[ticket]
                gate.drop(ticket)
                dropped.add(ticket)
    # Drain: time passes, every wait ends, every running call finishes (some failing).
    drained = 0
    while host.running or host.wakes:
        if host.running:
            drained += 1
            host.perform(gate.finish(host.running.pop(0), OUTCOMES[drained % len(OUTCOMES)]))
        else:  # nothing runs, so nothing waits for a slot: only deadlines are left
            assert all(due is not None for due in host.wakes.values())
            clock.advance(10)
            host.fire_due_wakes()
    assert set(host.fate) | dropped == set(range(1, tickets + 1))
    assert not set(host.fate) & dropped
    assert gate.running() == [] and gate.waiting() == []
    state = gate.state()
    if state.bulkhead is not None:
        assert (state.bulkhead.running, state.bulkhead.queued) == (0, 0)
    if state.rate_limit is not None:
        assert state.rate_limit.waiting == 0


@settings(max_examples=200, deadline=None)
@given(rate_limit=st.builds(RateLimit, calls=st.integers(1, 4),
                            per=st.sampled_from([0.5, 1.0, 3.0]),
                            burst=st.sampled_from([None, 1, 5]),
                            max_wait=st.sampled_from([None, 0.0, 1.0, 4.0])),
       steps=st.lists(st.tuples(st.integers(0, 4), st.sampled_from([0.0, 0.1, 0.5, 2.0])),
                      max_size=40))
def test_calls_start_no_faster_than_the_rate(rate_limit: RateLimit,
                                             steps: list[tuple[int, float]]) -> None:
    """Every call starts when its token is due: over any stretch from the start, starts never
    outnumber the burst plus what the rate refilled."""
    clock = FakeClock()
    gate = ToolGate("dep", Resilience(rate_limit=rate_limit), clock=clock)
    host = Host(gate, clock)
    starts: list[float] = []
    tickets = 0

    def note(actions: list[Action]) -> None:
        starts.extend(clock() for a in actions if isinstance(a, Start))
        host.perform(actions)

    for arrivals, seconds in steps:
        for _ in range(arrivals):
            tickets += 1
            note(gate.arrive(tickets))
        clock.advance(seconds)
        for ticket, due in sorted(host.wakes.items()):
            if due is not None and due <= clock():
                del host.wakes[ticket]
                note(gate.wake(ticket))
        for ticket in list(host.running):
            host.running.remove(ticket)
            note(gate.finish(ticket, Ok()))
    rate = rate_limit.calls / rate_limit.per
    for index, when in enumerate(starts):
        assert index + 1 <= rate_limit.capacity + rate * when + 1e-9
