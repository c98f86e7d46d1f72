"""``ToolRunner`` under ``thread`` and ``asyncio`` isolation: results, timeouts, cancellation."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import handlers as h
from toolvisor import AskUser, CallContext, Err, Halt, Ok, Pending, Tool, ToolCall, ToolError
from toolvisor.contract import HandlerResult, InvalidArguments
from toolvisor.executor import ToolRunner
from toolvisor.testing import capture_events

LEGAL = [Ok(1), Err("reported"), AskUser("continue?", ("y", "n")), Halt("enough", 1),
         Pending(deadline=3)]


class TakenKey:
    """A completion-key capability whose key was taken (the executor reads ``issued``)."""

    issued = "key"

    def issue(self) -> str:
        return self.issued


@pytest.fixture
def runner() -> Iterator[ToolRunner]:
    with ToolRunner(tool_timeout=5.0) as r:
        yield r


def reason_of(result: HandlerResult) -> str:
    assert isinstance(result, Err) and isinstance(result.reason, ToolError), result
    return result.reason.reason


def returning(value: Any) -> Tool:
    return Tool(name="t", handler=lambda arguments: value)


async def _async_return(value: Any) -> Any:
    return value


def async_returning(value: Any) -> Tool:
    async def handler(arguments: Any) -> Any:
        return value

    return Tool(name="t", handler=handler)


@pytest.mark.parametrize("result", LEGAL, ids=repr)
@pytest.mark.parametrize("make", [returning, async_returning], ids=["thread", "asyncio"])
def test_legal_results_pass_through_unchanged(runner: ToolRunner, make: Any, result: Any) -> None:
    keyed = CallContext(completion_keys=TakenKey())  # a Pending handler took its key
    assert runner.run(make(result), {}, keyed) is result


FAILURES = [
    (h.raises, "handler_raised"),
    (h.exits, "handler_exit"),
    (h.garbage, "invalid_return"),
    (h.async_raises, "handler_raised"),
    (h.async_exits, "handler_exit"),
    (h.async_garbage, "invalid_return"),
]


@pytest.mark.parametrize(("handler", "reason"), FAILURES, ids=lambda v: getattr(v, "__name__", v))
def test_each_failure_becomes_its_tool_error(runner: ToolRunner, handler: Any,
                                             reason: str) -> None:
    ctx = CallContext(tool_call=ToolCall(id="c1", name="t"))
    result = runner.run(Tool(name="t", handler=handler), {}, ctx)
    assert reason_of(result) == reason
    assert isinstance(result, Err)
    assert result.reason.tool_name == "t" and result.reason.tool_call_id == "c1"


def test_a_tool_without_handler_is_not_found(runner: ToolRunner) -> None:
    assert reason_of(runner.run(Tool(name="manual"), {})) == "not_found"


def test_invalid_arguments_never_reach_the_handler(runner: ToolRunner) -> None:
    result = runner.run(h.add_point, {"x": "one"})
    assert isinstance(result, Err) and isinstance(result.reason, InvalidArguments)


@pytest.mark.parametrize("handler", [h.hangs_cooperatively, h.async_hangs],
                         ids=["thread", "asyncio"])
def test_a_hung_call_times_out_with_its_timeout_as_cause(runner: ToolRunner,
                                                         handler: Any) -> None:
    ctx = CallContext(tool_call=ToolCall(id="slow-1", name="slow"))
    result = runner.run(Tool(name="slow", handler=handler, timeout=0.05), {}, ctx)
    assert isinstance(result, Err)
    error = result.reason
    assert (error.reason, error.cause, error.tool_name, error.tool_call_id) == (
        "timeout", 0.05, "slow", "slow-1")
    assert runner.stats.timeouts == 1


def test_the_cancellation_token_is_set_at_the_deadline(runner: ToolRunner) -> None:
    seen: list[CallContext] = []

    def handler(arguments: Any, ctx: CallContext) -> Ok:
        seen.append(ctx)
        ctx.cancelled.wait()
        return Ok(None)

    given = CallContext(session_id="s")
    assert reason_of(runner.run(Tool(name="t", handler=handler, timeout=0.05), {}, given)) \
        == "timeout"
    assert seen[0].cancelled.is_set() and seen[0].session_id == "s"
    assert not given.cancelled.is_set()  # each call has its own token


@pytest.mark.parametrize("handler", [h.hangs_cooperatively, h.async_hangs_and_swallows],
                         ids=["thread", "asyncio"])
def test_a_late_result_is_discarded_and_logged(handler: Any) -> None:
    with capture_events() as events:
        with ToolRunner() as runner:
            delivered: list[HandlerResult] = []
            runner.run_batch([(Tool(name="t", handler=handler, timeout=0.05), {}, None)])
            delivered.append(runner.run(Tool(name="t", handler=h.ok_echo), {"x": 1}))
        stats = runner.stats
    late = [e for e in events if e["event"] == "late_result_discarded"]
    assert len(late) == 1 and late[0]["tool_name"] == "t"
    assert stats.late_results_discarded == 1 and stats.timeouts == 1
    assert delivered == [Ok({"x": 1})]


def test_a_timed_out_thread_is_abandoned_and_replaced() -> None:
    with capture_events() as events, ToolRunner() as runner:
        slow = Tool(name="slow", handler=h.hangs_cooperatively, timeout=0.05)
        fast = Tool(name="fast", handler=h.ok_echo)
        results = runner.run_batch([(slow, {}, None), (fast, {}, None)])
        assert reason_of(results[0]) == "timeout" and results[1] == Ok({})
        assert runner.stats.threads_abandoned == 1
    assert any(e["event"] == "call_abandoned" and e["tool_name"] == "slow" for e in events)


def test_on_done_is_called_exactly_once_on_a_runner_thread(runner: ToolRunner) -> None:
    calls: list[tuple[HandlerResult, str]] = []
    done = threading.Event()

    def on_done(result: HandlerResult) -> None:
        calls.append((result, threading.current_thread().name))
        done.set()

    runner.start(Tool(name="t", handler=h.hangs_cooperatively, timeout=0.05), {}, None, on_done)
    done.wait()
    runner.close()  # joins every runner thread: a second on_done would have happened by now
    assert len(calls) == 1
    assert calls[0][1] != threading.current_thread().name


@pytest.mark.parametrize("handler", [h.hangs_cooperatively, h.async_hangs],
                         ids=["thread", "asyncio"])
def test_cancel_delivers_a_cancelled_handler_exit_and_sets_the_token(
    runner: ToolRunner, handler: Any
) -> None:
    got: list[HandlerResult] = []
    done = threading.Event()
    handle = runner.start(Tool(name="t", handler=handler), {}, None,
                          lambda r: (got.append(r), done.set()))
    assert handle.cancel() is True
    done.wait()
    assert handle.cancel() is False and handle.done
    assert isinstance(got[0], Err)
    error = got[0].reason
    assert (error.reason, error.code, error.cause) == ("handler_exit", "cancelled", "cancelled")
    assert runner.stats.cancelled == 1


def test_a_hundred_calls_run_at_once(runner: ToolRunner) -> None:
    h.BARRIER.reset()
    barrier_tool = Tool(name="b", handler=h.waits_at_barrier)
    results = runner.run_batch([(barrier_tool, {}, None)] * 100)
    assert all(isinstance(r, Ok) for r in results)  # nobody's barrier wait broke
    assert len({r.value for r in results if isinstance(r, Ok)}) == 100


def test_batch_results_come_back_in_input_order(runner: ToolRunner) -> None:
    calls = [(Tool(name="t", handler=h.ok_echo), {"i": i}, None) for i in range(20)]
    assert runner.run_batch(calls) == [Ok({"i": i}) for i in range(20)]
    assert runner.run_batch([]) == []


def test_threads_are_reused() -> None:
    with ToolRunner() as runner:
        idents = {r.value for r in (runner.run(Tool(name="t", handler=h.thread_ident), {})
                                    for _ in range(20)) if isinstance(r, Ok)}
    assert len(idents) < 20


def test_idle_threads_retire() -> None:
    with ToolRunner(thread_idle_timeout=0.01) as runner:
        runner.run(Tool(name="t", handler=h.ok_echo), {})
        for thread in threading.enumerate():
            if thread.name.startswith("toolvisor-handler"):
                thread.join(5)
        assert runner.stats.threads_live == 0


def test_a_mixed_batch_gives_each_failure_its_reason_and_healthy_calls_ok(
    runner: ToolRunner,
) -> None:
    batch = [
        (Tool(name="ok1", handler=h.ok_echo), {"a": 1}, None),
        (Tool(name="raise", handler=h.raises), {}, None),
        (Tool(name="exit", handler=h.exits), {}, None),
        (Tool(name="hang", handler=h.hangs_cooperatively, timeout=0.1), {}, None),
        (Tool(name="garbage", handler=h.garbage), {}, None),
        (Tool(name="ok2", handler=h.async_ok), {"b": 2}, None),
    ]
    results = runner.run_batch(batch)
    assert results[0] == Ok({"a": 1}) and results[5] == Ok({"b": 2})
    assert [reason_of(r) for r in results[1:5]] == [
        "handler_raised", "handler_exit", "timeout", "invalid_return"]


def test_close_cancels_calls_still_running_after_the_grace() -> None:
    got: list[HandlerResult] = []
    runner = ToolRunner(tool_timeout=30.0)
    runner.start(Tool(name="t", handler=h.hangs_cooperatively), {}, None, got.append)
    runner.close(grace=0.0)
    assert len(got) == 1 and isinstance(got[0], Err) and got[0].reason.code == "cancelled"
    assert runner.stats.threads_hung == 0
    runner.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        runner.start(Tool(name="t", handler=h.ok_echo), {}, None, got.append)


def test_bad_settings_and_inputs_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="tool_timeout"):
        ToolRunner(tool_timeout=0)
    with pytest.raises(ValueError, match="max_threads"):
        ToolRunner(max_threads=0)
    with pytest.raises(ValueError, match="process_workers"):
        ToolRunner(process_workers=0)
    with ToolRunner() as runner:
        with pytest.raises(TypeError, match="needs a Tool"):
            runner.start("t", {}, None, print)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="on_done"):
            runner.start(Tool(name="t", handler=h.ok_echo), {}, None, None)  # type: ignore[arg-type]


def test_an_on_done_that_raises_is_logged_and_does_not_break_the_runner(
    runner: ToolRunner,
) -> None:
    def broken(result: HandlerResult) -> None:
        raise RuntimeError("listener bug")

    with capture_events() as events:
        runner.start(Tool(name="t", handler=h.ok_echo), {}, None, broken)
        assert runner.run(Tool(name="t", handler=h.ok_echo), {"after": 1}) == Ok({"after": 1})
        runner.close()
    assert any(e["event"] == "on_done_failed" for e in events)


# --- start_here: the handler on the caller's own thread -----------------------------------------


class GiveUps:
    """Records ``give_up`` calls and the thread each came from."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def __call__(self) -> None:
        self.threads.append(threading.current_thread().name)


def test_start_here_runs_the_handler_on_the_calling_thread(runner: ToolRunner) -> None:
    got: list[tuple[HandlerResult, str]] = []
    give_ups = GiveUps()
    handle = runner.start_here(Tool(name="t", handler=h.thread_ident), {}, None,
                               lambda r: got.append((r, threading.current_thread().name)),
                               give_ups)
    assert handle.runs_here and not handle.done
    handle.run_here()
    assert not handle.runs_here and handle.done
    assert got == [(Ok(threading.get_ident()), threading.current_thread().name)]
    handle.run_here()  # once only: nothing more happens
    assert len(got) == 1 and give_ups.threads == []
    assert runner.stats.calls_finished == 1


def test_start_here_at_the_deadline_the_timer_delivers_and_gives_the_thread_up() -> None:
    with capture_events() as events, ToolRunner() as runner:
        got: list[tuple[HandlerResult, str]] = []
        give_ups = GiveUps()
        handle = runner.start_here(
            Tool(name="slow", handler=h.hangs_cooperatively, timeout=0.05), {}, None,
            lambda r: got.append((r, threading.current_thread().name)), give_ups)
        handle.run_here()  # returns once the token set at the deadline lets the handler go
        stats = runner.stats
    [(result, delivered_on)] = got
    assert reason_of(result) == "timeout" and delivered_on == "toolvisor-deadlines"
    assert give_ups.threads == ["toolvisor-deadlines"]
    assert (stats.timeouts, stats.threads_abandoned, stats.late_results_discarded) == (1, 1, 1)
    assert any(e["event"] == "call_abandoned" and e["tool_name"] == "slow" for e in events)


def test_start_here_cancel_from_another_thread_gives_the_thread_up(runner: ToolRunner) -> None:
    got: list[HandlerResult] = []
    give_ups = GiveUps()
    running = threading.Event()

    def handler(arguments: Any, ctx: CallContext) -> Ok:
        running.set()
        ctx.cancelled.wait()
        return Ok("late")

    handle = runner.start_here(Tool(name="t", handler=handler), {}, None, got.append, give_ups)
    canceller = threading.Thread(target=lambda: (running.wait(), handle.cancel()),
                                 name="canceller")
    canceller.start()
    handle.run_here()
    canceller.join()
    assert len(got) == 1 and isinstance(got[0], Err) and got[0].reason.code == "cancelled"
    assert give_ups.threads in (["canceller"], [])  # [] if the handler returned first
    assert runner.stats.cancelled == 1


def test_start_here_cancelled_before_it_runs_never_runs_the_handler(runner: ToolRunner) -> None:
    ran: list[str] = []
    got: list[HandlerResult] = []
    give_ups = GiveUps()
    handle = runner.start_here(Tool(name="t", handler=lambda a: ran.append("ran")), {}, None,
                               got.append, give_ups)
    assert handle.cancel() is True
    handle.run_here()
    assert ran == [] and give_ups.threads == [] and len(got) == 1


@pytest.mark.parametrize("tool", [Tool(name="a", handler=h.async_ok), Tool(name="manual")],
                         ids=["asyncio", "no handler"])
def test_start_here_starts_other_calls_as_start_does(runner: ToolRunner, tool: Tool) -> None:
    got: list[HandlerResult] = []
    done = threading.Event()
    handle = runner.start_here(tool, {}, None, lambda r: (got.append(r), done.set()),
                               GiveUps())
    assert not handle.runs_here and not ToolRunner.runs_here(tool)
    handle.run_here()  # nothing to run here
    done.wait()
    assert len(got) == 1


def test_start_here_needs_a_callable_give_up(runner: ToolRunner) -> None:
    with pytest.raises(TypeError, match="give_up must be callable"):
        runner.start_here(Tool(name="t", handler=h.ok_echo), {}, None, print, None)  # type: ignore[arg-type]


def test_asyncio_calls_submitted_together_begin_on_one_wake_up_of_the_loop(
        runner: ToolRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls submitted while the runner's loop is busy are begun together: the loop is told
    once (one ``call_soon_threadsafe``), not once per call; each still gets its own result."""
    began, release = threading.Event(), threading.Event()
    loops: list[asyncio.AbstractEventLoop] = []

    async def hold_the_loop(arguments: Any) -> Ok:
        loops.append(asyncio.get_running_loop())
        began.set()
        release.wait(5)  # blocks the loop itself: nothing else begins meanwhile
        return Ok("held")

    async def echo(arguments: Any) -> Ok:
        return Ok(arguments["i"])

    results: queue.SimpleQueue[HandlerResult] = queue.SimpleQueue()
    runner.start(Tool(name="hold", handler=hold_the_loop), {}, None, results.put)
    assert began.wait(5)
    told: list[Any] = []
    tell = loops[0].call_soon_threadsafe

    def counted(*args: Any, **kwargs: Any) -> Any:
        told.append(args)
        return tell(*args, **kwargs)

    monkeypatch.setattr(loops[0], "call_soon_threadsafe", counted)
    for i in range(10):
        runner.start(Tool(name="echo", handler=echo), {"i": i}, None, results.put)
    release.set()
    got = [results.get(timeout=5) for _ in range(11)]
    assert len(told) == 1
    values = [r.value for r in got if isinstance(r, Ok)]
    assert sorted(v for v in values if v != "held") == list(range(10))
