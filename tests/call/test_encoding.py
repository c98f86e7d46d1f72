"""``encode``: the text the model reads for each result."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from pydantic import BaseModel

from toolvisor import (
    AskUser,
    Err,
    Halt,
    InvalidArguments,
    Ok,
    Pending,
    Tool,
    ToolError,
)
from toolvisor.call import encode, encode_checked, execute
from toolvisor.call._budget import MAX_ERROR_BYTES
from toolvisor.contract import Violation


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


# --- the error cap: head and tail of an error kept, within 64 KiB ---

MARKER = re.compile(r"\n\.\.\.(\d+) bytes truncated\.\.\.\n")


def cut_ends(text: str) -> tuple[str, int, str]:
    """The head, the omitted byte count and the tail of a capped error text."""
    match = MARKER.search(text)
    assert match is not None, text[:200]
    return text[:match.start()], int(match.group(1)), text[match.end():]


def test_a_huge_exception_message_reaches_the_model_as_its_head_and_tail() -> None:
    message = "start " + "x" * 5_000_000 + " the end"

    def handler(arguments: Any) -> Ok:
        raise ValueError(message)

    result = execute(Tool(name="t", handler=handler), {})
    checked, text = encode_checked(result, tool_name="t", tool_call_id="c1")
    assert checked is result  # the policy sees the whole error
    assert isinstance(result, Err) and isinstance(result.reason, ToolError)
    assert str(result.reason.cause) == message
    assert len(text.encode()) <= MAX_ERROR_BYTES
    head, omitted, tail = cut_ends(text)
    assert head.startswith('{"error":{"reason":"handler_raised","message":"tool error (t): '
                           'handler_raised: ValueError: start xxx')
    assert tail.endswith('xxx the end"}}')
    assert len(head.encode()) + omitted + len(tail.encode()) == len(
        encode(result, max_error_bytes=None).encode())


@pytest.mark.parametrize("reason", [
    "é" * 40_000,                                   # two bytes a character
    "✓" * 30_000,                                   # three
    {"code": 7, "log": ["𝄞" * 10_000, "line"] * 4},  # four, inside a structure
], ids=["2-byte", "3-byte", "4-byte-nested"])
def test_an_err_over_the_cap_is_cut_on_character_boundaries(reason: Any) -> None:
    full = encode(Err(reason), max_error_bytes=None)
    text = encode(Err(reason), max_error_bytes=1000)
    head, omitted, tail = cut_ends(text)
    assert len(text.encode()) <= 1000
    assert full.startswith(head) and full.endswith(tail)  # whole characters only
    assert len(head.encode()) + omitted + len(tail.encode()) == len(full.encode())
    assert encode(Err(reason), max_error_bytes=1000) == text
    assert min(len(head.encode()), len(tail.encode())) >= 480  # both ends, half the room each


def test_errors_under_the_cap_and_outputs_of_any_size_are_not_cut() -> None:
    small = Err("y" * (MAX_ERROR_BYTES - 100))
    assert encode(small) == json.dumps({"error": small.reason}, separators=(",", ":"))
    big = "z" * (MAX_ERROR_BYTES * 2)
    assert encode(Ok(big)) is big  # outputs are the output budget's business
    assert len(encode(Err(big), max_error_bytes=None)) > MAX_ERROR_BYTES * 2


@pytest.mark.parametrize("cap", [0, 63, 64.5, True, "64"])
def test_a_bad_error_cap_is_refused_naming_it(cap: Any) -> None:
    with pytest.raises(ValueError, match="max_error_bytes must be an int of at least 64"):
        encode(Err("e"), max_error_bytes=cap)
    with pytest.raises(ValueError, match="max_error_bytes"):
        encode_checked(Ok(1), max_error_bytes=cap)
