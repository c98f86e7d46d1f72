"""The supervised agent loop end to end: real actors, real timeouts, a scripted model."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

import pytest

from toolvisor import (
    Agent,
    AskUser,
    CallContext,
    Completed,
    Err,
    Failed,
    Halt,
    Halted,
    Limits,
    Ok,
    Suspended,
    Tool,
    ToolError,
)
from toolvisor.call import OutputBudget, OutputProjection
from toolvisor.contract import ModelRequest, ToolResultMessage
from toolvisor.machine import ContinueRun, RetryPolicy
from toolvisor.testing import FunctionModel, ScriptedModel, call, calls


def tool_texts(request: ModelRequest) -> dict[str, Any]:
    """The tool results the model was shown, by call id, decoded."""
    out: dict[str, Any] = {}
    for message in request.messages:
        if isinstance(message, ToolResultMessage):
            try:
                out[message.tool_call_id] = json.loads(message.content)
            except json.JSONDecodeError:
                out[message.tool_call_id] = message.content
    return out


def add(arguments: dict[str, Any]) -> Ok:
    return Ok(arguments["a"] + arguments["b"])


def crash(arguments: dict[str, Any]) -> Ok:
    raise RuntimeError("disk on fire")


def leave(arguments: dict[str, Any]) -> Ok:
    sys.exit(4)


def hang(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    ctx.cancelled.wait(10)  # cooperative: returns once the runner gives up on it
    return Ok("too late")


def sloppy(arguments: dict[str, Any]) -> Any:
    return {"not": "a result"}


def report(arguments: dict[str, Any]) -> Err:
    return Err("no such user")


TOOLS = [
    Tool(name="add", handler=add, input_schema={
        "type": "object", "required": ["a", "b"],
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
    Tool(name="crash", handler=crash),
    Tool(name="leave", handler=leave),
    Tool(name="hang", handler=hang, timeout=0.1),
    Tool(name="sloppy", handler=sloppy),
    Tool(name="report", handler=report),
]


def test_a_batch_with_every_failure_continues_and_the_model_sees_each_reason() -> None:
    model = ScriptedModel([
        calls(call("add", {"a": 2, "b": 3}, id="ok"), call("crash", id="raise"),
              call("leave", id="exit"), call("hang", id="hung"), call("sloppy", id="garbage"),
              call("report", id="reported"), call("nope", id="unknown"),
              call("add", {"a": "x"}, id="invalid")),
        "all done",
    ])
    with Agent(model, TOOLS) as agent:
        outcome = agent.run("do everything")
    model.assert_finished()
    assert isinstance(outcome, Completed) and outcome.text == "all done"
    shown = tool_texts(model.requests[1])
    assert shown["ok"] == 5
    reasons = {cid: shown[cid]["error"]["reason"] for cid in
               ("raise", "exit", "hung", "garbage", "unknown", "invalid")}
    assert reasons == {"raise": "handler_raised", "exit": "handler_exit", "hung": "timeout",
                       "garbage": "invalid_return", "unknown": "not_found",
                       "invalid": "invalid_arguments"}
    assert shown["reported"] == {"error": "no such user"}
    assert len(shown) == 8  # every call id got exactly one result


def test_ask_user_suspends_and_the_answer_becomes_the_result() -> None:
    approve = Tool(name="deploy", handler=lambda a: AskUser("Deploy to prod?", ("yes", "no")))
    model = ScriptedModel([calls(call("deploy", id="d1"), call("add", {"a": 1, "b": 1},
                                                                  id="a1")),
                           "deployed"])
    with Agent(model, [approve, *TOOLS]) as agent:
        suspended = agent.run("ship it")
        assert isinstance(suspended, Suspended)
        assert [(q.call_id, q.question, q.options) for q in suspended.questions] == [
            ("d1", "Deploy to prod?", ("yes", "no"))]
        again = Suspended.model_validate_json(suspended.model_dump_json())  # survives JSON
        outcome = agent.resume(again, "yes")
    assert isinstance(outcome, Completed) and outcome.text == "deployed"
    assert tool_texts(model.requests[1]) == {"d1": "yes", "a1": 2}


def test_a_tool_can_halt_the_run() -> None:
    stop = Tool(name="stop", handler=lambda a: Halt("goal_reached", {"answer": 42}))
    with Agent(ScriptedModel([calls(call("stop"))]), [stop]) as agent:
        outcome = agent.run("go")
    assert isinstance(outcome, Halted)
    assert (outcome.reason, outcome.result) == ("goal_reached", {"answer": 42})


def test_halt_policy_lets_siblings_finish_then_halts_with_tool_error() -> None:
    finished = threading.Event()

    def slow_ok(arguments: dict[str, Any]) -> Ok:
        finished.set()
        return Ok(1)

    tools = [Tool(name="slow", handler=slow_ok), Tool(name="crash", handler=crash)]
    with Agent(ScriptedModel([calls(call("crash"), call("slow"))]), tools,
               on_tool_error="halt") as agent:
        outcome = agent.run("go")
    assert isinstance(outcome, Halted) and outcome.reason == "tool_error"
    assert finished.is_set()


def test_a_flaky_tool_is_retried_in_a_fresh_actor_until_it_works() -> None:
    attempts: list[int] = []

    def flaky(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ConnectionError("try again")
        return Ok("finally")

    tool = Tool(name="flaky", handler=flaky, retryable=True)
    model = ScriptedModel([calls(call("flaky", id="f")), "ok"])
    policy = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.002)
    with Agent(model, [tool], on_tool_error=policy) as agent:
        outcome = agent.run("go")
    assert isinstance(outcome, Completed)
    assert attempts == [1, 2, 3]
    assert tool_texts(model.requests[1]) == {"f": "finally"}


def test_a_policy_function_sees_crashes_and_reports_apart() -> None:
    seen: list[tuple[str, str]] = []

    def policy(failed: Any, error: Any) -> ContinueRun:
        kind = f"crash:{error.reason}" if isinstance(error, ToolError) else f"reported:{error}"
        seen.append((failed.call.id, kind))
        return ContinueRun(Ok("replaced"))

    model = ScriptedModel([calls(call("crash", id="c"), call("report", id="r")), "fine"])
    with Agent(model, TOOLS, on_tool_error=policy) as agent:
        assert isinstance(agent.run("go"), Completed)
    assert sorted(seen) == [("c", "crash:handler_raised"), ("r", "reported:no such user")]
    assert tool_texts(model.requests[1]) == {"c": "replaced", "r": "replaced"}


def test_a_tool_removed_from_the_catalog_is_not_found_and_never_runs() -> None:
    ran: list[str] = []
    secret = Tool(name="secret", handler=lambda a: ran.append("x") or Ok(1))
    model = ScriptedModel([calls(call("secret", id="s")), "ok"])
    with Agent(model, [secret]) as agent:
        agent.registry.remove_member("secret")
        assert isinstance(agent.run("go"), Completed)
    assert ran == []
    assert tool_texts(model.requests[1])["s"]["error"]["reason"] == "not_found"
    assert model.requests[0].tools == ()


def test_huge_outputs_are_bounded_by_the_output_budget() -> None:
    big = Tool(name="big", handler=lambda a: Ok("x" * 100_000))
    model = ScriptedModel([calls(call("big", id="b")), "ok"])
    budget = OutputProjection(OutputBudget(max_bytes=1024))
    with Agent(model, [big], limits=Limits(tool_output=budget)) as agent:
        agent.run("go")
    text = tool_texts(model.requests[1])["b"]
    assert len(text.encode()) <= 1024 and "bytes truncated" in text


def test_a_model_that_raises_fails_the_run() -> None:
    def broken(request: ModelRequest) -> str:
        raise ConnectionError("provider down")

    with Agent(FunctionModel(broken)) as agent:
        outcome = agent.run("hi")
    assert isinstance(outcome, Failed) and "provider down" in outcome.error


def test_max_turns_bounds_the_loop() -> None:
    model = FunctionModel(lambda request: calls(call("add", {"a": 1, "b": 1})))
    with Agent(model, TOOLS, limits=Limits(turns=2)) as agent:
        outcome = agent.run("loop forever")
    assert isinstance(outcome, Halted) and outcome.reason == "max_turns"
    assert len(model.requests) == 2


def test_async_twins() -> None:
    approve = Tool(name="ask", handler=lambda a: AskUser("ok?"))

    async def main() -> Any:
        model = ScriptedModel([calls(call("ask", id="q")), "thanks"])
        with Agent(model, [approve]) as agent:
            suspended = await agent.arun("go")
            assert isinstance(suspended, Suspended)
            return await agent.aresume(suspended, "sure")

    outcome = asyncio.run(main())
    assert isinstance(outcome, Completed) and outcome.text == "thanks"


def test_a_run_past_its_timeout_is_cancelled() -> None:
    release = threading.Event()

    def slow_model(request: ModelRequest) -> str:
        release.wait(5)
        return "late"

    with Agent(FunctionModel(slow_model)) as agent:
        with pytest.raises(TimeoutError, match="was cancelled"):
            agent.run("hi", wait_for=0.05)
        release.set()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"on_tool_error": "explode"}, "on_tool_error"),
    ({"mode": "chaotic"}, "mode"),
    ({"limits": {"turns": 0}}, "limits must be a toolvisor.Limits"),
    ({"tools": [Tool(name="t"), Tool(name="t")]}, "two tools are named 't'"),
])
def test_invalid_configuration_is_refused_at_construction(kwargs: dict[str, Any],
                                                            message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        Agent(ScriptedModel([]), **kwargs)


def test_the_supervision_tree_is_visible() -> None:
    with Agent(ScriptedModel([])) as agent:
        assert [c.id for c in agent.supervisor.which_children()] == ["tool_calls", "processes",
                                                                     "orchestrator"]
        assert agent.supervisor.count_children()["active"] == 3


def test_runs_reach_the_orchestrator_without_asking_the_root_supervisor(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """While the orchestrator lives, a run is told to the ref its start recorded (no round
    trip to the root supervisor per run); once it has stopped, the supervisor is asked, and
    runs go on with the orchestrator it restarted."""
    def echo(request: ModelRequest) -> str:
        return str(request.messages[-1].content)

    with Agent(FunctionModel(echo)) as agent:
        root = agent.supervisor
        asked: list[int] = []
        which_children = root.which_children

        def counted() -> Any:
            asked.append(1)
            return which_children()

        monkeypatch.setattr(root, "which_children", counted)
        assert [agent.run("one").text, agent.run("two").text] == ["one", "two"]
        assert asked == []
        [first] = [c.ref for c in which_children() if c.id == "orchestrator"]
        first.stop()  # a permanent child: the root supervisor starts a new one
        assert agent.run("three").text == "three"
        [second] = [c.ref for c in which_children() if c.id == "orchestrator"]
        assert second is not None and second is not first
