"""Manual tools: declared without a handler, run by the caller; the run suspends on their calls.

The executor still answers ``not_found`` for a handler-less tool; the machine hands a manual
tool's calls to the caller (arguments checked against the schema first), and the caller's
results go through ``on_tool_error`` like any other.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.programs.manual_host import BATCH, SCRIPT, TOOLS, pick_file
from toolvisor import Agent, Completed, Err, Halted, InvalidArguments, Ok, Suspended, Tool
from toolvisor.call import execute
from toolvisor.contract import ToolResultMessage
from toolvisor.machine import CallAttempt, Decision, HaltRun, MachineConfig, ManualCall
from toolvisor.testing import ScriptedModel, call, calls, drive

ROOT = Path(__file__).resolve().parents[2]


def results(messages: tuple[object, ...]) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}


def test_a_manual_tool_takes_no_handler_and_the_executor_answers_not_found() -> None:
    with pytest.raises(ValueError, match="manual=True"):
        Tool(name="pick", handler=Ok, manual=True)
    with pytest.raises(TypeError, match="manual must be a bool"):
        Tool(name="pick", manual="yes")  # type: ignore[arg-type]
    result = execute(pick_file, {"path": "x"})
    assert isinstance(result, Err) and result.reason.reason == "not_found"


def test_a_batch_runs_its_handled_calls_and_suspends_on_the_manual_one() -> None:
    config = MachineConfig(tools=TOOLS)
    suspended = drive(config, "go", model=[BATCH]).outcome
    assert isinstance(suspended, Suspended)
    assert suspended.manual == (ManualCall(call_id="manual-1", tool="pick_file",
                                           arguments={"path": "~/report.pdf"}),)
    assert suspended.questions == () and suspended.call_ids == ("manual-1",)
    done = drive(config, "go", model=[BATCH, "read it"], roundtrip=True,
                 answers={"manual-1": {"bytes": 1234}}).outcome
    assert isinstance(done, Completed) and done.text == "read it"
    by_id = results(done.messages)
    assert by_id["handled-1"].content == "3" and not by_id["handled-1"].is_error
    assert by_id["manual-1"].content == '{"bytes":1234}' and not by_id["manual-1"].is_error


@pytest.mark.parametrize("mode", ["sequential", "parallel_batch_approval", "parallel_streaming"])
def test_every_mode_runs_the_handled_calls_before_suspending(mode: str) -> None:
    outcome = drive(MachineConfig(tools=TOOLS, mode=mode), "go", model=[BATCH]).outcome  # type: ignore[arg-type]
    assert isinstance(outcome, Suspended) and [m.call_id for m in outcome.manual] == ["manual-1"]
    state = outcome.checkpoint.run
    assert {r.call.id: r.status for r in state.calls} == {"manual-1": "suspended",
                                                          "handled-1": "done"}


def test_arguments_that_fail_the_schema_never_reach_the_caller() -> None:
    bad = calls(call("pick_file", {"path": 7, "extra": True}, id="m"))
    result = drive(MachineConfig(tools=[pick_file]), "go", model=[bad, "sorry"])
    assert isinstance(result.outcome, Completed)
    message = results(result.outcome.messages)["m"]
    assert message.is_error and "$.path" in message.content and "extra" in message.content


def test_invalid_arguments_and_reported_errors_go_through_the_policy() -> None:
    seen: list[object] = []

    def policy(failed: CallAttempt, error: object) -> Decision:
        seen.append(error)
        return HaltRun()

    config = MachineConfig(tools=[pick_file], on_tool_error=policy)
    bad = calls(call("pick_file", {}, id="m"))
    halted = drive(config, "go", model=[bad]).outcome
    assert isinstance(halted, Halted) and halted.reason == "tool_error"
    assert isinstance(seen[0], InvalidArguments)
    good = calls(call("pick_file", {"path": "a"}, id="m"))
    halted = drive(config, "go", model=[good], answers={"m": Err("the user closed the dialog")}
                   ).outcome
    assert isinstance(halted, Halted) and seen[1] == "the user closed the dialog"


def test_the_agent_refuses_answers_that_do_not_fit_the_manual_calls() -> None:
    both = calls(call("pick_file", {"path": "a"}, id="m1"), call("pick_file", {"path": "b"},
                                                                  id="m2"))
    with Agent(ScriptedModel([both, "ok"]), [pick_file]) as agent:
        suspended = agent.run("go")
        assert isinstance(suspended, Suspended) and suspended.call_ids == ("m1", "m2")
        with pytest.raises(ValueError, match="m2"):
            agent.resume(suspended, {"m1": "a"})
        outcome = agent.resume(suspended, {"m1": Ok("A"), "m2": "B"})
    assert isinstance(outcome, Completed)
    assert results(outcome.messages)["m1"].content == "A"


def test_a_mixed_batch_is_resumed_in_a_new_process_from_the_store(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    first = subprocess.run([sys.executable, "-m", "tests.programs.manual_host", str(store)],
                           cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    suspended = Suspended.model_validate_json(first.stdout)
    assert suspended.run_id is not None
    assert [(m.call_id, m.arguments) for m in suspended.manual] == [
        ("manual-1", {"path": "~/report.pdf"})]
    with ScriptedModel(SCRIPT) as model, Agent(model, TOOLS, store=store) as agent:
        outcome = agent.resume(suspended, {"manual-1": Ok({"pages": 3})})
    assert isinstance(outcome, Completed) and outcome.text == "summarised"
    by_id = results(outcome.messages)
    assert by_id["handled-1"].content == "3"
    assert by_id["manual-1"].content == '{"pages":3}'
