"""ScriptedModel and FunctionModel: scripted responses for tests."""

from __future__ import annotations

import pytest

from toolvisor.contract import ModelRequest, ModelResponse, UserMessage
from toolvisor.testing import FunctionModel, ScriptedModel, call, calls
from toolvisor.testing._models import ScriptExhaustedError, ScriptNotFinishedError

REQUEST = ModelRequest(messages=(UserMessage(content="hi"),))


def test_scripted_model_answers_in_order_and_keeps_requests() -> None:
    first = calls(call("add", {"a": 1}, id="c1"), call("add", {"a": 2}, id="c2"))
    with ScriptedModel([first, "done"]) as model:
        assert model.respond(REQUEST) is first
        assert model.respond(REQUEST) == ModelResponse(text="done")
    assert model.requests == [REQUEST, REQUEST]
    assert [c.arguments for c in first.tool_calls] == [{"a": 1}, {"a": 2}]


def test_scripted_model_fails_loudly_when_asked_for_more() -> None:
    model = ScriptedModel(["only"])
    model.respond(REQUEST)
    with pytest.raises(ScriptExhaustedError, match="response 2 but the script has only 1"):
        model.respond(REQUEST)


def test_scripted_model_fails_loudly_when_steps_are_left() -> None:
    model = ScriptedModel(["a", "b"])
    model.respond(REQUEST)
    with pytest.raises(ScriptNotFinishedError, match="1 of 2 scripted responses were never used"):
        model.assert_finished()


def test_a_script_step_must_be_a_response_or_text() -> None:
    with pytest.raises(TypeError, match="a ModelResponse, a str, a ModelError or a function"):
        ScriptedModel([42])  # type: ignore[list-item]


def test_generated_call_ids_are_unique() -> None:
    assert len({call("t").id for _ in range(50)}) == 50


def test_function_model_decides_each_response() -> None:
    model = FunctionModel(lambda request: f"{len(request.messages)} messages")
    assert model.respond(REQUEST) == ModelResponse(text="1 messages")
    assert model.requests == [REQUEST]
