"""``ToolCallActor`` under a ``DynamicSupervisor``, through ``ToolCallDispatcher``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from tests.support import handlers as h
from tests.support.events import Events
from toolvisor import CallContext, Err, Ok, Tool, ToolCall, ToolError
from toolvisor._logging import set_event_sink
from toolvisor.actors import CallReply, ToolCallActor, ToolCallDispatcher
from toolvisor.contract import HandlerResult
from toolvisor.executor import ToolRunner
from toolvisor.supervisors import DynamicSupervisor, DynamicSupervisorRef
from toolvisor.testing import capture_events


@pytest.fixture
def runner() -> Iterator[ToolRunner]:
    with ToolRunner(tool_timeout=5.0) as r:
        yield r


@pytest.fixture
def supervisor() -> Iterator[DynamicSupervisorRef]:
    ref = DynamicSupervisor.start(max_children=64, shutdown=1.0)
    yield ref
    ref.stop()


@pytest.fixture
def dispatcher(supervisor: DynamicSupervisorRef,
               runner: ToolRunner) -> Iterator[ToolCallDispatcher]:
    with ToolCallDispatcher(supervisor, runner) as d:
        yield d


def call(tool: Tool, call_id: str, **arguments: Any) -> tuple[Tool, ToolCall, None]:
    return (tool, ToolCall(id=call_id, name=tool.name, arguments=arguments), None)


def reason_of(outcome: CallReply) -> str:
    assert isinstance(outcome.result, Err) and isinstance(outcome.result.reason, ToolError)
    return outcome.result.reason.reason


def test_an_outcome_carries_ids_result_and_model_text(dispatcher: ToolCallDispatcher) -> None:
    [outcome] = dispatcher.dispatch([call(Tool(name="echo", handler=h.ok_echo), "c1", a=1)])
    assert outcome == CallReply("c1", "echo", Ok({"a": 1}), '{"a":1}')
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
    named = {(e["event"], e.get("tool_call_id"), e.get("outcome")) for e in events}
    assert {("call_started", "a", None), ("call_finished", "a", "ok"),
            ("call_started", "b", None), ("call_finished", "b", "timeout")} <= named
    timed_out = next(e for e in events if e.get("outcome") == "timeout")
    assert timed_out["tool_name"] == "hang" and timed_out["level"] == "warning"
    assert timed_out["duration_ms"] >= 50 and "0.05 s" in timed_out["error"]
    assert timed_out["isolation"] == "thread" and timed_out["attempt"] == 1


def test_every_actor_stops_after_replying(supervisor: DynamicSupervisorRef,
                                          runner: ToolRunner) -> None:
    with ToolCallDispatcher(supervisor, runner) as dispatcher:
        dispatcher.dispatch([call(Tool(name="ok", handler=h.ok_echo), str(i)) for i in range(20)])
    # the dispatcher's close joined every actor loop
    assert pykka.ActorRegistry.get_by_class(ToolCallActor) == []
    assert supervisor.count_children()["active"] == 0


def test_supervisor_shutdown_cancels_a_running_call_and_replies_once(
    runner: ToolRunner,
) -> None:
    supervisor = DynamicSupervisor.start(shutdown=1.0)
    got: list[CallReply] = []
    replied = threading.Event()
    handler_running = threading.Event()

    def handler(arguments: Any, ctx: CallContext) -> Ok:
        handler_running.set()
        ctx.cancelled.wait()
        return Ok("late")

    # The late result is logged on the call actor's pooled thread, which the dispatcher's
    # close joins: capture until then.
    with capture_events() as events, ToolCallDispatcher(supervisor, runner) as dispatcher:
        tool = Tool(name="slow", handler=handler)
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
    supervisor = DynamicSupervisor.start(max_children=1)
    release = threading.Event()

    def blocker(arguments: Any, ctx: CallContext) -> Ok:
        release.wait()
        return Ok("done")

    try:
        with ToolCallDispatcher(supervisor, runner) as dispatcher:
            results: list[list[CallReply]] = []
            outcomes_ready = threading.Event()
            streamed: list[CallReply] = []

            def on_outcome(outcome: CallReply) -> None:
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
    assert "raise it to run more at once" in second.result.reason.message  # names the setting
    assert "max_concurrent_calls" in second.result.reason.message
    assert streamed[0].tool_call_id == "y"


def test_a_result_is_encoded_once_and_an_unencodable_one_reported(
    dispatcher: ToolCallDispatcher,
) -> None:
    [outcome] = dispatcher.dispatch([call(Tool(name="lock", handler=h.unencodable), "u")])
    assert reason_of(outcome) == "encoding_failed"
    error: HandlerResult = outcome.result
    assert isinstance(error, Err) and error.reason.tool_call_id == "u"


# --- thread tools run on the call actor's own thread -------------------------------------------


@pytest.fixture
def events() -> Iterator[Events]:
    recorder = Events()
    previous = set_event_sink(recorder.sink)
    yield recorder
    set_event_sink(previous)


def test_a_thread_handler_runs_on_its_call_actors_own_thread(
    dispatcher: ToolCallDispatcher,
) -> None:
    def where(arguments: Any) -> Ok:
        return Ok(threading.current_thread().name)

    [outcome] = dispatcher.dispatch([call(Tool(name="where", handler=where), "w")])
    assert isinstance(outcome.result, Ok) and outcome.result.value.startswith("toolvisor-actor")
    # a handler may block: it runs on a thread of its own, never on one of the brief ones
    assert not outcome.result.value.startswith("toolvisor-actor-brief")


def test_a_hung_thread_handler_times_out_and_frees_its_supervisor_slot_at_once(
    runner: ToolRunner, events: Events,
) -> None:
    """The handler ignores its token: its thread is abandoned (counted, replaced), the actor
    ends at the deadline, and the next call gets the slot and a thread while it still hangs."""
    supervisor = DynamicSupervisor.start(max_children=1, shutdown=30.0)
    release = threading.Event()

    def stubborn(arguments: Any) -> Ok:
        release.wait()
        return Ok("late")

    try:
        with ToolCallDispatcher(supervisor, runner, max_actor_threads=1) as dispatcher:
            [hung] = dispatcher.dispatch([call(Tool(name="stubborn", handler=stubborn,
                                                    timeout=0.05), "h")])
            assert reason_of(hung) == "timeout"
            events.wait_for("child_exited")
            assert supervisor.count_children()["active"] == 0
            [after] = dispatcher.dispatch([call(Tool(name="ok", handler=h.ok_echo), "n", a=1)])
            assert after.result == Ok({"a": 1})
            pool = dispatcher.thread_pool
            assert (pool.threads_abandoned, pool.threads_hung) == (1, 1)
            assert runner.stats.threads_abandoned == 1
            release.set()
            events.wait_for("late_result_discarded", tool_name="stubborn")
    finally:
        release.set()
        supervisor.stop()
    assert {("call_abandoned", None), ("call_finished", "timeout")} <= {
        (e["event"], e.get("outcome")) for e in events.items}
    assert pool.threads_hung == 0


def test_shutdown_ends_a_call_whose_handler_ignores_its_token_without_waiting_the_grace(
    runner: ToolRunner, events: Events,
) -> None:
    supervisor = DynamicSupervisor.start(shutdown=30.0)
    running, release = threading.Event(), threading.Event()
    got: list[CallReply] = []

    def stubborn(arguments: Any) -> Ok:
        running.set()
        release.wait()
        return Ok("late")

    try:
        with ToolCallDispatcher(supervisor, runner) as dispatcher:
            dispatcher.start_call(Tool(name="stubborn", handler=stubborn),
                                  ToolCall(id="s", name="stubborn"), None, got.append)
            running.wait()
            assert supervisor.stop()
            assert supervisor.count_children()["abandoned"] == 0
            assert events.wait_for("child_exited")["reason"] == "shutdown"
            assert len(got) == 1 and got[0].result.reason.code == "cancelled"  # type: ignore[union-attr]
            release.set()
            events.wait_for("late_result_discarded", tool_name="stubborn")
    finally:
        release.set()
    assert len(got) == 1


def test_stopping_a_call_actor_while_its_handler_runs_cancels_the_call(
    supervisor: DynamicSupervisorRef, runner: ToolRunner,
) -> None:
    running, release = threading.Event(), threading.Event()
    got: list[CallReply] = []

    def stubborn(arguments: Any) -> Ok:
        running.set()
        release.wait()
        return Ok("late")

    with ToolCallDispatcher(supervisor, runner) as dispatcher:
        try:
            dispatcher.start_call(Tool(name="stubborn", handler=stubborn),
                                  ToolCall(id="s", name="stubborn"), None, got.append)
            running.wait()
            [child] = supervisor.which_children()
            assert child.ref.stop(block=True) is True
            assert not child.ref.is_alive()
        finally:
            release.set()
    assert len(got) == 1 and got[0].result.reason.code == "cancelled"  # type: ignore[union-attr]


@pytest.mark.parametrize("handler", [h.ok_echo, h.async_ok], ids=["thread", "asyncio"])
def test_a_reply_to_a_dead_asker_is_logged_and_the_actor_still_ends(
    supervisor: DynamicSupervisorRef, runner: ToolRunner, events: Events, handler: Any,
) -> None:
    def dead(outcome: CallReply) -> None:
        raise pykka.ActorDeadError("the orchestrator stopped")

    with ToolCallDispatcher(supervisor, runner) as dispatcher:
        dispatcher.start_call(Tool(name="t", handler=handler), ToolCall(id="d", name="t"),
                              None, dead)
        assert "orchestrator stopped" in events.wait_for("reply_undeliverable",
                                                         tool_call_id="d")["error"]
        events.wait_for("child_exited")
    assert pykka.ActorRegistry.get_by_class(ToolCallActor) == []
    assert supervisor.count_children()["active"] == 0


def test_a_not_started_reply_to_a_dead_asker_is_logged(runner: ToolRunner,
                                                       events: Events) -> None:
    supervisor = DynamicSupervisor.start()
    supervisor.stop()

    def dead(outcome: CallReply) -> None:
        raise pykka.ActorDeadError("gone")

    with ToolCallDispatcher(supervisor, runner) as dispatcher:
        dispatcher.start_call(Tool(name="t", handler=h.ok_echo), ToolCall(id="x", name="t"),
                              None, dead)
    assert events.wait_for("reply_undeliverable", tool_call_id="x")
    assert events.wait_for("call_not_started", tool_call_id="x")


@pytest.mark.parametrize("handler", [h.hangs_cooperatively, h.async_hangs],
                         ids=["thread", "asyncio"])
def test_shutdown_cancels_a_cooperative_call_in_each_isolation(runner: ToolRunner,
                                                               handler: Any) -> None:
    supervisor = DynamicSupervisor.start(shutdown=30.0)
    with ToolCallDispatcher(supervisor, runner) as dispatcher:
        got: list[CallReply] = []
        replied = threading.Event()
        dispatcher.start_call(Tool(name="hang", handler=handler), ToolCall(id="c", name="hang"),
                              None, lambda o: (got.append(o), replied.set()))
        assert supervisor.stop()
        replied.wait()
        assert supervisor.count_children()["abandoned"] == 0
    assert len(got) == 1 and reason_of(got[0]) == "handler_exit"
    assert got[0].result.reason.code == "cancelled"  # type: ignore[union-attr]


# --- the supervisor as a function of its current incarnation ------------------------------------


def test_the_supervisor_can_be_a_function_returning_the_current_ref(runner: ToolRunner) -> None:
    current = [DynamicSupervisor.start()]
    try:
        with ToolCallDispatcher(lambda: current[0], runner) as dispatcher:
            echo = Tool(name="echo", handler=h.ok_echo)
            assert dispatcher.dispatch([call(echo, "1", n=1)])[0].result == Ok({"n": 1})
            current[0].stop()
            [refused] = dispatcher.dispatch([call(echo, "2")])
            assert refused.result.reason.code == "not_started"  # type: ignore[union-attr]
            current[0] = DynamicSupervisor.start()  # "restarted": a new ref
            assert dispatcher.dispatch([call(echo, "3", n=3)])[0].result == Ok({"n": 3})
    finally:
        current[0].stop()


def test_a_supervisor_function_that_fails_gives_not_started(runner: ToolRunner) -> None:
    def not_running() -> DynamicSupervisorRef:
        raise RuntimeError("the tool-call supervisor is restarting")

    with ToolCallDispatcher(not_running, runner) as dispatcher:
        [outcome] = dispatcher.dispatch([call(Tool(name="t", handler=h.ok_echo), "1")])
    assert isinstance(outcome.result, Err)
    assert outcome.result.reason.code == "not_started"
    assert "restarting" in outcome.result.reason.message
    with ToolCallDispatcher(lambda: "nope", runner) as dispatcher:  # type: ignore[arg-type,return-value]
        [outcome] = dispatcher.dispatch([call(Tool(name="t", handler=h.ok_echo), "2")])
    assert "not a DynamicSupervisorRef" in outcome.result.reason.message  # type: ignore[union-attr]


def test_a_bad_supervisor_or_runner_is_refused_clearly(runner: ToolRunner,
                                                       supervisor: DynamicSupervisorRef) -> None:
    with pytest.raises(TypeError, match="DynamicSupervisorRef"):
        ToolCallDispatcher("supervisor", runner)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="runner must be a ToolRunner"):
        ToolCallDispatcher(supervisor, object())  # type: ignore[arg-type]


def test_a_waiting_asyncio_call_holds_no_actor_thread(runner: ToolRunner,
                                                      supervisor: DynamicSupervisorRef) -> None:
    """A call actor parks while its call waits on the event loop: ten calls wait at once on
    two actor threads, and each still replies once it is released."""
    entered = threading.Semaphore(0)
    release = threading.Event()

    async def waits(arguments: dict[str, Any]) -> Ok:
        import asyncio  # noqa: PLC0415

        entered.release()
        while not release.is_set():
            await asyncio.sleep(0.001)
        return Ok(arguments["n"])

    tool = Tool(name="waits", handler=waits, isolation="asyncio")
    with ToolCallDispatcher(supervisor, runner, max_actor_threads=2) as dispatcher:
        replies: list[CallReply] = []
        done = threading.Semaphore(0)

        def reply(outcome: CallReply) -> None:
            replies.append(outcome)
            done.release()

        for n in range(10):
            dispatcher.start_call(tool, ToolCall(id=f"c{n}", name="waits", arguments={"n": n}),
                                  None, reply)
        for _ in range(10):
            assert entered.acquire(timeout=10)  # every handler runs, two threads or not
        assert dispatcher.thread_pool.live_threads <= 2
        release.set()
        for _ in range(10):
            assert done.acquire(timeout=10)
    assert {r.tool_call_id: r.result for r in replies} == {f"c{n}": Ok(n) for n in range(10)}
