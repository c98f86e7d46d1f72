"""Every outcome reads the same way: ``run_id``, ``status``, ``usage``, ``messages``, ``turns``,
``state`` and ``text``. The text of a run that did not complete raises
``RunNotCompletedError``, which says which run, how it stands and why, and carries the outcome.
Real agents, a real provider adapter against the local provider server, a real store."""

from __future__ import annotations

import json
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.provider_server import ProviderServer
from tests.support.provider_wire import ChatWire
from toolvisor import (
    Agent,
    AlreadyResumedError,
    AskUser,
    CallContext,
    Completed,
    Err,
    Failed,
    Halt,
    Halted,
    Limits,
    ModelError,
    Ok,
    Pending,
    RunNotCompletedError,
    Suspended,
    ToolvisorError,
    Tracing,
    function_tool,
)
from toolvisor.contract import Usage
from toolvisor.machine import CHECKPOINT_VERSION, Checkpoint, Done, MachineConfig, TurnMachine
from toolvisor.testing import FunctionModel, ScriptedModel, call, calls, drive


class RunIds:
    """The run ids ``on_progress`` saw, as the host tells them."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, run_id: str, event: str, data: dict[str, Any]) -> None:
        if run_id not in self.seen:
            self.seen.append(run_id)


def not_completed(outcome: Any) -> RunNotCompletedError:
    with pytest.raises(RunNotCompletedError) as caught:
        outcome.text
    assert caught.value.outcome is outcome
    return caught.value


@function_tool
def ask() -> AskUser:
    """Asks which city."""
    return AskUser("Which city?")


@function_tool
def crash() -> Ok:
    """Crashes."""
    raise ConnectionError("backend down")


@function_tool
def stop() -> Halt:
    """Halts the run with what it spent."""
    return Halt("budget_spent", {"spent": 3})


@function_tool
def refuse() -> Err:
    """Reports a failure."""
    return Err("card declined")


@function_tool
def hook(ctx: CallContext) -> Pending:
    """Waits on a completion key."""
    ctx.completion_key()
    return Pending(deadline=600)


def test_reading_text_of_a_run_refused_by_its_provider_says_why(
        provider: ProviderServer) -> None:
    """The quick start with a wrong API key: the real adapter, the provider's 401."""
    wire = ChatWire()
    provider.script(wire.error(401, "Incorrect API key provided: sk-wrong"))
    ids = RunIds()
    with Agent(wire.model(provider.url), tracing=Tracing(on_progress=ids)) as agent:
        outcome = agent.run("Say hello")
    assert isinstance(outcome, Failed) and outcome.status == "failed"
    assert outcome.run_id == ids.seen[0]
    error = not_completed(outcome)
    assert str(error) == (f"run {outcome.run_id} failed, so it has no text: the model call "
                          "failed (rejected) after 1 attempt: HTTP 401: Incorrect API key "
                          "provided: sk-wrong")
    assert isinstance(error, ToolvisorError) and isinstance(error, RuntimeError)
    assert not isinstance(error, AttributeError)  # hasattr/getattr(..., default) do not hide it


def test_a_completed_run_reads_as_every_outcome_does() -> None:
    ids = RunIds()
    model = ScriptedModel([calls(call("ask", id="c1")), "Oslo it is."])
    with Agent(model, [ask], tracing=Tracing(on_progress=ids)) as agent:
        waiting = agent.run("Where?", state={"n": 1})
        done = agent.resume(waiting, "Oslo")
    assert isinstance(waiting, Suspended) and isinstance(done, Completed)
    assert waiting.run_id == done.run_id == ids.seen[0]  # resumed under its id, store or not
    assert ids.seen == [waiting.run_id]
    assert (done.status, done.text, done.turns, done.state) == ("completed", "Oslo it is.", 2,
                                                                {"n": 1})
    assert (waiting.status, waiting.turns, waiting.state) == ("suspended", 1, {"n": 1})
    assert waiting.messages == done.messages[:len(waiting.messages)]
    assert isinstance(waiting.usage, Usage) and isinstance(done.usage, Usage)
    waiting.state["n"] = 2  # a copy: the signed checkpoint does not change
    assert waiting.state == {"n": 1}


def test_the_text_of_a_suspended_run_says_what_it_waits_for() -> None:
    with Agent(ScriptedModel([calls(call("ask", id="c1"))]), [ask]) as agent:
        waiting = agent.run("Where?")
    assert str(not_completed(waiting)) == (
        f"run {waiting.run_id} is suspended, so it has no text yet: it waits for an answer to "
        "call c1 (ask: 'Which city?'); agent.resume(outcome, answer) continues it")


def test_the_text_of_a_run_waiting_on_a_key_says_how_to_deliver_it(tmp_path: Path) -> None:
    model = ScriptedModel([calls(call("hook", id="c_hook")), "done"])
    with Agent(model, [hook], store=tmp_path / "runs.sqlite") as agent:
        waiting = agent.run("go")
        assert agent.store is not None
        assert [r.run_id for r in agent.store.runs()] == [waiting.run_id]
        message = str(not_completed(waiting))
        (key,) = waiting.keys.values()
        agent.resolve(key, ok="pong")
        done = agent.resume_run(waiting.run_id)
    assert message == (
        f"run {waiting.run_id} is suspended, so it has no text yet: it waits for the completion "
        "key of call c_hook (hook); agent.resolve(key, ok=...) delivers a key's result and "
        "agent.resume_run(run_id) waits for the run")
    assert (done.run_id, done.text) == (waiting.run_id, "done")


@pytest.mark.parametrize(("policy", "script", "expected"), [
    ("halt", [calls(call("crash", id="c1"))],
     "halted (tool_error) after 1 turn, so it has no text: tool error (crash): handler_raised: "
     "ConnectionError: backend down (call c1)"),
    ("halt", [calls(call("refuse", id="c2"))],
     'halted (tool_error) after 1 turn, so it has no text: its result is {"tool_call_id": '
     '"c2", "tool": "refuse", "error": "card declined"}'),
    ("continue", [calls(call("stop", id="c3"))],
     'halted (budget_spent) after 1 turn, so it has no text: its result is {"spent": 3}'),
    ("continue", [calls(call("refuse", id=f"c{i}")) for i in range(2)],
     "halted (max_turns) after 2 turns, so it has no text: the model still asked for tools at "
     "its last turn (raise Agent(limits=Limits(turns=...))?)"),
], ids=["crash", "reported", "handler_halt", "max_turns"])
def test_the_text_of_a_halted_run_says_why_it_halted(policy: str, script: list[Any],
                                                     expected: str) -> None:
    with Agent(ScriptedModel(script), [crash, refuse, stop], on_tool_error=policy,
               limits=Limits(turns=2)) as agent:
        halted = agent.run("go")
    assert isinstance(halted, Halted) and halted.status == "halted"
    assert str(not_completed(halted)) == f"run {halted.run_id} {expected}"


def test_a_long_halt_result_is_cut_in_the_message() -> None:
    @function_tool
    def verbose() -> Halt:
        """Halts with a long result."""
        return Halt("too_much", "x" * 1000)

    with Agent(ScriptedModel([calls(call("verbose"))]), [verbose]) as agent:
        halted = agent.run("go")
    message = str(not_completed(halted))
    assert message.endswith('"' + "x" * 299 + "... (702 more characters)")
    assert halted.result == "x" * 1000  # the outcome keeps it whole


def test_a_cancelled_run_has_status_cancelled_and_says_so(tmp_path: Path) -> None:
    started, release = threading.Event(), threading.Event()

    @function_tool
    def slow() -> Ok:
        """Waits until released."""
        started.set()
        release.wait(10)
        return Ok("late")

    outcomes: list[Any] = []
    with Agent(ScriptedModel([calls(call("slow"))]), [slow],
               store=tmp_path / "runs.sqlite") as agent:
        runner = threading.Thread(target=lambda: outcomes.append(agent.run("go", wait_for=10)))
        runner.start()
        assert started.wait(10)
        assert agent.store is not None
        (record,) = agent.store.runs()
        cancelled = agent.cancel_run(record.run_id)
        release.set()
        runner.join()
    assert outcomes == [cancelled]
    assert isinstance(cancelled, Halted) and cancelled.status == "cancelled"
    assert cancelled.run_id == record.run_id
    assert str(not_completed(cancelled)) == f"run {record.run_id} was cancelled, so it has no text"


def test_a_bare_machine_knows_no_run_id_and_its_checkpoint_never_holds_one() -> None:
    config = MachineConfig(tools=[refuse], on_tool_error="halt")
    outcome = drive(config, "go", model=[calls(call("refuse", id="c1"))]).outcome
    assert isinstance(outcome, Halted) and outcome.run_id == ""
    assert str(not_completed(outcome)).startswith("the run halted (tool_error) after 1 turn")
    machine = TurnMachine(config)
    machine.start("go")
    (*_, done) = machine.cancel()
    assert isinstance(done, Done) and done.outcome.status == machine.status == "cancelled"
    final = json.loads(machine.checkpoint().to_json())["run"]["final"]
    assert "run_id" not in final and final["kind"] == "halted"


def test_a_checkpoint_without_run_ids_restores_and_its_outcome_is_stamped(
        tmp_path: Path) -> None:
    """A checkpoint has no run id anywhere (as earlier versions wrote it too); it restores,
    and the outcome an agent reads from it carries the run's id."""
    with Agent(FunctionModel(lambda request: "hi"), store=tmp_path / "runs.sqlite") as agent:
        first = agent.run("go")
        assert agent.store is not None
        saved = agent.store.latest_checkpoint(first.run_id)
        assert saved is not None and '"run_id"' not in saved.data
        assert json.loads(saved.data)["version"] == CHECKPOINT_VERSION
        assert Checkpoint.from_json(saved.data).run.final is not None
        again = agent.resume_run(first.run_id)
    assert isinstance(again, Completed) and again == first


def test_the_error_pickles_with_its_outcome() -> None:
    failed = drive(MachineConfig(), "go", model=[ModelError("rejected", "HTTP 401: no")]).outcome
    error = not_completed(failed)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.outcome) == (RunNotCompletedError, str(error), failed)


def test_resuming_a_suspended_run_twice_at_once_is_refused() -> None:
    entered, release = threading.Event(), threading.Event()

    @function_tool
    def held() -> Ok:
        """Waits until released."""
        entered.set()
        release.wait(10)
        return Ok("held")

    model = ScriptedModel([calls(call("ask", id="c1")), calls(call("held")), "done"])
    with Agent(model, [ask, held]) as agent:
        waiting = agent.run("go")
        results: list[Any] = []
        first = threading.Thread(target=lambda: results.append(agent.resume(waiting, "a")))
        first.start()
        assert entered.wait(10)
        with pytest.raises(AlreadyResumedError,
                           match=rf"run {waiting.run_id}: this Suspended was resumed already"):
            agent.resume(waiting, "b")
        release.set()
        first.join()
    assert [(o.run_id, o.text) for o in results] == [(waiting.run_id, "done")]


def test_a_suspended_stored_by_an_earlier_version_without_a_run_id_still_reads() -> None:
    with Agent(ScriptedModel([calls(call("ask", id="c1"))]), [ask]) as agent:
        waiting = agent.run("Where?")
    data = json.loads(waiting.model_dump_json())
    data["run_id"] = None  # what a Suspended without a store used to carry
    earlier = Suspended.model_validate(data)
    assert (earlier.run_id, earlier.call_ids) == ("", ("c1",))
    assert str(not_completed(earlier)).startswith("the run is suspended")
