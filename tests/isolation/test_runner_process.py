"""``ToolRunner`` under ``process`` isolation: real worker processes, real kills, real signals."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import handlers as h
from toolvisor import CallContext, Err, Ok, Tool, ToolCall, ToolError
from toolvisor.contract import HandlerResult, InvalidArguments
from toolvisor.executor import ToolRunner
from toolvisor.isolation import prepare_process_isolation
from toolvisor.testing import capture_events


@pytest.fixture(scope="module", autouse=True)
def _process_helpers() -> None:
    """The forkserver and resource tracker live for the whole session: start them before any
    test's leak snapshot."""
    prepare_process_isolation()


@pytest.fixture
def runner() -> Iterator[ToolRunner]:
    with ToolRunner(tool_timeout=5.0, process_workers=2) as r:
        yield r


def in_process(handler: Any, **options: Any) -> Tool:
    return Tool(name=options.pop("name", "p"), handler=handler, isolation="process", **options)


def error_of(result: HandlerResult) -> ToolError:
    assert isinstance(result, Err) and isinstance(result.reason, ToolError), result
    return result.reason


def test_results_and_context_cross_back(runner: ToolRunner) -> None:
    ctx = CallContext(tool_call=ToolCall(id="call-7", name="p"))
    assert runner.run(in_process(h.ok_echo), {"a": [1, 2]}) == Ok({"a": [1, 2]})
    assert runner.run(in_process(h.returns_err), {}) == Err({"code": 7})
    assert runner.run(in_process(h.call_id), {}, ctx) == Ok("call-7")
    assert runner.run(h.add_point, {"x": 2, "y": 3}) == Ok(5)  # a @tool, pydantic arguments


@pytest.mark.parametrize("kind", sorted(h.LEGAL_BY_KIND))
def test_legal_results_survive_the_trip(runner: ToolRunner, kind: str) -> None:
    assert runner.run(in_process(h.returns_legal), {"kind": kind}) == h.LEGAL_BY_KIND[kind]


def test_pending_cannot_come_from_a_worker_process(runner: ToolRunner) -> None:
    """Without a store a worker has no completion keys, so its Pending could never be resolved."""
    result = runner.run(in_process(h.returns_pending), {})
    assert isinstance(result, Err) and isinstance(result.reason, ToolError)
    assert result.reason.code == "pending_tool_missing_completion_key"


def test_a_raise_crosses_faithfully(runner: ToolRunner) -> None:
    error = error_of(runner.run(in_process(h.raises), {}))
    assert error.reason == "handler_raised"
    assert isinstance(error.cause, ValueError) and str(error.cause) == "boom"


def test_an_exception_that_cannot_cross_keeps_its_type_and_message(runner: ToolRunner) -> None:
    error = error_of(runner.run(in_process(h.raises_unpicklable), {}))
    assert error.reason == "handler_raised"
    assert error.cause == {"type": "NeedsTwoArguments", "message": "a/b"}


@pytest.mark.parametrize(("handler", "reason", "cause"), [
    (h.exits, "handler_exit", 3),
    (h.hard_exit, "handler_exit", 3),
    (h.killed_by_signal, "handler_exit", "SIGKILL"),
    (h.segfault, "handler_exit", "SIGSEGV"),
    (h.garbage, "invalid_return", {"not": "a result"}),
], ids=["sys.exit", "os._exit", "sigkill", "segfault", "garbage"])
def test_each_failure_has_its_reason_and_the_next_call_succeeds(
    runner: ToolRunner, handler: Any, reason: str, cause: Any
) -> None:
    error = error_of(runner.run(in_process(handler), {}))
    assert (error.reason, error.cause) == (reason, cause)
    assert runner.run(in_process(h.ok_echo), {"next": True}) == Ok({"next": True})


def test_a_worker_death_is_counted_and_the_worker_replaced(runner: ToolRunner) -> None:
    runner.run(in_process(h.hard_exit), {})
    runner.close()  # the manager replaced the worker right after settling the call
    stats = runner.stats
    assert (stats.workers_died, stats.workers_replaced, stats.workers_started) == (1, 1, 3)


def test_an_unpicklable_result_is_encoding_failed(runner: ToolRunner) -> None:
    error = error_of(runner.run(in_process(h.unencodable), {}))
    assert error.reason == "encoding_failed" and "pickle" in error.message


def test_a_handler_not_importable_by_name_is_not_found(runner: ToolRunner) -> None:
    error = error_of(runner.run(in_process(h.not_importable), {}))
    assert error.reason == "not_found" and "module-level" in error.message


def test_arguments_are_validated_before_a_worker_is_involved(runner: ToolRunner) -> None:
    result = runner.run(h.add_point, {"x": "two"})
    assert isinstance(result, Err) and isinstance(result.reason, InvalidArguments)
    assert runner.stats.workers_started == 0


def test_unpicklable_arguments_are_encoding_failed(runner: ToolRunner) -> None:
    error = error_of(runner.run(in_process(h.ok_echo), {"lock": threading.Lock()}))
    assert error.reason == "encoding_failed"


def test_a_hung_sync_handler_is_killed_and_the_next_call_succeeds(runner: ToolRunner) -> None:
    with capture_events() as events:
        error = error_of(runner.run(in_process(h.hangs_forever, timeout=0.1), {}))
        assert (error.reason, error.cause) == ("timeout", 0.1)
        first = runner.run(in_process(h.pid), {})
        second = runner.run(in_process(h.pid), {})
        runner.close()
    assert isinstance(first, Ok) and isinstance(second, Ok)
    stats = runner.stats
    assert (stats.workers_killed, stats.workers_replaced, stats.timeouts) == (1, 1, 1)
    assert any(e["event"] == "worker_killed" and e["tool_name"] == "p" for e in events)


def test_cancel_kills_the_worker(runner: ToolRunner) -> None:
    got: list[HandlerResult] = []
    done = threading.Event()
    started = runner.run(in_process(h.pid), {})  # both workers are up
    handle = runner.start(in_process(h.hangs_forever), {}, None,
                          lambda r: (got.append(r), done.set()))
    assert handle.cancel()
    done.wait()
    assert error_of(got[0]).code == "cancelled"
    assert isinstance(started, Ok)
    assert runner.run(in_process(h.ok_echo), {}) == Ok({})


def test_calls_beyond_the_pool_size_wait_for_a_worker() -> None:
    with ToolRunner(process_workers=1) as runner:
        results = runner.run_batch([(in_process(h.ok_echo), {"i": i}, None) for i in range(5)])
    assert results == [Ok({"i": i}) for i in range(5)]


def test_a_mixed_batch_gives_each_failure_its_reason_and_healthy_calls_ok() -> None:
    batch = [
        (in_process(h.ok_echo, name="ok1"), {"a": 1}, None),
        (in_process(h.raises, name="raise"), {}, None),
        (in_process(h.hard_exit, name="exit"), {}, None),
        (in_process(h.hangs_forever, name="hang", timeout=0.2), {}, None),
        (in_process(h.garbage, name="garbage"), {}, None),
        (in_process(h.ok_echo, name="ok2"), {"b": 2}, None),
    ]
    with ToolRunner(process_workers=3) as runner:
        results = runner.run_batch(batch)
    assert results[0] == Ok({"a": 1}) and results[5] == Ok({"b": 2})
    assert [error_of(r).reason for r in results[1:5]] == [
        "handler_raised", "handler_exit", "timeout", "invalid_return"]
    assert [error_of(r).tool_name for r in results[1:5]] == ["raise", "exit", "hang", "garbage"]


def test_close_kills_a_busy_worker_and_cancels_its_call() -> None:
    got: list[HandlerResult] = []
    runner = ToolRunner(process_workers=1)
    runner.start(in_process(h.hangs_forever), {}, None, got.append)
    runner.close(grace=0.0)
    assert len(got) == 1 and error_of(got[0]).code == "cancelled"
    assert runner.stats.workers_alive == 0


def test_start_here_sends_a_process_call_to_a_worker(runner: ToolRunner) -> None:
    got: list[HandlerResult] = []
    done = threading.Event()
    give_ups: list[str] = []
    handle = runner.start_here(in_process(h.pid), {}, None, lambda r: (got.append(r), done.set()),
                               lambda: give_ups.append("given up"))
    assert not handle.runs_here
    handle.run_here()
    done.wait()
    assert isinstance(got[0], Ok) and got[0].value != os.getpid() and give_ups == []


def test_workers_that_cannot_start_trip_the_pools_restart_intensity() -> None:
    """A program run from stdin has a __main__ its workers cannot import: every worker dies
    before it is ready. The pool gives up after its intensity instead of restarting forever."""
    script = (
        "from toolvisor import Tool\n"
        "from toolvisor.executor import ToolRunner\n"
        "from tests.support.handlers import ok_echo\n"
        "tool = Tool(name='t', handler=ok_echo, isolation='process')\n"
        "with ToolRunner(tool_timeout=30) as runner:\n"
        "    first, second = runner.run(tool, {}), runner.run(tool, {})\n"
        "    print(first.reason.code, second.reason.code, runner.stats.workers_died,\n"
        "          'with -m' in first.reason.message)\n"
    )
    done = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True,
                          timeout=60, check=False, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    first, second, died, explained = done.stdout.split()
    assert (first, second, explained) == ("worker_pool_failed", "worker_pool_failed", "True")
    assert int(died) > 5
