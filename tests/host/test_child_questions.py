"""A child session's question asked through its parent: the parent run suspends on it (the
chain of agents in its text), and resuming the parent answers the child, whose result becomes
the parent call's. With a store and without, across three levels, and asked again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.events import Events
from toolvisor import Agent, AskUser, CallContext, Completed, Halted, Pending, Suspended, Tool
from toolvisor.contract import ModelRequest, ModelResponse, ToolResultMessage
from toolvisor.testing import FunctionModel, ScriptedModel, call, calls


def asks(*questions: str) -> Tool:
    """A tool asking ``questions`` in turn (one per call), each with options."""
    def handler(arguments: dict[str, Any]) -> AskUser:
        return AskUser(questions[arguments["n"]], options=("2024", "2025"))
    return Tool(name="ask", handler=handler,
                input_schema={"type": "object", "properties": {"n": {"type": "integer"}}})


def answered(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if isinstance(m, ToolResultMessage)]


def researcher_model(asked: int) -> FunctionModel:
    """Asks ``asked`` questions one after the other, then reports the answers."""
    def respond(request: ModelRequest) -> ModelResponse:
        got = answered(request)
        if len(got) < asked:
            return calls(call("ask", {"n": len(got)}, id=f"q{len(got)}"))
        return ModelResponse(text="report for " + "/".join(got))
    return FunctionModel(respond)


def writer_model() -> ScriptedModel:
    return ScriptedModel([calls(call("research", {"prompt": "dig"}, id="r")),
                          lambda request: f"wrote: {answered(request)[0]}"])


@pytest.fixture(params=["stored", "storeless"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    return tmp_path / "runs.sqlite" if request.param == "stored" else None


def test_a_childs_question_suspends_the_parent_and_its_answer_reaches_the_child(
        store: Path | None) -> None:
    with Agent(researcher_model(1), [asks("Which year?")], name="researcher",
               store=store) as researcher, \
            Agent(writer_model(), [researcher.as_tool(name="research", description="dig")],
                  store=store) as writer:
        suspended = writer.run("write")
        assert isinstance(suspended, Suspended)
        (question,) = suspended.questions
        assert (question.call_id, question.question) == ("r", "researcher > Which year?")
        assert question.options == ("2024", "2025")
        outcome = writer.resume(suspended, "2025")
    assert isinstance(outcome, Completed) and outcome.text == "wrote: report for 2025"
    assert outcome.run_id == suspended.run_id


def test_the_chain_reaches_three_levels_and_a_child_may_ask_again(store: Path | None) -> None:
    with Agent(researcher_model(2), [asks("Which year?", "Which month?")], name="analyst",
               store=store) as analyst, \
            Agent(ScriptedModel([calls(call("analyse", {"prompt": "dig"}, id="a")),
                                 lambda request: f"analysed: {answered(request)[0]}"]),
                  [analyst.as_tool(name="analyse", description="analyse")], name="researcher",
                  store=store) as researcher, \
            Agent(writer_model(), [researcher.as_tool(name="research", description="dig")],
                  store=store) as writer:
        first = writer.run("write")
        assert isinstance(first, Suspended)
        assert first.questions[0].question == "researcher > analyst > Which year?"
        second = writer.resume(first, "2024")
        assert isinstance(second, Suspended) and second.run_id == first.run_id
        assert second.questions[0].question == "researcher > analyst > Which month?"
        outcome = writer.resume(second, "2025")
    assert isinstance(outcome, Completed)
    assert outcome.text == "wrote: analysed: report for 2024/2025"


def test_an_answer_the_child_refuses_changes_nothing_and_the_parent_is_asked_again() -> None:
    with Agent(researcher_model(1), [asks("Which year?")], name="researcher") as researcher, \
            Agent(writer_model(), [researcher.as_tool(name="research", description="dig")]
                  ) as writer:
        suspended = writer.run("write")
        assert isinstance(suspended, Suspended)
        with pytest.raises(ValueError, match="is not one of its options"):
            writer.resume(suspended, "1999")
        outcome = writer.resume(suspended, "2024")
    assert isinstance(outcome, Completed) and outcome.text == "wrote: report for 2024"


def test_a_handler_relays_its_childs_question_itself() -> None:
    def delegate(arguments: dict[str, Any], ctx: CallContext) -> Any:
        assert ctx.sessions is not None
        outcome = ctx.sessions.start_turn("dig", agent=researcher)
        return ctx.sessions.relay(outcome) if isinstance(outcome, Suspended) else outcome.text

    with Agent(researcher_model(1), [asks("Which year?")], name="researcher") as researcher, \
            Agent(ScriptedModel([calls(call("delegate", id="r")),
                                 lambda request: f"wrote: {answered(request)[0]}"]),
                  [Tool(name="delegate", handler=delegate)]) as writer:
        suspended = writer.run("write")
        assert isinstance(suspended, Suspended)
        outcome = writer.resume(suspended, "2025")
    assert isinstance(outcome, Completed) and outcome.text == "wrote: report for 2025"


def test_a_child_waiting_on_a_key_suspends_the_parent_showing_the_childs_key(
        tmp_path: Path) -> None:
    def hook(arguments: dict[str, Any], ctx: CallContext) -> Pending:
        ctx.completion_key()
        return Pending()

    store = tmp_path / "runs.sqlite"
    hooked = ScriptedModel([calls(call("hook", id="h")),
                            lambda request: f"hook said {answered(request)[0]}"])
    with Agent(hooked, [Tool(name="hook", handler=hook)], name="researcher",
               store=store) as researcher, \
            Agent(writer_model(), [researcher.as_tool(name="research", description="dig")],
                  store=store) as writer:
        suspended = writer.run("write")
        assert isinstance(suspended, Suspended) and list(suspended.keys) == ["r"]
        child_key = suspended.keys["r"]
        (child,) = [r.run_id for r in writer.store.runs()  # type: ignore[union-attr]
                    if r.run_id != suspended.run_id]
        assert [w.key for w in writer.store.open_waits(child)] == [child_key]  # type: ignore[union-attr]
        assert writer.resolve(child_key, ok="pong") == "accepted"
        outcome = writer.resume_run(suspended.run_id, wait_for=30)
    assert isinstance(outcome, Completed) and outcome.text == "wrote: hook said pong"


def test_a_child_waiting_on_a_second_key_keeps_the_parent_waiting(
        tmp_path: Path, events: Events) -> None:
    def hook(arguments: dict[str, Any], ctx: CallContext) -> Pending:
        ctx.completion_key()
        return Pending()

    store = tmp_path / "runs.sqlite"
    hooked = ScriptedModel([calls(call("hook", id="h1")), calls(call("hook", id="h2")),
                            lambda request: "hooks said " + "/".join(answered(request))])
    with Agent(hooked, [Tool(name="hook", handler=hook)], name="researcher",
               store=store) as researcher, \
            Agent(writer_model(), [researcher.as_tool(name="research", description="dig")],
                  store=store) as writer:
        suspended = writer.run("write")
        assert isinstance(suspended, Suspended)
        (child,) = [r.run_id for r in writer.store.runs()  # type: ignore[union-attr]
                    if r.run_id != suspended.run_id]
        assert writer.resolve(suspended.keys["r"], ok="ping") == "accepted"
        events.wait_for("run_waiting_on_keys", run_id=child, call_ids=["h2"])
        # a round trip through the child's orchestrator: its suspension on the second key
        # has reached the parent's call (a suspension on keys is no outcome yet)
        assert researcher.sessions.snapshot(child).status == "suspended"
        (second,) = [w.key for w in writer.store.open_waits(child)]  # type: ignore[union-attr]
        assert writer.resolve(second, ok="pong") == "accepted"
        outcome = writer.resume_run(suspended.run_id, wait_for=30)
    assert isinstance(outcome, Completed) and outcome.text == "wrote: hooks said ping/pong"


def test_cancelling_the_parent_cancels_the_child_whose_key_it_relays(tmp_path: Path) -> None:
    def hook(arguments: dict[str, Any], ctx: CallContext) -> Pending:
        ctx.completion_key()
        return Pending()

    store = tmp_path / "runs.sqlite"
    with Agent(ScriptedModel([calls(call("hook", id="h"))]), [Tool(name="hook", handler=hook)],
               name="researcher", store=store) as researcher, \
            Agent(ScriptedModel([calls(call("research", {"prompt": "dig"}, id="r"))]),
                  [researcher.as_tool(name="research", description="dig")],
                  store=store) as writer:
        suspended = writer.run("write")
        assert isinstance(suspended, Suspended)
        (child,) = [r.run_id for r in writer.store.runs()  # type: ignore[union-attr]
                    if r.run_id != suspended.run_id]
        writer.cancel_run(suspended.run_id)
        outcome = researcher.resume_run(child, wait_for=30)
    assert isinstance(outcome, Halted) and outcome.reason == "cancelled"
