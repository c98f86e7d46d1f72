"""Breakers, bulkheads and rate limits in a running agent: shared by all its runs, answering
through the closed error set, visible in ``resilience_state()``. Fake clocks and events, no
sleeps."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.runs import close_while_running
from toolvisor import (
    Agent,
    CallContext,
    Clocks,
    Completed,
    Err,
    Limits,
    Ok,
    OrchestratorStopped,
    Tool,
    ToolError,
    Tracing,
    set_event_sink,
)
from toolvisor.contract import ModelRequest, ToolResultMessage
from toolvisor.machine import CallAttempt, ContinueRun
from toolvisor.resilience import Breaker, Bulkhead, RateLimit, Resilience
from toolvisor.testing import FakeClock, FunctionModel, call, calls


class Events:
    """Records toolvisor's events and lets a test wait for them (instead of sleeping)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._flags: dict[str, threading.Event] = {}

    def __call__(self, level: str, event: str, fields: dict[str, Any]) -> None:
        with self._cond:
            self.seen.append({"event": event, **fields})
            self._cond.notify_all()
            if event in self._flags:
                self._flags[event].set()

    def named(self, event: str) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.seen if e["event"] == event]

    def reached(self, event: str) -> threading.Event:
        """An ``Event`` set once ``event`` has been seen."""
        with self._cond:
            flag = self._flags.setdefault(event, threading.Event())
            if any(e["event"] == event for e in self.seen):
                flag.set()
            return flag

    def wait_for(self, event: str, count: int = 1) -> None:
        with self._cond:
            assert self._cond.wait_for(
                lambda: sum(e["event"] == event for e in self.seen) >= count, 10), event


@pytest.fixture
def events() -> Iterator[Events]:
    sink = Events()
    previous = set_event_sink(sink)
    yield sink
    set_event_sink(previous)


def calling(*names: str) -> FunctionModel:
    """A model that asks for one call of each of ``names`` in one turn, then says done."""
    def respond(request: ModelRequest) -> Any:
        if isinstance(request.messages[-1], ToolResultMessage):
            return "done"
        return calls(*(call(name) for name in names))
    return FunctionModel(respond)


def results(outcome: Any) -> list[dict[str, Any]]:
    """The tool results the run's model was shown, decoded."""
    assert isinstance(outcome, Completed), outcome
    return [json.loads(m.content) if m.content.startswith("{") else m.content
            for m in outcome.messages if isinstance(m, ToolResultMessage)]


class Dependency:
    """A tool's dependency: down (the handler raises) or up; counts the calls that ran."""

    def __init__(self) -> None:
        self.up = False
        self.ran = 0

    def handler(self, arguments: dict[str, Any]) -> Ok:
        self.ran += 1
        if not self.up:
            raise ConnectionError("connection refused")
        return Ok("fresh data")


# --- circuit breaker ------------------------------------------------------------------------

def test_the_breaker_opens_refuses_without_running_then_trials_and_closes(
        events: Events) -> None:
    clock, dep = FakeClock(), Dependency()
    seen: list[Any] = []
    progress: list[tuple[str, dict[str, Any]]] = []

    def policy(failed: CallAttempt, error: Any) -> ContinueRun:
        seen.append(error)
        return ContinueRun()

    with Agent(calling("search"), [Tool("search", handler=dep.handler)], on_tool_error=policy,
               clocks=Clocks(monotonic=clock),
               tracing=Tracing(
                   on_progress=lambda run_id, event, data: progress.append((event, data))),
               limits=Limits(per_tool={"search": Resilience(breaker=Breaker(consecutive_failures=2,
                                                                open_for=60))})) as agent:
        assert agent.resilience_state().tools["search"].breaker.status == "closed"  # type: ignore[union-attr]
        for _ in range(2):
            agent.run("look it up")
        state = agent.resilience_state().tools["search"].breaker
        assert state is not None and (state.status, state.retry_in) == ("open", 60.0)
        clock.advance(15)
        (refused,) = results(agent.run("look it up"))
        assert dep.ran == 2  # open: the handler did not run
        assert refused["error"]["reason"] == "not_found"
        assert refused["error"]["code"] == "circuit_open"
        assert "tried again in 45.0 s" in refused["error"]["message"]
        error = seen[-1]  # through on_tool_error, like any failure
        assert isinstance(error, ToolError) and error.code == "circuit_open"
        assert error.metadata == {"retry_in": 45.0} and error.tool_name == "search"

        clock.advance(45)
        dep.up = True
        assert results(agent.run("look it up")) == ["fresh data"]  # the trial call
        state = agent.resilience_state().tools["search"].breaker
        assert state is not None and (state.status, state.times_opened, state.refused) == \
            ("closed", 1, 1)
    moves = [e for e in events.seen if e["event"].startswith("circuit_")]
    assert [(e["event"], e["before"]) for e in moves] == [
        ("circuit_opened", "closed"), ("circuit_half_opened", "open"),
        ("circuit_closed", "half_open")]
    assert moves[0]["tool_name"] == "search" and moves[0]["why"] == "2 failures in a row"
    assert [event for event, _ in progress if event.startswith("circuit_")] == [
        "circuit_opened", "circuit_half_opened", "circuit_closed"]
    assert [e["code"] for e in events.named("call_refused")] == ["circuit_open"]


def test_a_failed_trial_reopens_and_one_resilience_guards_every_tool() -> None:
    clock, dep, other = FakeClock(), Dependency(), Dependency()
    every = Resilience(breaker=Breaker(consecutive_failures=1, open_for=10))
    with Agent(calling("a", "b"), [Tool("a", handler=dep.handler),
                                   Tool("b", handler=other.handler)],
               limits=Limits(per_tool=every), clocks=Clocks(monotonic=clock)) as agent:
        assert agent.resilience_state().tools == {}  # a tool appears once called
        agent.run("go")
        assert set(agent.resilience_state().tools) == {"a", "b"}  # a breaker each
        clock.advance(10)
        other.up = True
        agent.run("go")  # a's trial fails: open again; b's succeeds: closed
        tools = agent.resilience_state().tools
    assert tools["a"].breaker is not None and tools["a"].breaker.status == "open"
    assert tools["a"].breaker.why == "a trial call failed"
    assert tools["b"].breaker is not None and tools["b"].breaker.status == "closed"
    assert (dep.ran, other.ran) == (2, 2)


def test_an_open_tool_can_leave_the_catalog_until_it_is_tried_again() -> None:
    clock, dep = FakeClock(), Dependency()
    offered: list[list[str]] = []

    def respond(request: ModelRequest) -> Any:
        names = [spec.name for spec in request.tools]
        offered.append(names)
        if isinstance(request.messages[-1], ToolResultMessage) or "search" not in names:
            return "done"
        return calls(call("search"))

    breaker = Breaker(consecutive_failures=1, open_for=30, hide_while_open=True)
    with Agent(FunctionModel(respond), [Tool("search", handler=dep.handler),
                                         Tool("other", handler=lambda a: Ok())],
               limits=Limits(per_tool={"search": Resilience(breaker=breaker)}),
               clocks=Clocks(monotonic=clock)) as agent:
        agent.run("go")
        agent.run("go")
        clock.advance(30)
        agent.run("go")
        assert "search" in agent.registry.members()  # still a member: only not offered
    # open after the first call; offered again when half-open; the trial fails: open again
    assert offered == [["search", "other"], ["other"], ["other"], ["search", "other"],
                       ["other"]]


# --- bulkhead -------------------------------------------------------------------------------

class Gate:
    """A handler that holds its call until released, tracking how many run at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)
        self._lock = threading.Lock()
        self.running = self.peak = self.ran = 0

    def handler(self, arguments: dict[str, Any], ctx: CallContext) -> Ok:
        with self._lock:
            self.running += 1
            self.ran += 1
            self.peak = max(self.peak, self.running)
        self.entered.release()
        try:
            assert self.release.wait(10)
            return Ok("done")
        finally:
            with self._lock:
                self.running -= 1


def test_a_bulkhead_holds_concurrency_at_n_across_runs_and_loses_no_call(
        events: Events) -> None:
    gate = Gate()

    async def six_runs(agent: Agent) -> list[Any]:
        tasks = [asyncio.ensure_future(agent.arun("go")) for _ in range(6)]
        await asyncio.to_thread(events.wait_for, "call_waiting", 4)
        state = agent.resilience_state().tools["db"].bulkhead
        assert state is not None and (state.running, state.queued) == (2, 4)
        gate.release.set()
        return await asyncio.gather(*tasks)

    with Agent(calling("db"), [Tool("db", handler=gate.handler)], limits=Limits(
            per_tool={"db": Resilience(bulkhead=Bulkhead(max_concurrent=2))})) as agent:
        outcomes = asyncio.run(six_runs(agent))
        state = agent.resilience_state().tools["db"].bulkhead
    assert [results(o) for o in outcomes] == [["done"]] * 6
    assert (gate.peak, gate.ran) == (2, 6)
    assert state is not None and (state.running, state.queued, state.refused) == (0, 0, 0)


def test_bulkhead_refusals_say_which_limit(events: Events) -> None:
    gate = Gate()
    bulkhead = Bulkhead(max_concurrent=1, max_queue=1, max_wait=0.05)
    with Agent(calling("db", "db", "db"), [Tool("db", handler=gate.handler)],
               limits=Limits(per_tool={"db": Resilience(bulkhead=bulkhead)})) as agent:
        outcome_box: list[Any] = []
        runner = threading.Thread(target=lambda: outcome_box.append(agent.run("go")))
        runner.start()
        gate.entered.acquire()  # the first call holds the slot
        events.wait_for("call_refused", 2)  # one found the queue full, one waited too long
        gate.release.set()
        runner.join()
    first, waited, full = results(outcome_box[0])
    assert first == "done" and gate.ran == 1
    assert (waited["error"]["reason"], waited["error"]["code"]) == ("timeout",
                                                                    "bulkhead_wait_timeout")
    assert (full["error"]["reason"], full["error"]["code"]) == ("timeout", "bulkhead_full")


def test_cancelling_a_run_drops_its_queued_calls(events: Events) -> None:
    gate = Gate()

    async def scenario(agent: Agent) -> Any:
        holder = asyncio.ensure_future(agent.arun("hold"))
        await asyncio.to_thread(gate.entered.acquire)
        queued = asyncio.ensure_future(agent.arun("wait"))
        await asyncio.to_thread(events.wait_for, "call_waiting")
        queued.cancel()  # cancels the run: its call leaves the queue, never to run
        await asyncio.to_thread(events.wait_for, "run_finished")
        state = agent.resilience_state().tools["db"].bulkhead
        assert state is not None and (state.running, state.queued) == (1, 0)
        gate.release.set()
        return await holder

    with Agent(calling("db"), [Tool("db", handler=gate.handler)], limits=Limits(
            per_tool={"db": Resilience(bulkhead=Bulkhead(max_concurrent=1))})) as agent:
        assert results(asyncio.run(scenario(agent))) == ["done"]
    assert gate.ran == 1


def test_closing_the_agent_with_calls_waiting_leaves_nothing_behind(events: Events) -> None:
    def hang(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        ctx.cancelled.wait(10)  # released when the agent closes and cancels the call
        return Ok("late")

    agent = Agent(calling("db", "db"), [Tool("db", handler=hang)],
                  limits=Limits(per_tool={"db": Resilience(bulkhead=Bulkhead(max_concurrent=1))}))
    # One call runs, one waits with a deadline timer; the leak check (autouse) then finds no
    # timer thread left.
    assert isinstance(close_while_running(agent, events.reached("call_waiting")),
                      OrchestratorStopped)


# --- rate limit -----------------------------------------------------------------------------

def test_a_fail_fast_rate_limit_refuses_with_its_next_turn() -> None:
    clock, dep = FakeClock(), Dependency()
    dep.up = True
    limit = RateLimit(calls=1, per=60, max_wait=0)
    with Agent(calling("mail"), [Tool("mail", handler=dep.handler)],
               limits=Limits(per_tool={"mail": Resilience(rate_limit=limit)}),
               clocks=Clocks(monotonic=clock)) as agent:
        assert results(agent.run("send")) == ["fresh data"]
        (refused,) = results(agent.run("send"))
        clock.advance(60)
        assert results(agent.run("send")) == ["fresh data"]
        state = agent.resilience_state().tools["mail"].rate_limit
    assert (refused["error"]["reason"], refused["error"]["code"]) == ("timeout", "rate_limited")
    assert "next turn is in 60.0 s" in refused["error"]["message"]
    assert dep.ran == 2 and state is not None and state.refused == 1


def test_calls_beyond_the_rate_wait_their_turn(events: Events) -> None:
    dep = Dependency()
    dep.up = True
    limit = RateLimit(calls=1, per=0.02, max_wait=5)
    with Agent(calling("mail", "mail", "mail"), [Tool("mail", handler=dep.handler)],
               limits=Limits(per_tool={"mail": Resilience(rate_limit=limit)}),
               clocks=Clocks(monotonic=FakeClock())) as agent:  # the bucket's time stands still;
        assert results(agent.run("send")) == ["fresh data"] * 3  # the waits are real
    assert dep.ran == 3
    assert [e["seconds"] for e in events.named("call_waiting")] == pytest.approx([0.02, 0.04])


# --- configuration --------------------------------------------------------------------------

@pytest.mark.parametrize("resilience", [5, {"x": Breaker()}, {3: Resilience()}])
def test_bad_resilience_is_refused(resilience: Any) -> None:
    with pytest.raises(TypeError, match=r"Limits\.per_tool must be a Resilience, a mapping from "
                                        "tool name to Resilience, or None"):
        Agent(calling(), limits=Limits(per_tool=resilience))


def test_the_state_is_json() -> None:
    with Agent(calling(), limits=Limits(per_tool={"t": Resilience(
            breaker=Breaker(), bulkhead=Bulkhead(max_concurrent=3),
            rate_limit=RateLimit(calls=5))})) as agent:
        data = json.loads(agent.resilience_state().model_dump_json())
    assert data["tools"]["t"]["breaker"]["status"] == "closed"
    assert data["tools"]["t"]["bulkhead"]["max_concurrent"] == 3
    assert data["tools"]["t"]["rate_limit"]["tokens"] == 5.0



# --- a property over the whole agent --------------------------------------------------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outcomes=st.lists(st.sampled_from(["ok", "raise", "report", "exit"]), min_size=1,
                         max_size=10),
       advances=st.lists(st.sampled_from([0.0, 2.0, 6.0]), min_size=1, max_size=5),
       runs=st.integers(1, 4), per_run=st.integers(1, 3))
def test_under_random_outcomes_no_call_is_lost_or_run_while_its_breaker_is_open(
        outcomes: list[str], advances: list[float], runs: int, per_run: int) -> None:
    clock = FakeClock()
    lock = threading.Lock()
    ran: list[str] = []
    ran_while_open: list[Any] = []
    agent: Agent

    def handler(arguments: dict[str, Any]) -> Any:
        breaker = agent.resilience_state().tools["dep"].breaker
        if breaker is None or breaker.status == "open":
            ran_while_open.append(breaker)
        with lock:  # the bulkhead lets one call run at a time, the lock is for the reader
            outcome = outcomes[len(ran) % len(outcomes)]
            clock.advance(advances[len(ran) % len(advances)])
            ran.append(outcome)
        if outcome == "raise":
            raise ConnectionError("down")
        if outcome == "exit":
            raise SystemExit(3)
        return Err("no such row") if outcome == "report" else Ok("row")

    guard = Resilience(breaker=Breaker(consecutive_failures=2, open_for=5, count_reported=True),
                       bulkhead=Bulkhead(max_concurrent=1))

    async def all_runs() -> list[Any]:
        return await asyncio.gather(*(agent.arun("go") for _ in range(runs)))

    with Agent(calling(*["dep"] * per_run), [Tool("dep", handler=handler)],
               limits=Limits(per_tool={"dep": guard}), clocks=Clocks(monotonic=clock)) as agent:
        outcomes_of_runs = asyncio.run(all_runs())
        state = agent.resilience_state().tools["dep"]
    assert ran_while_open == []
    shown = [r for outcome in outcomes_of_runs for r in results(outcome)]
    assert len(shown) == runs * per_run  # every call got exactly one result
    refused = [r for r in shown if isinstance(r, dict) and isinstance(r["error"], dict)
               and r["error"].get("code") == "circuit_open"]
    assert len(ran) + len(refused) == len(shown)  # each either ran once or was refused
    assert state.bulkhead is not None and (state.bulkhead.running, state.bulkhead.queued) == \
        (0, 0)
