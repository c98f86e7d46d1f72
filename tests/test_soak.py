"""A short fault-injection soak in every execution mode, over every isolation, and checks that
the soak's own checker catches what it must (so a passing soak means something)."""

from __future__ import annotations

import json

import pytest

from bench._soak_handlers import HANDLERS, ISOLATIONS, reported_text
from bench.soak import EXPECTED, MODES, PlannedCall, SoakConfig, check_result, run_soak
from toolvisor import ToolError
from toolvisor.contract import ToolResultMessage
from toolvisor.machine import Mode


@pytest.mark.parametrize("mode", MODES)
def test_a_short_soak_accounts_for_every_call(mode: Mode) -> None:
    report = run_soak(SoakConfig(calls=150, seed=7, modes=(mode,), max_seconds=120))

    assert report.problems == [] and report.problem_count == 0
    assert report.leaks == []
    assert report.calls >= 150
    for isolation in ISOLATIONS:  # the first batch asks for every isolation x behaviour
        behaviours = [*HANDLERS[isolation], "invalid_args", "unknown"]
        assert all(report.by_isolation[(isolation, EXPECTED[b])] for b in behaviours)
    stats = report.runner_stats[mode]
    assert stats.timeouts >= len(ISOLATIONS)  # each isolation hung at least once
    assert stats.workers_killed >= 1 and stats.workers_died >= 1
    assert stats.threads_hung == 0
    assert report.tool_call_children[mode]["active"] == 0


def _message(content: str, *, is_error: bool) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id="c1", name="t", content=content, is_error=is_error)


def test_the_checker_refuses_a_result_routed_to_the_wrong_call() -> None:
    planned = PlannedCall("c1", "thread", "ok")
    assert check_result(planned, _message("c1", is_error=False), 4096) is None
    assert check_result(planned, _message("c2", is_error=False), 4096) is not None


def test_the_checker_refuses_an_unbounded_huge_output() -> None:
    planned = PlannedCall("c1", "process", "huge")
    bounded = "c1xxx\n...1000000 bytes truncated..."
    assert check_result(planned, _message(bounded, is_error=False), 4096) is None
    assert check_result(planned, _message("c1" + "x" * 5000, is_error=False), 4096) is not None


def test_the_checker_refuses_the_wrong_reason_and_a_rewrapped_report() -> None:
    hang = PlannedCall("c1", "asyncio", "hang")
    timeout = ToolError("timeout").for_model()
    assert check_result(hang, _message(f'{{"error": {json.dumps(timeout)}}}', is_error=True),
                        4096) is None
    raised = ToolError("handler_raised").for_model()
    assert check_result(hang, _message(f'{{"error": {json.dumps(raised)}}}', is_error=True),
                        4096) is not None
    report = PlannedCall("c1", "thread", "reported")
    assert check_result(report, _message(f'{{"error": "{reported_text("c1")}"}}',
                                         is_error=True), 4096) is None
    assert check_result(report, _message(f'{{"error": {json.dumps(raised)}}}', is_error=True),
                        4096) is not None
