"""``encode``: the text the model reads for each result."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from pydantic import BaseModel

from toolvisor import AskUser, Err, Halt, InvalidArguments, Ok, Pending, ToolError, encode
from toolvisor.contract import Violation
from toolvisor.executor import encode_checked


class Weather(BaseModel):
    city: str
    celsius: float


@dataclasses.dataclass
class Reading:
    value: int


@pytest.mark.parametrize(("result", "text"), [
    (Ok("plain text stays as it is"), "plain text stays as it is"),
    (Ok({"a": [1, 2]}), '{"a":[1,2]}'),
    (Ok(None), "null"),
    (Ok(Weather(city="Oslo", celsius=-3.5)), '{"city":"Oslo","celsius":-3.5}'),
    (Ok(Reading(3)), '{"value":3}'),
    (Ok("ünïcödé ✓"), "ünïcödé ✓"),
    (Err("disk full"), '{"error":"disk full"}'),
    (Err(ValueError("bad")), '{"error":{"type":"ValueError","message":"bad"}}'),
    (AskUser("Proceed?", ("yes", "no")), '{"ask_user":"Proceed?","options":["yes","no"]}'),
    (Halt("done", {"n": 1}), '{"halt":"done","result":{"n":1}}'),
    (Pending(deadline=2.5), '{"pending":true,"deadline":2.5,"on_timeout":"error_as_result",'
                            '"on_cancel":"ignore"}'),
])
def test_every_legal_result_encodes_to_json_text(result: Any, text: str) -> None:
    assert encode(result) == text


def test_errors_show_the_model_reason_and_message_never_a_traceback() -> None:
    crash = ToolError("handler_raised", tool_name="t", cause=KeyError("k"))
    body = json.loads(encode(Err(crash)))["error"]
    assert body == {"reason": "handler_raised", "message": "tool error (t): handler_raised",
                    "detail": "KeyError: 'k'"}
    invalid = InvalidArguments("t", [Violation("$.a", "'a' is a required property",
                                               "required")])
    assert json.loads(encode(Err(invalid)))["error"]["violations"] == [
        {"path": "$.a", "message": "'a' is a required property", "validator": "required"}]


def test_an_unencodable_value_is_encoding_failed_with_the_cause() -> None:
    with pytest.raises(ToolError) as info:
        encode(Ok({"handle": object()}))
    assert info.value.reason == "encoding_failed" and info.value.cause is not None


def test_encode_checked_turns_an_unencodable_result_into_an_error_result() -> None:
    ok = Ok([1])
    assert encode_checked(ok) == (ok, "[1]")
    result, text = encode_checked(Ok({1, object()}), tool_name="t", tool_call_id="c")
    assert isinstance(result, Err) and isinstance(result.reason, ToolError)
    assert (result.reason.reason, result.reason.tool_name, result.reason.tool_call_id) == (
        "encoding_failed", "t", "c")
    assert json.loads(text)["error"]["reason"] == "encoding_failed"


def test_encode_refuses_what_is_not_a_result() -> None:
    with pytest.raises(TypeError, match="takes a handler result"):
        encode(42)  # type: ignore[arg-type]
