"""Child sessions: runs a call starts on its own agent or another, linked to the call. The
cascade of cancellation across three levels, a failing child as the parent call's result, the
limits, and the errors a handler gets for a child it may not start or read."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rich.console import Console

from toolvisor import Agent, CallContext, Completed, Halted, Limits, Ok, Tool, Tracing
from toolvisor.contract import CapabilityError, ModelRequest, ToolResultMessage
from toolvisor.observe import live, render
from toolvisor.testing import FunctionModel, ScriptedModel, call, calls


def results(outcome: Any) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in outcome.messages
            if isinstance(m, ToolResultMessage)}


def delegating(level: str, child: Agent | None, seen: list[tuple[str, bool, str]],
               done: threading.Event) -> Tool:
    """A tool that runs ``child`` as a child session and records, once its child is back,
    whether its own call was cancelled and how the child ended."""
    def handler(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert ctx.sessions is not None
        outcome = ctx.sessions.start_turn("go deeper", agent=child)
        seen.append((level, ctx.cancelled.is_set(), type(outcome).__name__))
        done.set()
        return Ok(outcome.status)
    return Tool(name="delegate", handler=handler)


def test_cancelling_the_parent_run_cancels_its_children_across_three_levels(
        tmp_path: Path) -> None:
    seen: list[tuple[str, bool, str]] = []
    reached, done = threading.Event(), {n: threading.Event() for n in ("w", "r", "a")}
    top: list[str] = []

    def waits(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        reached.set()
        ctx.cancelled.wait(60)
        seen.append(("analyst", ctx.cancelled.is_set(), ""))
        done["a"].set()
        return Ok("stopped")

    def script(tool: str) -> ScriptedModel:
        return ScriptedModel({"go": [calls(call(tool))], "go deeper": [calls(call(tool))]})

    with Agent(script("wait"), [Tool(name="wait", handler=waits)], name="analyst") as analyst, \
         Agent(script("delegate"), [delegating("researcher", analyst, seen, done["r"])],
               name="researcher") as researcher:
        writer_tool = delegating("writer", researcher, seen, done["w"])
        model = FunctionModel(lambda request: top.append(request.messages[-1].content)
                              or calls(call("delegate")))
        with Agent(model, [writer_tool], store=tmp_path / "runs.sqlite") as writer:
            runner = threading.Thread(target=lambda: top.append(writer.run("go")))
            runner.start()
            assert reached.wait(30)
            run_id = writer.store.runs()[0].run_id  # type: ignore[union-attr]
            cancelled = writer.cancel_run(run_id)
            runner.join(30)
            assert all(event.wait(30) for event in done.values())
    assert isinstance(cancelled, Halted) and cancelled.reason == "cancelled"
    assert sorted(seen) == [("analyst", True, ""), ("researcher", True, "Halted"),
                            ("writer", True, "Halted")]


def test_a_calls_timeout_cancels_its_child() -> None:
    seen: list[bool] = []
    back = threading.Event()

    def waits(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        ctx.cancelled.wait(60)
        seen.append(ctx.cancelled.is_set())
        back.set()
        return Ok("stopped")

    def delegate(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert ctx.sessions is not None
        return Ok(ctx.sessions.start_turn("wait").status)

    model = ScriptedModel({"go": [calls(call("delegate", id="d")), "gave up"],
                           "wait": [calls(call("wait"))]})
    tools = [Tool(name="delegate", handler=delegate, timeout=0.2),
             Tool(name="wait", handler=waits)]
    with Agent(model, tools) as agent:
        outcome = agent.run("go")
        assert back.wait(30)
    assert isinstance(outcome, Completed) and "timeout" in results(outcome)["d"]
    assert seen == [True]


def test_a_failing_child_is_the_parent_calls_result_and_the_parent_goes_on() -> None:
    def broken(request: ModelRequest) -> Any:
        raise RuntimeError("the researcher's model broke")

    with Agent(FunctionModel(broken), name="researcher") as researcher:
        research = researcher.as_tool(name="research", description="ask the researcher")
        model = ScriptedModel([calls(call("research", {"prompt": "find"}, id="r")), "wrote it"])
        with Agent(model, [research]) as writer:
            outcome = writer.run("write")
    assert isinstance(outcome, Completed) and outcome.text == "wrote it"
    text = results(outcome)["r"]
    assert "child_session_failed" in text and "failed" in text


def test_a_child_on_a_closed_agent_is_refused_and_the_parent_goes_on() -> None:
    researcher = Agent(ScriptedModel([]), name="researcher")
    researcher.close()
    research = researcher.as_tool(name="research", description="ask the researcher")
    model = ScriptedModel([calls(call("research", {"prompt": "find"}, id="r")), "done"])
    with Agent(model, [research]) as writer:
        outcome = writer.run("write")
    assert isinstance(outcome, Completed)
    assert "agent_closed" in results(outcome)["r"] and "'researcher' is closed" in \
        results(outcome)["r"]


def test_an_agent_as_a_tool_returns_the_childs_answer_and_the_parent_reads_its_snapshot(
        ) -> None:
    snapshots: list[Any] = []

    def delegate(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert ctx.sessions is not None
        session = ctx.sessions.create_session(researcher, state={"topic": "otters"})
        first = ctx.sessions.start_turn("find", session=session)
        second = ctx.sessions.start_turn("more", session=session)
        snapshots.append(ctx.sessions.snapshot(second.run_id))
        ctx.sessions.close_session(session)
        return Ok([first.text, second.text])

    researcher_model = ScriptedModel({"find": ["otters hold hands"],
                                      "more": ["they sleep afloat"]})
    with Agent(researcher_model, name="researcher") as researcher:
        model = ScriptedModel([calls(call("delegate", id="d")), "done"])
        with Agent(model, [Tool(name="delegate", handler=delegate)]) as writer:
            outcome = writer.run("write")
    assert results(outcome)["d"] == '["otters hold hands","they sleep afloat"]'
    snapshot = snapshots[0]
    assert snapshot.status == "completed" and snapshot.parent_run_id == outcome.run_id
    assert snapshot.state == {"topic": "otters"}
    assert [m.content for m in snapshot.messages if m.role == "user"] == ["find", "more"]


def refused(handler: Any, **agent_options: Any) -> str:
    """What a handler's refused child-session request raised, as the model saw it."""
    model = ScriptedModel({"go": [calls(call("try", id="t")), "done"],
                           "child": [calls(call("try", id="t2")), "child done"]})
    with Agent(model, [Tool(name="try", handler=handler)], **agent_options) as agent:
        outcome = agent.run("go")
    assert isinstance(outcome, Completed)
    return results(outcome)["t"]


def test_a_snapshot_of_a_run_not_granted_is_refused() -> None:
    def peek(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert ctx.sessions is not None
        return Ok(ctx.sessions.snapshot("someone-elses-run"))

    text = refused(peek)
    assert "snapshot_not_granted" in text and "'someone-elses-run'" in text


def test_depth_past_the_limit_is_refused() -> None:
    depths: list[Any] = []

    def recurse(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert ctx.sessions is not None
        try:
            return Ok(ctx.sessions.start_turn("child").text)
        except CapabilityError as exc:
            depths.append((ctx.sessions.snapshot_current().parent_run_id is not None, str(exc)))
            raise

    assert refused(recurse, limits=Limits(session_depth=1)) == "child done"
    assert len(depths) == 1
    in_child, error = depths[0]  # the child (depth 1) ran; its own child (depth 2) did not
    assert in_child and error.startswith("session_depth_exceeded: a child session here would "
                                         "be 2 levels deep, past the limit of 1")


def test_fan_out_past_the_limit_is_refused() -> None:
    def fan_out(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert ctx.sessions is not None
        for _ in range(3):
            ctx.sessions.start_turn("leaf")
        return Ok("all ran")

    model = ScriptedModel({"go": [calls(call("fan", id="f")), "done"],
                           "leaf": ["leaf", "leaf", "leaf"]})
    with Agent(model, [Tool(name="fan", handler=fan_out)],
               limits=Limits(child_sessions=2)) as agent:
        outcome = agent.run("go")
    text = results(outcome)["f"]
    assert "too_many_child_sessions" in text and "already started 2 child runs" in text


def test_a_closed_session_and_a_call_that_ended_refuse_children() -> None:
    kept: list[Any] = []
    errors: list[str] = []

    def keeps(arguments: dict[str, Any], ctx: CallContext) -> Ok:
        assert ctx.sessions is not None
        session = ctx.sessions.create_session()
        ctx.sessions.close_session(session)
        try:
            ctx.sessions.start_turn("leaf", session=session)
        except CapabilityError as exc:
            errors.append(exc.code)
        kept.append(ctx.sessions)
        return Ok("kept")

    model = ScriptedModel([calls(call("keep")), "done"])
    with Agent(model, [Tool(name="keep", handler=keeps)]) as agent:
        agent.run("go")
        with pytest.raises(CapabilityError, match="call_finished") as ended:
            kept[0].start_turn("too late")
    assert errors == ["session_closed"] and ended.value.code == "call_finished"


def test_bad_limits_are_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match=r"Limits\.session_depth must be an int >= 0, got -1"):
        Agent(ScriptedModel([]), limits=Limits(session_depth=-1))


def test_the_trace_shows_the_child_run_under_the_parents_tool_call() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with Agent(ScriptedModel(["found"]), name="researcher",
               tracing=Tracing(provider=provider)) as researcher:
        research = researcher.as_tool(name="research", description="ask the researcher")
        model = ScriptedModel([calls(call("research", {"prompt": "find"})), "wrote"])
        with Agent(model, [research], name="writer", tracing=Tracing(provider=provider)) as writer:
            writer.run("write")
    provider.shutdown()
    by_name = {span.name: span for span in exporter.get_finished_spans()}
    child, tool = by_name["invoke_agent researcher"], by_name["execute_tool research"]
    parent = by_name["invoke_agent writer"]
    assert child.parent is not None and child.parent.span_id == tool.context.span_id
    assert tool.parent is not None and tool.parent.span_id == parent.context.span_id
    assert child.context.trace_id == parent.context.trace_id


def test_the_live_view_draws_the_child_run_under_the_call_that_started_it() -> None:
    researcher_model = ScriptedModel([calls(call("dig", id="dig-1")), "found"])
    model = ScriptedModel([calls(call("research", {"prompt": "find"}, id="r-1")), "wrote"])
    with live(io.StringIO()) as board, \
            Agent(researcher_model, [Tool(name="dig", handler=lambda a: Ok("gold"))],
                  name="researcher") as researcher:
        research = researcher.as_tool(name="research", description="ask the researcher")
        with Agent(model, [research], name="writer") as writer:
            outcome = writer.run("write")
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(render(board))
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    top = [n for n, line in enumerate(lines) if line.lstrip("└├─│ ").startswith("run ")]
    assert len(top) == 2 and lines[top[0]].startswith("└── run " + outcome.run_id[:8])
    call_line = next(n for n, line in enumerate(lines) if "research r-1" in line)
    child_line = top[1]
    assert child_line == call_line + 1 and "dig-1" in "".join(lines[child_line:])
    indent = len(lines[child_line]) - len(lines[child_line].lstrip("└├─│ "))
    assert indent > len(lines[call_line]) - len(lines[call_line].lstrip("└├─│ "))
