"""A retried tool call, end to end: it waits its own backoff, never a sibling, and a durable run
restored in a new agent waits only what is left of it. Events and barriers, never sleeps."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.events import Events
from toolvisor import Agent, CallContext, Completed, Ok, OrchestratorStopped, Tool
from toolvisor.contract import ModelRequest, ToolResultMessage
from toolvisor.durable import SqliteRunStore
from toolvisor.machine import RetryPolicy
from toolvisor.testing import FakeClock, ScriptedModel, call, calls

QUICK = RetryPolicy(base_delay=0.05, jitter=0)
SCRIPT = [calls(call("slow", id="s"), call("flaky", id="f")), "done"]


def tool_texts(request: ModelRequest) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in request.messages
            if isinstance(m, ToolResultMessage)}


class Journal:
    """What the handlers did, in order, from whichever threads they ran on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: list[str] = []

    def note(self, entry: str) -> None:
        with self._lock:
            self.entries.append(entry)


@pytest.mark.parametrize("mode", ["parallel_batch_approval", "parallel_streaming"])
def test_a_retry_runs_again_before_its_slow_sibling_finishes(mode: Any) -> None:
    journal = Journal()
    second_attempt = threading.Event()
    release = threading.Event()

    def slow(arguments: dict[str, Any]) -> Ok:
        release.wait(10)  # the test lets it finish
        journal.note("slow finished")
        return Ok("slow")

    def flaky(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        journal.note(f"flaky attempt {ctx.attempt}")
        if ctx.attempt == 1:
            raise ConnectionError("blip")
        second_attempt.set()
        return Ok("flaky")

    tools = [Tool(name="slow", handler=slow), Tool(name="flaky", handler=flaky, retryable=True)]
    outcomes: list[Any] = []
    with ScriptedModel(SCRIPT) as model, Agent(model, tools, mode=mode,
                                               on_tool_error=QUICK) as agent:
        runner = threading.Thread(target=lambda: outcomes.append(agent.run("go")))
        runner.start()
        try:
            assert second_attempt.wait(10), "the retry waited for its slow sibling"
        finally:
            release.set()
            runner.join()
    assert journal.entries == ["flaky attempt 1", "flaky attempt 2", "slow finished"]
    assert isinstance(outcomes[0], Completed)
    assert tool_texts(model.requests[1]) == {"s": "slow", "f": "flaky"}  # both, in call order


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[SqliteRunStore]:
    with SqliteRunStore(tmp_path / "runs.sqlite", clock=clock,
                            poll_interval=0.01) as opened:
        yield opened


def test_a_restored_retry_waits_only_what_is_left_and_no_call_runs_twice(
        store: SqliteRunStore, clock: FakeClock, events: Events) -> None:
    journal = Journal()

    def slow(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        journal.note("slow")
        ctx.cancelled.wait(10)  # until its agent closes
        return Ok("slow")

    def flaky(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        journal.note(f"flaky attempt {ctx.attempt}")
        if ctx.attempt == 1:
            raise ConnectionError("blip")
        return Ok("flaky")

    tools = [Tool(name="slow", handler=slow), Tool(name="flaky", handler=flaky, retryable=True)]

    def agent() -> Agent:
        return Agent(ScriptedModel(SCRIPT), tools, store=store,
                     on_tool_error=RetryPolicy(base_delay=60, max_delay=60, jitter=0))

    def closed_while_backing_off(start: Any, seconds_left: float) -> None:
        """Run ``start`` on a new agent until its retry waits ``seconds_left``, then close it."""
        host = agent()
        raised: list[BaseException] = []

        def run() -> None:
            try:
                start(host)
            except BaseException as exc:
                raised.append(exc)

        runner = threading.Thread(target=run)
        runner.start()
        events.wait_for("retry_waiting", tool_call_id="f", attempt=2, seconds=seconds_left)
        host.close()
        runner.join()
        assert [type(e) for e in raised] == [OrchestratorStopped]

    closed_while_backing_off(lambda host: host.run("go"), 60.0)
    [run] = store.runs()
    clock.advance(25)  # the retry's backoff counts from its failure, on the store's clock
    closed_while_backing_off(lambda host: host.resume_run(run.run_id), 35.0)
    clock.advance(40)
    with agent() as last:
        outcome = last.resume_run(run.run_id, wait_for=10)  # its backoff is over: no wait
    assert isinstance(outcome, Completed) and outcome.text == "done"
    events.wait_for("retry_waiting", tool_call_id="f", attempt=2, seconds=0.0)
    assert sorted(journal.entries) == ["flaky attempt 1", "flaky attempt 2", "slow"]  # once each
    assert journal.entries.index("flaky attempt 1") < journal.entries.index("flaky attempt 2")
    texts = {m.tool_call_id: m.content for m in outcome.messages
             if isinstance(m, ToolResultMessage)}
    assert texts["f"] == "flaky" and "interrupted" in texts["s"]  # at most once
