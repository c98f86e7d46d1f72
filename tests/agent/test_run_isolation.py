"""One run's bad input or failing callback ends that run alone, never the host or its other runs."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.support.runs import nested
from toolvisor import Agent, Completed, Failed, Halted, Ok, Tracing, function_tool, tool
from toolvisor.contract import ModelRequest, UserMessage
from toolvisor.machine import CallAttempt
from toolvisor.testing import FunctionModel, call, calls, capture_events


@tool(input_schema={"type": "object"})  # any arguments: the hostile run's reach the host whole
def noop(arguments: dict[str, Any]) -> Ok:
    """Does nothing."""
    return Ok("ok")


def test_arguments_nested_too_deep_fail_their_run_alone() -> None:
    """A neighbour blocked in its model call while the hostile run crashes still completes."""
    neighbour_in_model = threading.Event()
    hostile_done = threading.Event()

    def model(request: ModelRequest) -> Any:
        first = request.messages[0]
        assert isinstance(first, UserMessage)
        if first.content == "neighbour" and len(request.messages) == 1:
            neighbour_in_model.set()
            assert hostile_done.wait(10)
            return calls(call("noop"))
        if first.content == "hostile":
            return calls(call("noop", nested(300)))
        return "done"

    with capture_events() as events, Agent(FunctionModel(model), [noop]) as agent:
        results: dict[str, Any] = {}
        neighbour = threading.Thread(target=lambda: results.update(n=agent.run("neighbour")))
        neighbour.start()
        assert neighbour_in_model.wait(10)
        hostile = agent.run("hostile")
        hostile_done.set()
        neighbour.join()
        after = agent.run("after")  # the host still serves new runs
    assert isinstance(hostile, Failed)
    assert "depth" in hostile.error and "other runs were not affected" in hostile.error
    assert isinstance(results["n"], Completed) and isinstance(after, Completed)
    crashed = [e for e in events if e["event"] == "run_crashed"]
    assert len(crashed) == 1 and "Traceback" in crashed[0]["traceback"]


def test_a_progress_callback_that_raises_is_logged_and_ignored_and_said_once_on_stderr(
        capsys: pytest.CaptureFixture[str]) -> None:
    def on_progress(run_id: str, event: str, data: dict[str, Any]) -> None:
        raise RuntimeError("dashboard down")

    model = FunctionModel(lambda r: "done" if len(r.messages) > 1 else calls(call("noop")))
    with capture_events() as events, Agent(model, [noop],
                                           tracing=Tracing(on_progress=on_progress)) as agent:
        first, second = agent.run("a"), agent.run("b")
    assert isinstance(first, Completed) and isinstance(second, Completed)
    failed = [e for e in events if e["event"] == "progress_callback_failed"]
    assert len(failed) > 2 and "dashboard down" in failed[0]["error"] and "Traceback" in failed[0][
        "traceback"]
    said = capsys.readouterr().err.splitlines()
    assert said == [f"toolvisor: the on_progress callback raised on 'turn_started' of run "
                    f"{first.run_id} (RuntimeError: dashboard down); its failures are ignored "
                    "(the runs go on) and logged as progress_callback_failed"]


def test_a_policy_function_that_raises_halts_its_run_alone() -> None:
    @function_tool
    def crash() -> str:
        """Crashes."""
        raise RuntimeError("boom")

    def policy(failed: CallAttempt, error: Any) -> Any:
        raise ValueError("policy bug")

    def model(request: ModelRequest) -> Any:
        first = request.messages[0]
        assert isinstance(first, UserMessage)
        if len(request.messages) > 1:
            return "done"
        return calls(call("crash" if first.content == "bad" else "noop"))

    with Agent(FunctionModel(model), [noop, crash], on_tool_error=policy) as agent:
        bad, good = agent.run("bad"), agent.run("good")
    assert isinstance(bad, Halted) and bad.reason == "invalid_return"
    assert isinstance(good, Completed)


def test_a_huge_error_is_capped_in_a_halted_runs_stored_outcome_too() -> None:
    @function_tool
    def loud() -> str:
        """Fails loudly."""
        raise RuntimeError("x" * 1_000_000)

    model = FunctionModel(lambda r: "done" if len(r.messages) > 1 else calls(call("loud")))
    with Agent(model, [loud], on_tool_error="halt") as agent:
        outcome = agent.run("go")
    assert isinstance(outcome, Halted) and outcome.reason == "tool_error"
    assert len(outcome.model_dump_json()) < 200_000
    assert "bytes truncated" in outcome.result["error"]["detail"]
