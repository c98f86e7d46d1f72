"""A short fault-injection soak in every execution mode, over every isolation, with model
failures; a short crash phase (hosts SIGKILLed mid-batch, runs resumed by a fresh process); and
checks that the soak's own checkers catch what they must (so a passing soak means something)."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from bench._crash_host import FINAL_TEXT, KINDS, CrashCall, CrashRun, ok_text
from bench._crash_phase import CrashReport, tally_run
from bench._soak_handlers import HANDLERS, ISOLATIONS, reported_text
from bench.soak import (
    EXPECTED,
    MODEL_FAULTS,
    MODES,
    Ledger,
    PlannedCall,
    SoakConfig,
    SoakModel,
    check_result,
    run_soak,
)
from toolvisor import ModelError, ToolError
from toolvisor.contract import ModelRequest, ToolResultMessage, UserMessage
from toolvisor.machine import Mode


@pytest.mark.parametrize("mode", MODES)
def test_a_short_soak_accounts_for_every_call(mode: Mode) -> None:
    report = run_soak(SoakConfig(calls=150, seed=7, modes=(mode,), max_seconds=120, crashes=0))

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
    faults = [r for r in MODEL_FAULTS if r is not None]  # each agent's first calls fail
    assert all(report.model_faults[r] >= 1 for r in faults)
    assert all(report.model_recovered[r] == report.model_faults[r] for r in faults
               if r != "rejected")
    assert report.rejected_runs == report.model_faults["rejected"]


def test_a_short_crash_phase_loses_no_call_and_runs_no_side_effect_twice() -> None:
    report = run_soak(SoakConfig(calls=40, seed=7, modes=("parallel_batch_approval",),
                                 max_seconds=120, crashes=3))

    assert report.problems == [] and report.problem_count == 0
    assert report.leaks == []
    crash = report.crash
    assert crash is not None and crash.crashes == 3 and crash.runs >= 3
    assert (crash.lost, crash.twice) == (0, 0)
    assert all(crash.fates[f] for f in ("finish", "stuck", "later"))  # every mode once
    assert crash.interrupted >= 1 and crash.rerun >= 1
    assert all(crash.calls_by_kind[k] for k in KINDS)
    assert "crash phase: 3 hosts SIGKILLed mid-batch" in report.summary()


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


def test_the_crash_checker_counts_a_lost_call_and_side_effects_run_twice() -> None:
    run = CrashRun(name="r", calls=(CrashCall(id="a", kind="plain", fate="stuck"),
                                    CrashCall(id="b", kind="journaled", fate="finish")))
    at_kill = {"a": Counter({"exec": 1}), "b": Counter({"exec": 1, "step-1": 1, "step-2": 1})}
    interrupted = json.dumps({"error": ToolError("handler_exit",
                                                 code="interrupted").for_model()})
    outcome = {"kind": "completed", "text": FINAL_TEXT,
               "results": [["a", True, interrupted], ["b", False, ok_text("b")]]}
    clean = CrashReport()
    tally_run(run, at_kill, at_kill, outcome, clean)
    assert clean.problems == [] and (clean.interrupted, clean.twice, clean.lost) == (1, 0, 0)

    twice = {"a": Counter({"exec": 2}), "b": Counter({"exec": 1, "step-1": 2, "step-2": 1})}
    broken = CrashReport()
    tally_run(run, at_kill, twice, {**outcome, "results": [["a", True, interrupted]]}, broken)
    assert (broken.lost, broken.twice, broken.rerun) == (1, 2, 1)
    assert len(broken.problems) == 3  # b lost; a ran twice; b's first step ran twice


def test_the_model_checker_refuses_an_injected_failure_that_was_never_retried() -> None:
    ledger = Ledger()
    model = SoakModel("sequential", random.Random(1), SoakConfig(), ledger)
    model.start_run(10)
    with pytest.raises(ModelError) as raised:  # each agent's first model call is rate limited
        model.respond(ModelRequest(messages=(UserMessage(content="hi"),)))
    assert raised.value.reason == "rate_limited"
    assert raised.value.retry_after is not None and 0.001 <= raised.value.retry_after <= 0.01

    model.finish_run(None)
    assert ledger.model_faults == Counter({"rate_limited": 1}) and not ledger.model_recovered
    assert ledger.problem_count == 1 and "not followed by a retry" in ledger.problems[0]
