"""``toolvisor.adapters.langgraph`` end to end through a compiled graph's ``invoke`` /
``ainvoke``, with LangChain's own ``GenericFakeChatModel``: each of toolvisor's results on
LangGraph's channels, and no call run twice when LangGraph re-runs an interrupted node."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command, Send

from tests.support.adapter_tools import tools
from toolvisor import AskUser, function_tool
from toolvisor.adapters.langgraph import SupervisedTools, ToolHalted
from toolvisor.durable import SqliteRunStore
from toolvisor.testing import capture_events

CONFIG: Any = {"configurable": {"thread_id": "thread-1"}}


def graph(supervised: SupervisedTools, *calls: tuple[str, dict[str, Any]], ids: str = "call"
          ) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A model node (asking for ``calls`` at once, ids ``{ids}_0``, ..., then answering) ->
    tools -> model."""
    model = GenericFakeChatModel(messages=iter([
        AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"{ids}_{n}",
                                   "type": "tool_call"} for n, (name, args) in enumerate(calls)]),
        AIMessage("done")]))

    def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", supervised.node())
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=InMemorySaver())


def tool_messages(result: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


PROMPT = {"messages": [HumanMessage("go")]}


@pytest.fixture
def supervised() -> Iterator[SupervisedTools]:
    with SupervisedTools(tools, tool_timeout=10) as made:
        yield made


def test_a_call_runs_under_supervision(supervised: SupervisedTools) -> None:
    (message,) = tool_messages(graph(supervised, ("add", {"a": 2, "b": 3})).invoke(PROMPT, CONFIG))
    assert (message.content, message.status, message.tool_call_id) == ("5", "success", "call_0")


def test_a_hung_sync_tool_returns_at_its_deadline_and_its_worker_is_killed() -> None:
    with capture_events() as events, SupervisedTools(tools) as supervised:
        result = asyncio.run(graph(supervised, ("hang", {})).ainvoke(PROMPT, CONFIG))
    (message,) = tool_messages(result)
    assert message.status == "error" and '"reason":"timeout"' in str(message.content)
    assert result["messages"][-1].content == "done"
    assert [e["tool_call_id"] for e in events if e["event"] == "worker_killed"
            and e["tool_call_id"] is not None] == ["call_0"]


def test_a_crash_and_a_reported_error_are_error_messages(supervised: SupervisedTools) -> None:
    crashed, refused = tool_messages(graph(supervised, ("crash", {}), ("refuse", {})).invoke(
        PROMPT, CONFIG))
    assert crashed.status == "error" and '"reason":"handler_raised"' in str(crashed.content)
    assert (refused.status, refused.content) == ("error", '{"error":"not today"}')


def test_a_question_interrupts_and_the_resume_answers_it(supervised: SupervisedTools) -> None:
    app = graph(supervised, ("deploy", {"target": "prod"}))
    (asked,) = app.invoke(PROMPT, CONFIG)["__interrupt__"]
    assert asked.value == {"toolvisor": "ask_user", "tool_call_id": "call_0",
                           "tool_name": "deploy", "question": "Deploy to prod?",
                           "options": ["yes", "no"]}
    (message,) = tool_messages(app.invoke(Command(resume="yes"), CONFIG))
    assert (message.content, message.status) == ("yes", "success")


@pytest.mark.parametrize("stored", [False, True], ids=["no store", "store"])
@pytest.mark.parametrize("invoke", ["invoke", "ainvoke"])
def test_a_wrong_answer_leaves_the_thread_at_its_question(
        tmp_path: Path, stored: bool, invoke: str) -> None:
    """LangGraph keeps a resume value the node refused and hands it back on every later
    run of the node: an answer off the options (or of another type) is asked again, with
    what was wrong, never raised; ``invoke(None)`` leaves the thread at the question, and the
    next answer that fits (keyed by the interrupt's id) completes it."""
    counter = tmp_path / "adds.txt"
    with pytest.MonkeyPatch.context() as patch, \
            SqliteRunStore(tmp_path / "s.db") as store, \
            SupervisedTools(tools, **({"store": store, "run_id": "thread-1"} if stored
                                      else {})) as supervised:
        patch.setenv("TOOLVISOR_TEST_COUNT", str(counter))
        app = graph(supervised, ("add", {"a": 1, "b": 2}), ("deploy", {"target": "prod"}))

        def resume(given: Any) -> dict[str, Any]:
            if invoke == "ainvoke":
                return dict(asyncio.run(app.ainvoke(given, CONFIG)))
            return dict(app.invoke(given, CONFIG))

        (asked,) = resume(PROMPT)["__interrupt__"]
        (again,) = resume(Command(resume="maybe"))["__interrupt__"]
        assert again.value == {**asked.value, "refused": "the answer to call_1 ('Deploy to "
                               "prod?') must be one of ['yes', 'no'], got 'maybe'"}
        (typed,) = resume(Command(resume=1))["__interrupt__"]
        assert typed.value["refused"].endswith("got 1") and typed.id != again.id
        (idle,) = resume(None)["__interrupt__"]  # LangGraph hands it the last answer again
        assert idle.value == typed.value
        added, deployed = tool_messages(resume(Command(resume={idle.id: "yes"})))
        assert (added.content, deployed.content) == ("3", "yes")
        assert "__interrupt__" not in resume(None)
    node_runs = len(counter.read_text().splitlines())
    assert node_runs == (1 if stored else 5)  # without a store, each run of the node runs it


def test_a_pending_key_interrupts_until_it_is_resolved(tmp_path: Path) -> None:
    with SqliteRunStore(tmp_path / "s.db") as store, \
            SupervisedTools(tools, store=store, run_id="thread-1") as supervised:
        app = graph(supervised, ("review", {"doc": "plan.md"}))
        (waiting,) = app.invoke(PROMPT, CONFIG)["__interrupt__"]
        key = waiting.value["completion_key"]
        assert waiting.value["toolvisor"] == "pending" and waiting.value["deadline"] == 3600
        (still,) = app.invoke(Command(resume=True), CONFIG)["__interrupt__"]
        assert still.value["completion_key"] == key
        assert store.resolve(key, ok={"approved": True}) == "accepted"
        (message,) = tool_messages(app.invoke(Command(resume=True), CONFIG))
    assert (message.content, message.status) == ('{"approved":true}', "success")


def count_adds(tmp_path: Path, store: SqliteRunStore | None) -> int:
    """Runs ``add`` and ``deploy`` in one node, resumes the question, counts ``add``'s runs."""
    counter = tmp_path / f"adds-{store is not None}.txt"
    settings: dict[str, Any] = {} if store is None else {"store": store, "run_id": "thread-1"}
    with pytest.MonkeyPatch.context() as patch, SupervisedTools(tools, **settings) as supervised:
        patch.setenv("TOOLVISOR_TEST_COUNT", str(counter))
        app = graph(supervised, ("add", {"a": 1, "b": 2}), ("deploy", {"target": "prod"}))
        assert app.invoke(PROMPT, CONFIG)["__interrupt__"]
        added, deployed = tool_messages(app.invoke(Command(resume="no"), CONFIG))
    assert (added.content, deployed.content) == ("3", "no")
    return len(counter.read_text().splitlines())


def test_with_a_store_a_rerun_node_replays_its_finished_calls(tmp_path: Path) -> None:
    assert count_adds(tmp_path, None) == 2  # LangGraph re-runs the node from its start
    with SqliteRunStore(tmp_path / "s.db") as store:
        assert count_adds(tmp_path, store) == 1


def test_a_halt_ends_the_graph_run(supervised: SupervisedTools) -> None:
    with pytest.raises(ToolHalted, match="halted the run: enough"):
        graph(supervised, ("stop", {})).invoke(PROMPT, CONFIG)


def test_the_langchain_tools_carry_the_schema_and_run_supervised(
        supervised: SupervisedTools) -> None:
    add = next(t for t in supervised.langchain_tools if t.name == "add")
    assert add.args == {"a": {"type": "integer"}, "b": {"type": "integer"}}
    assert add.invoke({"a": 4, "b": 5}) == "9"




_asked: dict[str, threading.Event] = {}
_confirmed: list[str] = []


@function_tool
def confirm(target: str, after: str = "") -> AskUser:
    """Asks before deploying to ``target``, once the call about ``after`` (if any) has asked:
    a first call slower than the second, which on main reached ``interrupt()`` first."""
    if after:
        _asked[after].wait(timeout=5)
    _confirmed.append(target)
    _asked[target].set()
    return AskUser(f"Deploy to {target}?", options=("yes", "no"))


@pytest.mark.parametrize("stored", [False, True], ids=["no store", "store"])
@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
@pytest.mark.parametrize("invoke", ["invoke", "ainvoke"])
def test_two_questions_of_one_node_each_get_their_own_answer(
        tmp_path: Path, invoke: str, keyed: bool, stored: bool) -> None:
    """A ``ToolNode`` runs its calls in parallel and LangGraph hands a task's resume values
    to its ``interrupt()``s in the order they are reached: the node's questions are asked one
    at a time in tool-call order, so ``yes`` then ``no`` answer the first call then the
    second on every run, whichever call's tool finishes first (plain or keyed by interrupt
    id), and a wrong answer to the first is asked again before the second is asked; with a
    store a replayed call takes back the resume values it took (the wrong one included), and
    under ``invoke`` (whose node waits for all its calls) each tool runs once over the node's
    four runs."""
    _confirmed.clear()
    with SqliteRunStore(tmp_path / "s.db") as store, \
            SupervisedTools([confirm], tool_timeout=10, **({"store": store, "run_id": "run"}
                                                           if stored else {})) as supervised:
        for run in range(20):
            prod, staging = f"prod-{run}", f"staging-{run}"
            _asked.update({prod: threading.Event(), staging: threading.Event()})
            app = graph(supervised, ("confirm", {"target": prod, "after": staging}),
                        ("confirm", {"target": staging}), ids=f"r{run}")
            config: Any = {"configurable": {"thread_id": f"thread-{run}"}}

            def resume(given: Any, config: Any = config, app: Any = app) -> dict[str, Any]:
                if invoke == "ainvoke":
                    return dict(asyncio.run(app.ainvoke(given, config)))
                return dict(app.invoke(given, config))

            (first,) = resume(PROMPT)["__interrupt__"]
            assert first.value["question"] == f"Deploy to {prod}?", run
            (again,) = resume(Command(resume={first.id: "maybe"} if keyed else "maybe"))[
                "__interrupt__"]
            assert again.value == {**first.value, "refused": again.value["refused"]}, run
            (second,) = resume(Command(resume={again.id: "yes"} if keyed else "yes"))[
                "__interrupt__"]
            assert second.value["question"] == f"Deploy to {staging}?", run
            done = resume(Command(resume={second.id: "no"} if keyed else "no"))
            assert "__interrupt__" not in done, run
            assert [(m.tool_call_id, m.content) for m in tool_messages(done)] == [
                (f"r{run}_0", "yes"), (f"r{run}_1", "no")], run
            if stored and invoke == "invoke":  # ainvoke's interrupted node leaves (cancels)
                assert sorted(_confirmed) == [prod, staging], run  # its other calls
            _confirmed.clear()


@pytest.mark.parametrize("invoke", ["invoke", "ainvoke"])
def test_a_pending_call_and_a_question_of_one_node_take_their_own_resumes(
        tmp_path: Path, invoke: str) -> None:
    """A pending call takes every resume the thread gives it while its key is unresolved,
    and replays take as many again: the question after it in the node gets only the answers
    given to it (a wrong one included), never the pending call's ``True``s."""
    with SqliteRunStore(tmp_path / "s.db") as store, \
            SupervisedTools(tools, store=store, run_id="thread-1") as supervised:
        app = graph(supervised, ("review", {"doc": "plan.md"}), ("deploy", {"target": "prod"}))

        def resume(given: Any) -> dict[str, Any]:
            if invoke == "ainvoke":
                return dict(asyncio.run(app.ainvoke(given, CONFIG)))
            return dict(app.invoke(given, CONFIG))

        (waiting,) = resume(PROMPT)["__interrupt__"]
        assert waiting.value["toolvisor"] == "pending"
        (still,) = resume(Command(resume=True))["__interrupt__"]
        assert still.value == waiting.value and still.id != waiting.id
        assert store.resolve(waiting.value["completion_key"], ok={"approved": True}) \
            == "accepted"
        (asked,) = resume(Command(resume=True))["__interrupt__"]
        assert asked.value == {"toolvisor": "ask_user", "tool_call_id": "call_1",
                               "tool_name": "deploy", "question": "Deploy to prod?",
                               "options": ["yes", "no"]}
        (again,) = resume(Command(resume="maybe"))["__interrupt__"]
        assert again.value["refused"].endswith("got 'maybe'")
        reviewed, deployed = tool_messages(resume(Command(resume={again.id: "no"})))
    assert (reviewed.content, deployed.content) == ('{"approved":true}', "no")


def test_calls_sent_to_their_own_tasks_ask_at_once(supervised: SupervisedTools) -> None:
    """A ``Send`` makes a task per call, each with its own resume values: their questions
    are not made to wait on each other (neither could see the other's call), and both are
    answered by interrupt id."""
    asked = AIMessage("", tool_calls=[
        {"name": "deploy", "args": {"target": target}, "id": f"call_{n}", "type": "tool_call"}
        for n, target in enumerate(["prod", "staging"])])
    builder = StateGraph(MessagesState)
    builder.add_node("model", lambda state: {"messages": [asked]})
    builder.add_node("tools", supervised.node())
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", lambda state: [
        Send("tools", [call]) for call in state["messages"][-1].tool_calls])
    app = builder.compile(checkpointer=InMemorySaver())
    interrupts = app.invoke(PROMPT, CONFIG)["__interrupt__"]
    by_question = {i.value["question"]: i.id for i in interrupts}
    assert sorted(by_question) == ["Deploy to prod?", "Deploy to staging?"]
    done = app.invoke(Command(resume={by_question["Deploy to prod?"]: "yes",
                                      by_question["Deploy to staging?"]: "no"}), CONFIG)
    assert sorted((m.tool_call_id, m.content) for m in tool_messages(done)) == [
        ("call_0", "yes"), ("call_1", "no")]
