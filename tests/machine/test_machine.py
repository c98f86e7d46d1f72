"""TurnMachine: effects out, responses in by id, refusals, endings and configuration."""

from __future__ import annotations

from typing import Any

import pytest

from toolvisor.contract import (
    AskUser,
    Err,
    Halt,
    ModelResponse,
    Ok,
    Pending,
    SystemMessage,
    Tool,
    ToolCall,
    ToolError,
    ToolResultMessage,
    UserMessage,
)
from toolvisor.machine import (
    CallOutcome,
    Completed,
    ContinueRun,
    Done,
    Failed,
    Halted,
    LlmCall,
    LogEvent,
    MachineConfig,
    ModelReplied,
    NotPerformed,
    Progress,
    ResponseRefused,
    RetryPolicy,
    Sleep,
    Slept,
    StateView,
    Suspended,
    ToolCalls,
    ToolResults,
    TurnMachine,
)


def call(id: str, name: str = "echo", **arguments: Any) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


def asks(*calls: ToolCall, text: str | None = None) -> ModelResponse:
    return ModelResponse(text=text, tool_calls=calls)


def echo(arguments: Any) -> Ok:
    return Ok(arguments)


ECHO = Tool(name="echo", handler=echo)
FLAKY = Tool(name="flaky", handler=lambda a: Ok(1), retryable=True)


def config(**overrides: Any) -> MachineConfig:
    return MachineConfig(**{"tools": [ECHO, FLAKY], **overrides})


def started(**overrides: Any) -> tuple[TurnMachine, LlmCall]:
    machine = TurnMachine(config(**overrides))
    effects = machine.start("hi")
    assert isinstance(effects[-1], LlmCall)
    return machine, effects[-1]


def last(effects: list[Any]) -> Any:
    return effects[-1]


def test_ids_are_monotonic_from_one_and_the_last_effect_waits() -> None:
    machine, llm = started(system_prompt="be brief")
    first = machine.send(ModelReplied(llm.id, asks(call("c1"))))
    tools = last(first)
    assert isinstance(tools, ToolCalls)
    rest = machine.send(ToolResults(tools.id, (CallOutcome("c1", Ok("x")),)))
    llm2 = last(rest)
    final = machine.send(ModelReplied(llm2.id, ModelResponse(text="bye")))
    done = last(final)
    ids = [1, 2] + [e.id for e in first + rest + final]
    assert ids == list(range(1, len(ids) + 1))
    assert llm.request.messages == (SystemMessage(content="be brief"), UserMessage(content="hi"))
    assert [s.name for s in llm.request.tools] == ["echo", "flaky"]
    assert isinstance(done, Done) and isinstance(done.outcome, Completed)
    assert done.outcome.text == "bye" and done.outcome.turns == 2
    assert machine.finished


def test_every_model_request_of_a_run_offers_the_specs_built_once_with_the_config() -> None:
    """The tools' specs are built with the configuration, not again for every turn."""
    machine, first = started()
    assert [spec.name for spec in first.request.tools] == ["echo", "flaky"]
    effects = machine.send(ModelReplied(first.id, ModelResponse(
        tool_calls=(ToolCall(id="c1", name="echo", arguments={}),))))
    calls = last(effects)
    second = last(machine.send(ToolResults(calls.id, (CallOutcome("c1", Ok(None)),))))
    assert isinstance(second, LlmCall)
    assert all(a is b for a, b in zip(first.request.tools, second.request.tools, strict=True))


def test_no_tool_calls_completes_at_once() -> None:
    machine, llm = started()
    done = last(machine.send(ModelReplied(llm.id, ModelResponse(text="42"))))
    assert isinstance(done.outcome, Completed) and done.outcome.text == "42"
    assert machine.reemit() == [done]


def test_the_machine_encodes_a_result_when_the_host_gives_no_text() -> None:
    machine, llm = started()
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1")))))
    llm2 = last(machine.send(ToolResults(tools.id, (CallOutcome("c1", Ok({"a": 1})),))))
    assert llm2.request.messages[-1] == ToolResultMessage(tool_call_id="c1", name="echo",
                                                          content='{"a":1}')


def test_outcomes_may_stream_call_by_call_and_progress_follows_each() -> None:
    machine, llm = started()
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1"), call("c2")))))
    partial = machine.send(ToolResults(tools.id, (CallOutcome("c2", Ok(2), "2"),)))
    assert [type(e) for e in partial] == [Progress]
    assert partial[0].data["call_id"] == "c2"
    assert [c.call.id for c in machine.outstanding.calls] == ["c1"]  # type: ignore[union-attr]
    llm2 = last(machine.send(ToolResults(tools.id, (CallOutcome("c1", Ok(1), "1"),))))
    assert isinstance(llm2, LlmCall)
    assert [m.content for m in llm2.request.messages[-2:]] == ["1", "2"]  # call order


@pytest.mark.parametrize("bad_id", [1, 2, 99])
def test_a_stale_or_unknown_id_is_refused_and_changes_nothing(bad_id: int) -> None:
    machine, llm = started()
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1")))))
    before = machine.checkpoint()
    kind = "stale" if bad_id < tools.id else "unknown"
    with pytest.raises(ResponseRefused, match=f"{kind} effect id {bad_id}"):
        machine.send(ToolResults(bad_id, (CallOutcome("c1", Ok(1)),)))
    assert machine.checkpoint() == before


def test_a_response_of_the_wrong_type_is_refused() -> None:
    machine, llm = started()
    before = machine.checkpoint()
    with pytest.raises(ResponseRefused, match="answer it with ModelReplied"):
        machine.send(Slept(llm.id))
    with pytest.raises(ResponseRefused, match="send\\(\\) takes"):
        machine.send("hello")  # type: ignore[arg-type]
    assert machine.checkpoint() == before


def test_unknown_repeated_and_bad_outcomes_are_refused_atomically() -> None:
    machine, llm = started()
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1"), call("c2")))))
    before = machine.checkpoint()
    cases: list[tuple[Any, str]] = [
        ((CallOutcome("c1", Ok(1)), CallOutcome("zz", Ok(1))), "'zz' is not running"),
        ((CallOutcome("c1", Ok(1)), CallOutcome("c1", Ok(1))), "'c1' is not running"),
        ((CallOutcome("c1", 5),), "not a handler result"),  # type: ignore[arg-type]
        ((CallOutcome("c1", Ok(1), writes={"k": object()}),), "JSON-serialisable"),
        ((), "no outcomes"),
    ]
    for outcomes, message in cases:
        with pytest.raises(ResponseRefused, match=message):
            machine.send(ToolResults(tools.id, outcomes))
        assert machine.checkpoint() == before
    machine.send(ToolResults(tools.id, (CallOutcome("c1", Ok(1)),)))
    with pytest.raises(ResponseRefused, match="already answered"):
        machine.send(ToolResults(tools.id, (CallOutcome("c1", Ok(1)),)))


def test_responses_before_start_after_done_and_while_suspended_are_refused() -> None:
    machine = TurnMachine(config())
    with pytest.raises(ResponseRefused, match="not started"):
        machine.send(ModelReplied(1, ModelResponse()))
    assert machine.reemit() == [] and machine.outstanding is None
    llm = last(machine.start("hi"))
    with pytest.raises(ResponseRefused, match="already called"):
        machine.start("again")
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1")))))
    done = last(machine.send(ToolResults(tools.id, (CallOutcome("c1", AskUser("ok?")),))))
    assert isinstance(done.outcome, Suspended)
    with pytest.raises(ResponseRefused, match="suspended"):
        machine.send(ModelReplied(llm.id, ModelResponse()))
    machine.cancel()
    with pytest.raises(ResponseRefused, match="over"):
        machine.send(ModelReplied(llm.id, ModelResponse()))
    with pytest.raises(ResponseRefused, match="unfinished"):
        machine.cancel()


def test_effect_failed_fails_the_run_and_still_answers_every_call() -> None:
    machine, llm = started()
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1"), call("c2")))))
    machine.send(ToolResults(tools.id, (CallOutcome("c1", Ok(1), "1"),)))
    done = last(machine.send(NotPerformed(tools.id, RuntimeError("pool gone"))))
    outcome = done.outcome
    assert isinstance(outcome, Failed)
    assert outcome.error == f"tool_calls effect {tools.id} failed: RuntimeError: pool gone"
    results = [m for m in outcome.messages if isinstance(m, ToolResultMessage)]
    assert [(m.tool_call_id, m.is_error) for m in results] == [("c1", False), ("c2", True)]
    assert "not_completed" in results[1].content


def test_a_model_failure_fails_the_run() -> None:
    machine, llm = started()
    done = last(machine.send(NotPerformed(llm.id, "rate limited")))
    assert done.outcome == Failed(error=f"llm_call effect {llm.id} failed: rate limited",
                                  messages=(UserMessage(content="hi"),), turns=1)


def test_repeated_call_ids_from_the_model_fail_without_recording_the_message() -> None:
    machine, llm = started()
    done = last(machine.send(ModelReplied(llm.id, asks(call("c1"), call("c1")))))
    assert isinstance(done.outcome, Failed) and "['c1'] more than once" in done.outcome.error
    assert done.outcome.messages == (UserMessage(content="hi"),)


def test_cancel_halts_with_cancelled_and_late_responses_are_refused() -> None:
    machine, llm = started()
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1"), call("c2")))))
    machine.send(ToolResults(tools.id, (CallOutcome("c1", Ok(1), "1", {"k": 1}),)))
    done = last(machine.cancel())
    assert isinstance(done.outcome, Halted) and done.outcome.reason == "cancelled"
    assert done.outcome.state == {"k": 1}
    assert "cancelled" in done.outcome.messages[-1].content  # type: ignore[union-attr]
    with pytest.raises(ResponseRefused):
        machine.send(ToolResults(tools.id, (CallOutcome("c2", Ok(1)),)))


def test_max_turns_halts_after_the_last_turns_tools_ran() -> None:
    machine, llm = started(max_turns=1)
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1")))))
    done = last(machine.send(ToolResults(tools.id, (CallOutcome("c1", Ok(1), "1"),))))
    assert isinstance(done.outcome, Halted) and done.outcome.reason == "max_turns"
    assert done.outcome.messages[-1] == ToolResultMessage(tool_call_id="c1", name="echo",
                                                          content="1")


def test_a_handler_halt_ends_the_run_after_its_siblings() -> None:
    machine, llm = started()
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1"), call("c2")))))
    assert len(tools.calls) == 2
    done = last(machine.send(ToolResults(tools.id, (
        CallOutcome("c1", Halt("enough", {"n": (1, 2)})), CallOutcome("c2", Ok(2))))))
    assert done.outcome.reason == "enough" and done.outcome.result == {"n": [1, 2]}
    assert [m.content for m in done.outcome.messages[-2:]] == [
        '{"halt":"enough","result":{"n":[1,2]}}', "2"]


@pytest.mark.parametrize("reason", ["ask_user", "max_turns", "tool_error", "cancelled",
                                    "completed", "invalid_return"])
def test_a_reserved_halt_reason_is_an_invalid_return_through_the_policy(reason: str) -> None:
    seen: list[Any] = []

    def policy(failed: Any, error: Any) -> Any:
        seen.append(error)
        return ContinueRun()

    machine, llm = started(on_tool_error=policy)
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1")))))
    llm2 = last(machine.send(ToolResults(tools.id, (CallOutcome("c1", Halt(reason)),))))
    assert isinstance(llm2, LlmCall)
    [error] = seen
    assert isinstance(error, ToolError) and error.reason == "invalid_return"
    message = llm2.request.messages[-1]
    assert message.is_error and "reserved" in message.content  # type: ignore[union-attr]


def test_a_pending_result_suspends_until_the_host_resolves_it() -> None:
    machine, llm = started()
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1")))))
    done = last(machine.send(ToolResults(tools.id, (CallOutcome("c1", Pending(deadline=5)),))))
    outcome = done.outcome
    assert isinstance(outcome, Suspended) and outcome.questions == ()
    assert outcome.pending[0].deadline == 5 and outcome.call_ids == ("c1",)
    llm2 = last(machine.resume({"c1": Ok("finished later")}))
    assert llm2.request.messages[-1].content == "finished later"


def test_resume_refuses_unknown_ids_and_result_kinds_that_are_not_answers() -> None:
    machine, llm = started()
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1")))))
    machine.send(ToolResults(tools.id, (CallOutcome("c1", AskUser("pick", ("a", "b"))),)))
    before = machine.checkpoint()
    for answers, message in [({"zz": "a"}, "not waiting"), ({}, "non-empty"),
                             ({"c1": AskUser("again?")}, "answer with a value")]:
        with pytest.raises(ResponseRefused, match=message):
            machine.resume(answers)
        assert machine.checkpoint() == before
    llm2 = last(machine.resume({"c1": "a"}))
    assert llm2.request.messages[-1] == ToolResultMessage(tool_call_id="c1", name="echo",
                                                          content="a")


def test_an_err_answer_goes_through_the_policy_and_cannot_be_retried() -> None:
    machine, llm = started(tool_policies={"flaky": RetryPolicy(retry_reported=True)})
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1", "flaky")))))
    machine.send(ToolResults(tools.id, (CallOutcome("c1", Pending()),)))
    effects = machine.resume({"c1": Err("external work failed")})
    assert not any(isinstance(e, Sleep) for e in effects)
    assert any(isinstance(e, LogEvent) and e.event == "retry_not_possible" for e in effects)
    assert last(effects).request.messages[-1].is_error


def test_log_and_progress_effects_are_plain_json() -> None:
    machine, llm = started()
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1"), call("zz", "nope")))))
    effects = machine.send(ToolResults(tools.id, (CallOutcome("c1", Err(ValueError("x"))),)))
    events = [e for e in effects if isinstance(e, LogEvent)]
    assert [e.event for e in events] == ["tool_failed"]
    assert events[0].fields["crashed"] is False
    for effect in effects:
        assert type(effect).model_validate_json(effect.model_dump_json()) == effect


def test_start_takes_a_conversation_and_an_initial_state() -> None:
    machine = TurnMachine(config(system_prompt="sys"))
    llm = last(machine.start([UserMessage(content="a")], state={"k": (1, 2)}))
    assert llm.request.messages == (SystemMessage(content="sys"), UserMessage(content="a"))
    assert machine.state == {"k": [1, 2]}
    with pytest.raises(ValueError, match="empty"):
        TurnMachine(config()).start([])


def test_state_view_reads_the_snapshot_and_its_own_writes() -> None:
    snapshot = {"list": [1]}
    view = StateView(snapshot)
    view.get("list").append(2)
    assert view.get("list") == [1] and view.get("missing", 7) == 7
    view.set("list", (3,))
    assert view.get("list") == [3] and view.writes == {"list": [3]} and snapshot == {"list": [1]}
    with pytest.raises(TypeError, match="JSON-serialisable"):
        view.set("bad", object())
    with pytest.raises(TypeError, match="keys are str"):
        view.set(1, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize(("overrides", "error", "message"), [
    ({"on_tool_error": "explode"}, ValueError, "unknown policy 'explode'"),
    ({"on_tool_error": 3}, TypeError, "a policy is"),
    ({"tool_policies": {"nope": "halt"}}, ValueError, "unknown tool 'nope'"),
    ({"tool_policies": {"echo": "nah"}}, ValueError, "tool_policies\\['echo'\\]"),
    ({"mode": "turbo"}, ValueError, "mode must be one of"),
    ({"max_turns": 0}, ValueError, "max_turns must be an int >= 1"),
    ({"max_turns": True}, ValueError, "max_turns"),
    ({"tools": [ECHO, Tool(name="echo")]}, ValueError, "two tools are named 'echo'"),
    ({"tools": ["echo"]}, TypeError, "Tool objects"),
    ({"seed": "x"}, TypeError, "seed must be an int"),
])
def test_invalid_configuration_is_a_clear_error(overrides: dict[str, Any], error: type,
                                                 message: str) -> None:
    with pytest.raises(error, match=message):
        config(**overrides)


def test_turn_machine_needs_a_machine_config() -> None:
    with pytest.raises(TypeError, match="MachineConfig"):
        TurnMachine({})  # type: ignore[arg-type]


def host_view(machine: TurnMachine) -> tuple[int, int]:
    """The turn and last effect id as a host read them from a checkpoint before the API."""
    run = machine.checkpoint().run
    return run.turns, run.next_effect_id - 1


def test_turn_and_last_effect_id_match_the_checkpoint_after_every_step() -> None:
    machine = TurnMachine(config())
    assert (machine.turn, machine.last_effect_id, machine.status) == (0, 0, "running")

    def waiting() -> int:
        effect = machine.outstanding
        assert effect is not None
        return effect.id

    steps = [
        lambda: machine.start("hi"),
        lambda: machine.send(ModelReplied(waiting(), asks(call("c1"), call("c2")))),
        lambda: machine.send(ToolResults(waiting(), (CallOutcome("c2", Ok(2)),))),
        lambda: machine.send(ToolResults(waiting(), (CallOutcome("c1", Ok(1)),))),
        lambda: machine.send(ModelReplied(waiting(), asks(call("c3")))),
    ]
    for step in steps:
        effects = step()
        assert (machine.turn, machine.last_effect_id) == host_view(machine)
        assert machine.last_effect_id == effects[-1].id
    assert machine.turn == 2


def ended(how: str) -> TurnMachine:
    machine, llm = started()
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1")))))
    if how == "completed":
        llm2 = last(machine.send(ToolResults(tools.id, (CallOutcome("c1", Ok(1)),))))
        machine.send(ModelReplied(llm2.id, ModelResponse(text="bye")))
    elif how == "halted":
        machine.send(ToolResults(tools.id, (CallOutcome("c1", Halt("enough")),)))
    elif how == "failed":
        machine.send(NotPerformed(tools.id, "pool gone"))
    elif how == "cancelled":
        machine.cancel()
    elif how == "suspended":
        machine.send(ToolResults(tools.id, (CallOutcome("c1", AskUser("ok?")),)))
    else:
        assert how == "running"
    return machine


@pytest.mark.parametrize("how", ["running", "suspended", "completed", "halted", "failed",
                                 "cancelled"])
def test_status_says_where_the_run_stands(how: str) -> None:
    machine = ended(how)
    assert machine.status == how
    assert (machine.turn, machine.last_effect_id) == host_view(machine)
    assert TurnMachine.restore(machine.config, machine.checkpoint()).status == how


def test_a_resumed_run_is_running_again() -> None:
    machine = ended("suspended")
    machine.resume({"c1": "yes"})
    assert machine.status == "running"


def test_tool_call_gives_the_current_turns_call_as_the_model_asked_it() -> None:
    machine, llm = started()
    asked = call("c1", n=1)
    tools = last(machine.send(ModelReplied(llm.id, asks(asked, call("c2")))))
    machine.send(ToolResults(tools.id, (CallOutcome("c1", Pending()), CallOutcome("c2", Ok(2)))))
    assert machine.tool_call("c1") == asked
    assert TurnMachine.restore(machine.config, machine.checkpoint()).tool_call("c1") == asked
    with pytest.raises(KeyError, match="no tool call 'zz' in turn 1; its calls: \\['c1', 'c2'\\]"):
        machine.tool_call("zz")


def retried_to_pending() -> tuple[TurnMachine, list[ToolCalls]]:
    """Turn 2 asks for a flaky call: attempt 1 crashes, attempt 2 returns ``Pending``."""
    machine, llm = started(tool_policies={"flaky": RetryPolicy(base_delay=0)})
    tools = last(machine.send(ModelReplied(llm.id, asks(call("c1")))))
    llm2 = last(machine.send(ToolResults(tools.id, (CallOutcome("c1", Ok(1)),))))
    batches = [last(machine.send(ModelReplied(llm2.id, asks(call("c1", "flaky")))))]
    assert machine.turn == 2
    batches.append(last(machine.send(ToolResults(batches[0].id, (
        CallOutcome("c1", Err(ToolError("timeout")), writes={"k": 1}),)))))
    assert (machine.turn, machine.last_effect_id) == host_view(machine)
    machine.send(ToolResults(batches[1].id, (CallOutcome("c1", Pending(deadline=3)),)))
    return machine, batches


def test_calls_to_run_carry_the_turn_that_asked_for_them_and_keep_it_on_a_retry() -> None:
    machine, batches = retried_to_pending()
    assert [(c.turn, c.attempt) for b in batches for c in b.calls] == [(2, 1), (2, 2)]
    done = machine.outstanding
    assert isinstance(done, Done) and isinstance(done.outcome, Suspended)
    assert done.outcome.checkpoint.run.turns == 2


def test_a_pending_call_carries_its_turn_and_attempt_through_a_restore() -> None:
    machine, _ = retried_to_pending()
    done = machine.outstanding
    assert isinstance(done, Done) and isinstance(done.outcome, Suspended)
    [pending] = done.outcome.pending
    assert (pending.call_id, pending.turn, pending.attempt, pending.deadline) == ("c1", 2, 2, 3)
    restored = TurnMachine.restore(machine.config, done.outcome.checkpoint.to_json())
    assert restored.reemit() == [done]
    assert (restored.turn, restored.last_effect_id) == (2, done.id)
