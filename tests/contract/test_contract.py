"""The plain-data contract: results, ToolError, InvalidArguments, Tool and @tool."""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
from typing import Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from toolvisor import (
    AskUser,
    CallContext,
    Err,
    Halt,
    InvalidArguments,
    InvalidHandlerError,
    Ok,
    OpenSchemaWarning,
    Pending,
    Tool,
    ToolError,
    tool,
)
from toolvisor.contract import TOOL_ERROR_REASONS, Violation


def one(arguments: dict[str, Any]) -> Ok:
    return Ok(arguments)


def test_results_are_frozen_and_pattern_matchable() -> None:
    results: list[Any] = [Ok(1), Err("bad"), AskUser("sure?", ("yes", "no")), Halt("done", 3),
                          Pending(deadline=5)]
    seen = []
    for result in results:
        match result:
            case Ok(value):
                seen.append(("ok", value))
            case Err(reason):
                seen.append(("err", reason))
            case AskUser(question, options):
                seen.append(("ask", question, options))
            case Halt(reason, value):
                seen.append(("halt", reason, value))
            case Pending(deadline, on_timeout, on_cancel):
                seen.append(("pending", deadline, on_timeout, on_cancel))
    assert seen == [("ok", 1), ("err", "bad"), ("ask", "sure?", ("yes", "no")),
                    ("halt", "done", 3), ("pending", 5, "error_as_result", "ignore")]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Ok(1).value = 2  # type: ignore[misc]


def test_ask_user_options_are_a_tuple_of_strings() -> None:
    assert AskUser("q", ["a", "b"]).options == ("a", "b")  # type: ignore[arg-type]
    assert AskUser("q").options is None
    with pytest.raises(TypeError, match="options"):
        AskUser("q", "ab")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="question"):
        AskUser(3)  # type: ignore[arg-type]


def test_ask_user_refuses_an_option_given_twice() -> None:
    with pytest.raises(ValueError, match=r"AskUser.options repeats \['yes'\]: each option"):
        AskUser("Deploy?", ("yes", "no", "yes"))


@pytest.mark.parametrize("kwargs", [
    {"deadline": 0}, {"deadline": -1}, {"deadline": True}, {"on_timeout": "later"},
    {"on_cancel": "shrug"},
])
def test_pending_refuses_bad_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="Pending"):
        Pending(**kwargs)


def test_halt_needs_a_reason() -> None:
    with pytest.raises(TypeError, match="reason"):
        Halt("")


def test_tool_error_default_messages() -> None:
    assert ToolError("timeout").message == "tool error: timeout"
    assert str(ToolError("timeout", tool_name="fetch")) == "tool error (fetch): timeout"
    assert isinstance(ToolError("not_found"), Exception)


def test_tool_error_refuses_an_unknown_reason() -> None:
    with pytest.raises(ValueError, match="unknown ToolError reason 'oops'"):
        ToolError("oops")  # type: ignore[arg-type]


def test_the_six_reasons() -> None:
    assert {"handler_raised", "handler_exit", "timeout", "invalid_return", "encoding_failed",
            "not_found"} == TOOL_ERROR_REASONS


def test_tool_error_round_trips_through_json() -> None:
    error = ToolError("handler_raised", tool_name="t", tool_call_id="c1",
                      cause=ValueError("boom"), code="x", metadata={"attempt": 2})
    data = json.loads(json.dumps(error.to_dict()))
    again = ToolError.from_dict(data)
    assert again.reason == "handler_raised"
    assert again.message == "tool error (t): handler_raised"
    assert (again.tool_name, again.tool_call_id, again.code) == ("t", "c1", "x")
    assert again.cause == {"type": "ValueError", "message": "boom"}
    assert again.metadata == {"attempt": 2}
    assert again == ToolError.from_dict(again.to_dict())


def test_tool_error_from_dict_refuses_tampering() -> None:
    with pytest.raises(ValueError, match="unknown field"):
        ToolError.from_dict({"reason": "timeout", "evil": 1})
    with pytest.raises(ValueError, match="missing field 'reason'"):
        ToolError.from_dict({"message": "x"})
    with pytest.raises(ValueError, match="unknown ToolError reason"):
        ToolError.from_dict({"reason": "exploded"})


def test_tool_error_and_invalid_arguments_pickle_faithfully() -> None:
    error = ToolError("handler_exit", tool_name="t", cause=3, code="c")
    again = pickle.loads(pickle.dumps(error))
    assert again == error and again.cause == 3
    invalid = InvalidArguments("t", [Violation("$.a", "is required", "required")])
    assert pickle.loads(pickle.dumps(invalid)) == invalid


def test_invalid_arguments_lists_every_violation() -> None:
    invalid = InvalidArguments("t", [Violation("$.a", "bad a", "type"),
                                     Violation("$.b", "bad b", "type")])
    assert str(invalid) == "invalid arguments for tool 't': $.a: bad a; $.b: bad b"
    assert [v["path"] for v in invalid.for_model()["violations"]] == ["$.a", "$.b"]


# --- Tool and arity -------------------------------------------------------------------------

def zero() -> None: ...
def three(a: Any, b: Any, c: Any) -> None: ...
def star(*args: Any) -> None: ...
def kw_only(a: Any, *, must: Any) -> None: ...
def defaulted(a: Any, b: Any = 1, c: Any = 2) -> None: ...
def two(a: Any, ctx: Any) -> None: ...
def two_and_kw(a: Any, ctx: Any, *, extra: Any = None, **rest: Any) -> None: ...


@pytest.mark.parametrize(("handler", "found"), [(zero, "arity 0"), (three, "arity 3"),
                                               (star, "*args"), (kw_only, "keyword-only")])
def test_a_handler_of_the_wrong_arity_is_refused_when_the_tool_is_built(handler: Any,
                                                                        found: str) -> None:
    with pytest.raises(InvalidHandlerError, match=f"tool 'bad'.*{re.escape(found)}") as info:
        Tool(name="bad", handler=handler)
    assert isinstance(info.value, TypeError)
    with pytest.raises(InvalidHandlerError):
        tool(name="bad")(handler)


def all_defaulted(a: Any = None) -> None: ...


@pytest.mark.parametrize(("handler", "arity"), [(one, 1), (all_defaulted, 1), (defaulted, 2),
                                               (two, 2), (two_and_kw, 2), (lambda a: a, 1)])
def test_positional_parameters_up_to_two_are_the_arity(handler: Any, arity: int) -> None:
    assert Tool(name="t", handler=handler).arity == arity  # a defaulted second one gets ctx


def test_callable_objects_and_bound_methods_have_an_arity() -> None:
    class Service:
        def lookup(self, arguments: Any) -> Ok:
            return Ok(arguments)

        def __call__(self, arguments: Any, ctx: CallContext) -> Ok:
            return Ok(ctx)

    assert Tool(name="m", handler=Service().lookup).arity == 1
    assert Tool(name="c", handler=Service()).arity == 2


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"name": "has space"}, "tool name 'has space' is invalid"),
    ({"name": ""}, "tool name '' is invalid"),
    ({"name": "t", "scheduling": "soon"}, "scheduling must be"),
    ({"name": "t", "timeout": 0}, "timeout must be a positive"),
    ({"name": "t", "isolation": "vm"}, "isolation must be"),
    ({"name": "t", "input_schema": {"type": "array"}}, "must describe an object"),
    ({"name": "t", "input_schema": {"type": "object", "properties": {"a": {"type": 7}}}},
     "not a valid JSON schema"),
])
def test_bad_tool_configuration_is_a_clear_error(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        Tool(**kwargs)


@pytest.mark.parametrize("name", ["weather\n", "a" * 65, "dotted.name", "café", "\tx", "tab\t"])
def test_a_tool_name_outside_the_providers_rule_is_refused_naming_the_rule(name: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"tool name {name!r} is invalid: a name "
                                                   "must match [A-Za-z0-9_-]{1,64}")):
        Tool(name=name)


@pytest.mark.parametrize("name", ["a", "a" * 64, "get_weather-2", "X_9"])
def test_names_within_the_providers_rule_are_accepted(name: str) -> None:
    assert Tool(name=name).name == name


class Inner(BaseModel):
    n: int


class Outer(BaseModel):
    inner: Inner
    items: list[Inner]


@pytest.mark.parametrize(("schema", "dangling"), [
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "'#/$defs/missing'"),
    ({"type": "object", "$defs": {"A": {"$ref": "#/$defs/B"}}}, "'#/$defs/B'"),
    ({"type": "object", "properties": {"a": {"$ref": "#nowhere"}}}, "'#nowhere'"),
    ({"type": "object", "properties": {"a": {"$dynamicRef": "other.json"}}}, "'other.json'"),
    ({"type": "object", "allOf": [{"$ref": "https://example.com/s.json"}]},
     "'https://example.com/s.json'"),
])
def test_a_schema_with_a_ref_that_resolves_to_nothing_is_refused_naming_the_ref(
        schema: dict[str, Any], dangling: str) -> None:
    with pytest.raises(ValueError, match=f"tool 't': input_schema has 1 \\$ref.* resolve to "
                                         f"nothing: {re.escape(dangling)}; a ref must point"):
        Tool(name="t", input_schema=schema, handler=one)


def test_refs_into_the_schema_itself_are_accepted() -> None:
    schema = {
        "type": "object",
        "$defs": {"A": {"type": "string"}, "B": {"$anchor": "b", "type": "integer"}},
        "properties": {
            "a": {"$ref": "#/$defs/A"},
            "b": {"$ref": "#b"},
            "self": {"$ref": "#"},
            "scoped": {"$id": "https://example.com/scoped", "$defs": {"C": {"type": "null"}},
                       "properties": {"c": {"$ref": "#/$defs/C"}}},
            "by_id": {"$ref": "https://example.com/scoped#/$defs/C"},
            "data": {"const": {"$ref": "#/not/a/schema/keyword"}},
        },
    }
    assert Tool(name="t", input_schema=schema, handler=one).input_schema is schema

    def nested(arguments: Outer) -> Ok:
        return Ok(arguments)

    assert "$defs" in tool(nested).input_schema  # pydantic's refs resolve


async def async_handler(arguments: Any) -> Ok:
    return Ok(1)


def test_async_handlers_default_to_asyncio_isolation() -> None:
    assert Tool(name="a", handler=async_handler).isolation == "asyncio"
    assert Tool(name="s", handler=one).isolation == "thread"
    with pytest.raises(ValueError, match="async def handler needs isolation='asyncio'"):
        Tool(name="a", handler=async_handler, isolation="thread")
    with pytest.raises(ValueError, match="needs an async def handler"):
        Tool(name="s", handler=one, isolation="asyncio")


def test_process_isolation_needs_an_importable_handler() -> None:
    def nested(arguments: Any) -> Ok:
        return Ok(1)

    assert Tool(name="p", handler=one, isolation="process").isolation == "process"
    with pytest.raises(ValueError, match="importable by qualified name"):
        Tool(name="p", handler=nested, isolation="process")


# --- @tool ----------------------------------------------------------------------------------

class Search(BaseModel):
    query: str
    limit: int = 10


class Move(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Point:
    x: float
    y: float


def test_tool_derives_schema_and_description_from_a_pydantic_model() -> None:
    @tool
    def search(arguments: Search) -> Ok:
        """Search the web."""
        return Ok(arguments.query)

    assert search.name == "search"
    assert search.description == "Search the web."
    assert search.input_schema["required"] == ["query"]
    assert search.input_schema["properties"]["limit"]["type"] == "integer"
    assert search.arguments_type is Search
    assert search.spec.name == "search"


def test_tool_derives_schema_from_typed_dicts_and_dataclasses() -> None:
    @tool(name="move", timeout=2, scheduling="serial", retryable=True)
    def move_it(arguments: Move, ctx: CallContext) -> Ok:
        return Ok(arguments["x"])

    @tool
    def plot(arguments: Point) -> Ok:
        return Ok(arguments.x)

    assert move_it.name == "move" and move_it.arity == 2
    assert (move_it.timeout, move_it.scheduling, move_it.retryable) == (2, "serial", True)
    assert set(move_it.input_schema["required"]) == {"x", "y"}
    assert plot.input_schema["properties"]["x"]["type"] == "number"


def test_tool_without_annotations_takes_any_object() -> None:
    @tool(description="Echo.", input_schema={"type": "object", "required": ["a"]})
    def echo(arguments):  # type: ignore[no-untyped-def]
        return Ok(arguments)

    with pytest.warns(OpenSchemaWarning, match="tool 'plain'"):  # the model is told no field
        @tool
        def plain(arguments: dict[str, Any]) -> Ok:
            return Ok(arguments)

    assert echo.input_schema == {"type": "object", "required": ["a"]}
    assert echo.description == "Echo."
    assert plain.input_schema == {"type": "object"} and plain.arguments_type is None


class Opaque:
    pass


def test_tool_refuses_an_annotation_it_cannot_describe() -> None:
    def bad(arguments: Opaque) -> Ok:
        return Ok(1)

    with pytest.raises(TypeError, match="tool 'bad': cannot derive a JSON schema"):
        tool(bad)
