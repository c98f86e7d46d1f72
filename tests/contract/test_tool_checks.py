"""What ``@tool`` catches when it builds a tool, instead of letting the model find out: arguments
that describe no field (a warning), a return annotation that is no handler result, and a plain
function's parameters where ``@tool`` expects one arguments object (both refused, pointing to
``function_tool``)."""

from __future__ import annotations

import typing
import warnings
from collections.abc import Mapping
from typing import Any, NoReturn, TypeVar

import pytest
from pydantic import BaseModel

from toolvisor import (
    AskUser,
    CallContext,
    Err,
    InvalidHandlerError,
    Ok,
    OpenSchemaWarning,
    Pending,
    ToolvisorError,
    UndescribedToolWarning,
    function_tool,
    tool,
)
from toolvisor.call import execute
from toolvisor.contract import HandlerResult


class City(BaseModel):
    city: str


def bare(arguments: dict) -> Ok:  # type: ignore[type-arg]
    return Ok()


def any_typed(arguments: Any) -> Ok:
    return Ok()


def parameterised(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    return Ok()


def mapping(arguments: Mapping[str, object]) -> Ok:
    return Ok()


def unannotated(arguments):  # type: ignore[no-untyped-def]
    return Ok()


@pytest.mark.parametrize(("handler", "typed"), [
    (bare, "typed dict"), (any_typed, "typed Any"), (parameterised, "typed dict[str, Any]"),
    (mapping, "typed Mapping[str, object]"), (unannotated, "not annotated")])
def test_arguments_that_describe_no_field_warn_naming_the_fixes(handler: Any, typed: str) -> None:
    with pytest.warns(OpenSchemaWarning) as caught:
        built = tool(handler)
    assert built.input_schema == {"type": "object"}  # built all the same
    (warning,) = caught
    message = str(warning.message)
    assert f"tool {handler.__name__!r}: the handler's arguments are {typed}" in message
    assert 'told only {"type": "object"}' in message
    assert "an arguments model (a pydantic model, TypedDict or dataclass)" in message
    assert "pass input_schema=" in message and "@function_tool" in message
    assert warning.filename == __file__  # it points at the line that built the tool


def test_the_warning_is_a_named_user_warning_that_can_be_filtered() -> None:
    assert issubclass(OpenSchemaWarning, UserWarning)
    assert issubclass(OpenSchemaWarning, ToolvisorError)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=OpenSchemaWarning)
        assert tool(bare).input_schema == {"type": "object"}


def test_a_decorated_method_and_a_parameterised_decorator_warn_at_the_callers_line() -> None:
    with pytest.warns(OpenSchemaWarning) as caught:
        class Holder:
            @tool(timeout=5)
            def m(self, arguments: dict[str, Any]) -> Ok:
                return Ok()
    assert [w.filename for w in caught] == [__file__]
    assert Holder.__dict__["m"].template.timeout == 5


def test_nothing_warns_where_the_model_is_told_the_fields_or_never_sees_the_tool() -> None:
    def typed(arguments: City) -> Ok:
        return Ok()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tool(typed)
        tool(input_schema={"type": "object", "properties": {}})(bare)
        tool(internal=True)(bare)

        @function_tool
        def plain(city: str) -> str:
            """Answer plainly."""
            return city

        @function_tool
        def no_arguments() -> str:
            """Take no arguments."""
            return ""

    assert no_arguments.input_schema == {"type": "object", "properties": {},
                                         "additionalProperties": False}


def test_function_tool_warns_of_a_parameter_the_model_is_told_no_type_of() -> None:
    def find(city, near: Any, limit: int = 3) -> str:  # type: ignore[no-untyped-def]
        """Find places."""
        return str(city)

    with pytest.warns(OpenSchemaWarning) as warned:
        built = function_tool(find)
    assert len(warned) == 1 and warned[0].filename == __file__
    assert str(warned[0].message).startswith(
        "tool 'find': the parameters ['city', 'near'] of "
        "test_function_tool_warns_of_a_parameter_the_model_is_told_no_type_of.<locals>.find "
        "are not annotated (or Any), so the model is told nothing of their type")
    assert built.input_schema["properties"]["city"] == {}  # what the warning is about


def test_function_tool_warns_of_a_tool_it_cannot_describe() -> None:
    def find(city: str) -> str:
        return city

    with pytest.warns(UndescribedToolWarning, match=r"'find': .* has no docstring and no "
                                                    r"description= was given") as warned:
        function_tool(find)
    assert len(warned) == 1 and warned[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        function_tool(description="Find a city.")(find)
        function_tool(internal=True)(find)  # never offered to a model


def test_a_tool_that_fails_to_build_does_not_warn_first() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="output_window"):
            tool(output_window="middle")(bare)  # type: ignore[call-overload]


def returns_dict(arguments: City) -> dict[str, Any]:
    return {}


def returns_none(arguments: City) -> None:
    return None


def returns_text(arguments: City) -> str:
    return ""


def returns_list(arguments: City) -> list[Ok]:
    return []


def returns_some(arguments: City) -> Ok | dict[str, Any]:
    return Ok()


async def returns_later(arguments: City) -> str:
    return ""


@pytest.mark.parametrize(("handler", "spelled"), [
    (returns_dict, "dict[str, Any]"), (returns_none, "None"), (returns_text, "str"),
    (returns_list, "list[Ok]"), (returns_some, "Ok | dict[str, Any]"),
    (returns_later, "str")])
def test_a_return_annotation_that_is_no_handler_result_is_refused(handler: Any,
                                                                  spelled: str) -> None:
    with pytest.raises(InvalidHandlerError) as refused:
        tool(handler)
    message = str(refused.value)
    assert f"tool {handler.__name__!r}: the handler is annotated to return {spelled}," in message
    assert "invalid_return on every call" in message
    assert "Ok(...)" in message and "@function_tool" in message
    assert isinstance(refused.value, TypeError)


class Answer(Ok):
    __slots__ = ()


T = TypeVar("T")


def returns_ok(arguments: City) -> Ok:
    return Ok()


def returns_union(arguments: City) -> Ok | Err | AskUser:
    return Ok()


def returns_alias(arguments: City) -> HandlerResult:
    return Ok()


def returns_subclass(arguments: City) -> Answer:
    return Answer()


def returns_any(arguments: City) -> Any:
    return Ok()


def returns_object(arguments: City) -> object:
    return Ok()


def returns_never(arguments: City) -> NoReturn:
    raise RuntimeError


def returns_typevar(arguments: T) -> T:
    return arguments


def returns_optional(arguments: City) -> typing.Optional[Pending]:  # noqa: UP045
    return None


def returns_nothing_said(arguments: City):  # type: ignore[no-untyped-def]
    return Ok()


async def returns_ok_later(arguments: City) -> Ok:
    return Ok()


@pytest.mark.parametrize("handler", [
    returns_ok, returns_union, returns_alias, returns_subclass, returns_any, returns_object,
    returns_never, returns_typevar, returns_nothing_said, returns_ok_later],
    ids=lambda h: h.__name__)
def test_handler_results_any_and_no_annotation_are_accepted(handler: Any) -> None:
    assert tool(handler).handler is handler


def test_optional_pending_is_refused_for_its_none() -> None:
    with pytest.raises(InvalidHandlerError, match=r"annotated to return Optional\[Pending\],"):
        tool(returns_optional)


def test_the_runtime_rules_of_tool_are_unchanged_for_what_is_not_annotated() -> None:
    built = tool(returns_nothing_said)
    assert execute(built, {"city": "Oslo"}) == Ok()
    lying = tool(name="lying", input_schema={"type": "object"})(lambda arguments: {"a": 1})
    error = execute(lying, {})
    assert isinstance(error, Err) and error.reason.reason == "invalid_return"


def test_a_plain_functions_parameter_under_tool_points_to_function_tool() -> None:
    def weather(city: str) -> Ok:
        return Ok(city)

    with pytest.raises(InvalidHandlerError) as refused:
        tool(weather)
    message = str(refused.value)
    assert ("tool 'weather': @tool passes the model's arguments, one JSON object, to the "
            "handler's first parameter, but 'city' is annotated str (JSON schema type "
            "'string')") in message
    assert "use @function_tool" in message and "one arguments model" in message


def test_a_second_parameter_that_is_no_context_points_to_function_tool() -> None:
    def weather(city: City, units: str) -> Ok:
        return Ok()

    with pytest.raises(InvalidHandlerError) as refused:
        tool(weather)
    message = str(refused.value)
    assert ("second parameter 'units' receives the CallContext, but it is annotated str"
            in message)
    assert "(city, units, ...), use @function_tool" in message


def test_more_parameters_than_tool_takes_point_to_function_tool() -> None:
    def trip(origin: str, destination: str, days: int) -> Ok:
        return Ok()

    def today() -> Ok:
        return Ok()

    with pytest.raises(InvalidHandlerError, match=r"handler has arity 3; .*use @function_tool"):
        tool(trip)
    with pytest.raises(InvalidHandlerError, match=r"arity 0; .*use @function_tool"):
        tool(today)


def test_a_second_parameter_typed_loosely_is_still_the_context() -> None:
    def loose(arguments: City, ctx: Any) -> Ok:
        return Ok()

    def optional(arguments: City, ctx: CallContext | None = None) -> Ok:
        return Ok()

    def untyped(arguments: City, ctx) -> Ok:  # type: ignore[no-untyped-def]
        return Ok()

    for handler in (loose, optional, untyped):
        assert tool(handler).arity == 2
