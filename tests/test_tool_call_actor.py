"""``ToolCallActor`` under a ``ToolCallSupervisor``, through ``ToolCallDispatcher``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from tests import _handlers as h
from toolvisor import CallContext, Err, Ok, Tool, ToolCall, ToolError
from toolvisor.actors import CallOutcome, ToolCallActor, ToolCallDispatcher
from toolvisor.contract import HandlerResult
from toolvisor.executor import ToolRunner
from toolvisor.supervisors import ToolCallSupervisor, ToolCallSupervisorRef
from toolvisor.testing import capture_events


@pytest.fixture
def runner() -> Iterator[ToolRunner]:
    with ToolRunner(tool_timeout=5.0) as r:
        yield r


@pytest.fixture
def supervisor() -> Iterator[ToolCallSupervisorRef]:
    ref = ToolCallSupervisor.start(max_children=64, shutdown=1.0)
    yield ref
    ref.stop()


@pytest.fixture
def dispatcher(supervisor: ToolCallSupervisorRef,
               runner: ToolRunner) -> Iterator[ToolCallDispatcher]:
    with ToolCallDispatcher(supervisor, runner) as d:
        yield d


def call(tool: Tool, call_id: str, **arguments: Any) -> tuple[Tool, ToolCall, None]:
    return (tool, ToolCall(id=call_id, name=tool.name, arguments=arguments), None)


def reason_of(outcome: CallOutcome) -> str:
    assert isinstance(outcome.result, Err) and isinstance(outcome.result.reason, ToolError)
    return outcome.result.reason.reason


def test_an_outcome_carries_ids_result_and_model_text(dispatcher: ToolCallDispatcher) -> None:
    [outcome] = dispatcher.dispatch([call(Tool(name="echo", handler=h.ok_echo), "c1", a=1)])
    assert outcome == CallOutcome("c1", "echo", Ok({"a": 1}), '{"a":1}')
    assert not outcome.is_error


def test_the_handler_sees_the_call_in_its_context(dispatcher: ToolCallDispatcher) -> None:
    [outcome] = dispatcher.dispatch([call(Tool(name="who", handler=h.call_id), "c9")])
    assert outcome.result == Ok("c9")


def test_a_batch_gives_each_failure_its_reason_in_call_order(
    dispatcher: ToolCallDispatcher,
) -> None:
    batch = [
        call(Tool(name="ok", handler=h.ok_echo), "a", n=1),
        call(Tool(name="raise", handler=h.raises), "b"),
        call(Tool(name="exit", handler=h.exits), "c"),
        call(Tool(name="hang", handler=h.hangs_cooperatively, timeout=0.1), "d"),
        call(Tool(name="garbage", handler=h.garbage), "e"),
        call(Tool(name="unencodable", handler=h.unencodable), "f"),
        call(Tool(name="manual"), "g"),
        call(Tool(name="async_ok", handler=h.async_ok), "h", n=2),
    ]
    streamed: list[str] = []
    outcomes = dispatcher.dispatch(batch, on_outcome=lambda o: streamed.append(o.tool_call_id))
    assert [o.tool_call_id for o in outcomes] == list("abcdefgh")
    assert sorted(streamed) == list("abcdefgh")
    assert outcomes[0].result == Ok({"n": 1}) and outcomes[7].result == Ok({"n": 2})
    assert [reason_of(o) for o in outcomes[1:7]] == [
        "handler_raised", "handler_exit", "timeout", "invalid_return", "encoding_failed",
        "not_found"]
    assert all(o.is_error and '"error"' in o.text for o in outcomes[1:7])


def test_lifecycle_events_are_bound_to_the_call(dispatcher: ToolCallDispatcher) -> None:
    with capture_events() as events:
        dispatcher.dispatch([
            call(Tool(name="ok", handler=h.ok_echo), "a"),
            call(Tool(name="hang", handler=h.hangs_cooperatively, timeout=0.05), "b"),
        ])
    named = {(e["event"], e.get("tool_call_id")) for e in events}
    assert {("call_started", "a"), ("call_completed", "a"), ("call_started", "b"),
            ("call_timed_out", "b")} <= named
    timed_out = next(e for e in events if e["event"] == "call_timed_out")
    assert timed_out["tool_name"] == "hang" and timed_out["timeout"] == 0.05


def test_every_actor_stops_after_replying(supervisor: ToolCallSupervisorRef,
                                          runner: ToolRunner) -> None:
    with ToolCallDispatcher(supervisor, runner) as dispatcher:
        dispatcher.dispatch([call(Tool(name="ok", handler=h.ok_echo), str(i)) for i in range(20)])
    # the dispatcher's close joined every actor loop
    assert pykka.ActorRegistry.get_by_class(ToolCallActor) == []
    assert supervisor.count_children()["active"] == 0


def test_supervisor_shutdown_cancels_a_running_call_and_replies_once(
    runner: ToolRunner,
) -> None:
    supervisor = ToolCallSupervisor.start(shutdown=1.0)
    got: list[CallOutcome] = []
    replied = threading.Event()
    handler_running = threading.Event()

    def handler(arguments: Any, ctx: CallContext) -> Ok:
        handler_running.set()
        ctx.cancelled.wait()
        return Ok("late")

    with ToolCallDispatcher(supervisor, runner) as dispatcher:
        tool = Tool(name="slow", handler=handler)
        with capture_events() as events:
            dispatcher.start_call(tool, ToolCall(id="s1", name="slow"), None,
                                  lambda o: (got.append(o), replied.set()))
            handler_running.wait()
            supervisor.stop()
            replied.wait()
            runner.close()
    assert len(got) == 1
    assert isinstance(got[0].result, Err) and got[0].result.reason.code == "cancelled"
    assert any(e["event"] == "late_result_discarded" for e in events)


def test_a_full_supervisor_gives_not_started_outcomes(runner: ToolRunner) -> None:
    supervisor = ToolCallSupervisor.start(max_children=1)
    release = threading.Event()

    def blocker(arguments: Any, ctx: CallContext) -> Ok:
        release.wait()
        return Ok("done")

    try:
        with ToolCallDispatcher(supervisor, runner) as dispatcher:
            results: list[list[CallOutcome]] = []
            outcomes_ready = threading.Event()
            streamed: list[CallOutcome] = []

            def on_outcome(outcome: CallOutcome) -> None:
                streamed.append(outcome)
                release.set()  # the refused call finished: let the first one go

            worker = threading.Thread(target=lambda: (results.append(dispatcher.dispatch(
                [call(Tool(name="block", handler=blocker), "x"),
                 call(Tool(name="more", handler=h.ok_echo), "y")], on_outcome)),
                outcomes_ready.set()))
            worker.start()
            outcomes_ready.wait()
            worker.join()
    finally:
        supervisor.stop()
    first, second = results[0]
    assert first.result == Ok("done")
    assert isinstance(second.result, Err) and second.result.reason.code == "not_started"
    assert streamed[0].tool_call_id == "y"


def test_a_result_is_encoded_once_and_an_unencodable_one_reported(
    dispatcher: ToolCallDispatcher,
) -> None:
    [outcome] = dispatcher.dispatch([call(Tool(name="lock", handler=h.unencodable), "u")])
    assert reason_of(outcome) == "encoding_failed"
    error: HandlerResult = outcome.result
    assert isinstance(error, Err) and error.reason.tool_call_id == "u"
