"""Finished calls reach the orchestrator in groups: one message per non-empty stretch."""

from __future__ import annotations

from toolvisor import Ok
from toolvisor.call import OutputProjection
from toolvisor.host.calls import CallDone, FinishedCalls
from toolvisor.machine import CallOutcome


def done(call_id: str) -> CallDone:
    return CallDone("run", CallOutcome(call_id, Ok(1), "1"), None)


def test_only_the_add_that_finds_the_buffer_empty_asks_for_a_message() -> None:
    finished = FinishedCalls(OutputProjection())
    assert [finished.add(done(c)) for c in "abc"] == [True, False, False]
    assert [d.outcome.call_id for d in finished.drain()] == ["a", "b", "c"]
    assert finished.drain() == []
    assert finished.add(done("d")) is True
