"""ScriptedModel and FunctionModel: scripted responses for tests."""

from __future__ import annotations

import asyncio

import pytest

from toolvisor.contract import (
    AssistantMessage,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ToolResultMessage,
    UserMessage,
)
from toolvisor.testing import FunctionModel, ScriptedModel, call, calls
from toolvisor.testing._models import ScriptExhaustedError, ScriptNotFinishedError

REQUEST = ModelRequest(messages=(UserMessage(content="hi"),))


def after(request: ModelRequest, *answers: ModelResponse, attempt: int = 1) -> ModelRequest:
    """``request``'s conversation once the model gave ``answers`` (each call's result added)."""
    messages: list[Message] = list(request.messages)
    for answer in answers:
        messages.append(AssistantMessage(content=answer.text, tool_calls=answer.tool_calls))
        messages.extend(ToolResultMessage(tool_call_id=c.id, name=c.name, content="ok")
                        for c in answer.tool_calls)
    return ModelRequest(messages=tuple(messages), attempt=attempt)


def test_scripted_model_answers_each_turn_of_a_run_and_keeps_requests() -> None:
    first = calls(call("add", {"a": 1}, id="c1"), call("add", {"a": 2}, id="c2"))
    second = after(REQUEST, first)
    with ScriptedModel([first, "done"]) as model:
        assert model.respond(REQUEST) is first
        assert model.respond(second) == ModelResponse(text="done")
    assert model.requests == [REQUEST, second]
    assert [c.arguments for c in first.tool_calls] == [{"a": 1}, {"a": 2}]


def test_each_run_follows_the_script_from_its_own_start() -> None:
    first = calls(call("add", id="c1"))
    with ScriptedModel([first, "done"]) as model:
        assert model.respond(REQUEST) is first
        assert model.respond(REQUEST) is first  # another run: its own first turn
        assert model.respond(after(REQUEST, first)).text == "done"
        other = ModelRequest(messages=(UserMessage(content="other"),))
        assert model.respond(after(other, first)).text == "done"


def test_a_conversation_given_as_the_prompt_counts_only_the_runs_own_answers() -> None:
    earlier = after(REQUEST, calls(call("add", id="old")), ModelResponse(text="before"))
    prompt = ModelRequest(messages=(*earlier.messages, UserMessage(content="and now?")))
    assert ScriptedModel(["now"]).respond(prompt).text == "now"


def test_a_turns_scripted_errors_go_one_per_attempt_then_its_answer() -> None:
    first = calls(call("add", id="c1"))
    model = ScriptedModel([ModelError("rate_limited"), ModelError("timeout"), first,
                           ModelError("unavailable"), "done"])
    reasons = []
    for attempt in (1, 2):
        with pytest.raises(ModelError) as raised:
            model.respond(after(REQUEST, attempt=attempt))
        reasons.append(raised.value.reason)
    assert reasons == ["rate_limited", "timeout"]
    assert model.respond(after(REQUEST, attempt=3)) is first
    assert model.respond(after(REQUEST, attempt=4)) is first  # an unscripted retry: the answer
    with pytest.raises(ModelError, match="unavailable"):
        model.respond(after(REQUEST, first))
    assert model.respond(after(REQUEST, first, attempt=2)).text == "done"
    model.assert_finished()


def test_scripted_model_fails_loudly_when_asked_for_more() -> None:
    model = ScriptedModel(["only"])
    model.respond(REQUEST)
    with pytest.raises(ScriptExhaustedError,
                       match=r"turn 2 \(attempt 1\) of a run, which is step 2, but the script "
                             r"has only 1"):
        model.respond(after(REQUEST, ModelResponse(text="only")))


def test_scripted_model_fails_loudly_when_steps_are_left() -> None:
    model = ScriptedModel(["a", "b"])
    model.respond(REQUEST)
    model.respond(REQUEST)  # a second run that also stops after one turn
    assert model.remaining == 1
    with pytest.raises(ScriptNotFinishedError,
                       match=r"1 of 2 scripted responses were never used \(no run got past "
                             r"step 1\)"):
        model.assert_finished()


def test_a_script_per_prompt() -> None:
    model = ScriptedModel({"hi": ["hello"], "bye": [ModelError("timeout"), "goodbye"]})
    bye = ModelRequest(messages=(UserMessage(content="bye"),), attempt=2)
    assert model.respond(bye).text == "goodbye"
    with pytest.raises(ScriptNotFinishedError, match="1 of 1 scripted responses for prompt "
                                                     "'hi' were never used"):
        model.assert_finished()
    assert model.respond(REQUEST).text == "hello"
    model.assert_finished()
    with pytest.raises(ScriptExhaustedError, match="prompt 'other', which no script covers; "
                                                   "the scripts are for \\['bye', 'hi'\\]"):
        model.respond(ModelRequest(messages=(UserMessage(content="other"),)))
    with pytest.raises(TypeError, match=r"maps prompts \(str\) to scripts, got int"):
        ScriptedModel({1: ["x"]})  # type: ignore[dict-item]


def test_a_script_step_must_be_a_response_or_text() -> None:
    with pytest.raises(TypeError, match="a ModelResponse, a str, a ModelError or a function"):
        ScriptedModel([42])  # type: ignore[list-item]


def test_generated_call_ids_are_unique() -> None:
    assert len({call("t").id for _ in range(50)}) == 50


def test_function_model_decides_each_response() -> None:
    model = FunctionModel(lambda request: f"{len(request.messages)} messages")
    assert model.respond(REQUEST) == ModelResponse(text="1 messages")
    assert model.requests == [REQUEST]


def test_a_function_model_told_not_to_keep_requests_keeps_none() -> None:
    model = FunctionModel(lambda request: "ok", keep_requests=False)

    async def answer(request: ModelRequest) -> str:
        return "ok"

    async_model = FunctionModel(answer, keep_requests=False)
    assert model.respond(REQUEST) == ModelResponse(text="ok")
    assert asyncio.run(async_model.arespond(REQUEST)) == ModelResponse(text="ok")
    assert model.requests == [] and async_model.requests == []
