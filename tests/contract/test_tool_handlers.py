"""Handlers as they will be called: bound methods, partials, callable objects, a defaulted
ctx, and ``@tool`` on the methods of a class."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from pydantic import BaseModel

from toolvisor import CallContext, InvalidHandlerError, Ok, Tool, tool
from toolvisor.call import execute
from toolvisor.contract import ToolMethod
from toolvisor.executor import ToolRunner

SESSION = CallContext(session_id="s1")


class City(BaseModel):
    name: str


def lookup(db: str, arguments: City, ctx: CallContext | None = None) -> Ok:
    """Look a city up."""
    return Ok((db, arguments.name, None if ctx is None else ctx.session_id))


class Forecaster:
    """Forecasts cities."""

    def __init__(self, unit: str) -> None:
        self.unit = unit

    def plain(self, arguments: City) -> Ok:
        """A plain method."""
        return Ok(f"{arguments.name} in {self.unit}")

    def __call__(self, arguments: City, ctx: CallContext) -> Ok:
        return Ok((arguments.name, self.unit, ctx.session_id))


def test_a_defaulted_second_parameter_receives_ctx() -> None:
    def handler(arguments: dict[str, Any], ctx: CallContext | None = None) -> Ok:
        return Ok(None if ctx is None else ctx.session_id)

    assert execute(Tool(name="h", handler=handler), {}, SESSION) == Ok("s1")
    assert execute(tool(input_schema={"type": "object"})(handler), {}, SESSION) == Ok("s1")


@pytest.mark.parametrize(("handler", "arity", "expected"), [
    (Forecaster("C").plain, 1, "Oslo in C"),
    (functools.partial(lookup, "db1"), 2, ("db1", "Oslo", "s1")),
    (functools.partial(lookup, "db1", ctx=None), 1, ("db1", "Oslo", None)),
    (Forecaster("F"), 2, ("Oslo", "F", "s1")),
], ids=["bound_method", "partial", "partial_binding_ctx", "callable_object"])
def test_callables_are_read_as_they_will_be_called(handler: Any, arity: int,
                                                   expected: Any) -> None:
    built = tool(name="t")(handler)  # the annotation of `arguments` gives the schema
    assert (built.arity, built.arguments_type, built.input_schema["required"]) == (
        arity, City, ["name"])
    assert execute(built, {"name": "Oslo"}, SESSION) == Ok(expected)
    assert Tool(name="t", handler=handler).arity == arity


def test_a_partial_is_described_by_its_function_and_a_callable_object_by_its_class() -> None:
    assert tool(name="p")(functools.partial(lookup, "db")).description == "Look a city up."
    assert tool(name="c")(Forecaster("C")).description == "Forecasts cities."
    with pytest.raises(TypeError, match="has no __name__; pass name="):
        tool(functools.partial(lookup, "db"))


@pytest.mark.parametrize(("handler", "found"), [
    (Forecaster("C").plain, "not a bound method"),
    (functools.partial(lookup, "db"), "not a functools.partial"),
    (Forecaster("C"), "not a Forecaster object"),
])
def test_process_isolation_still_needs_a_module_level_function(handler: Any, found: str) -> None:
    with pytest.raises(ValueError, match="isolation='process' needs a handler importable by "
                                         f"qualified name \\(a module-level function\\), {found}"):
        Tool(name="t", handler=handler, isolation="process")


class Weather:
    """Tools as methods: each instance has its own."""

    def __init__(self, unit: str) -> None:
        self.unit = unit

    @tool(timeout=5)
    def forecast(self, arguments: City) -> Ok:
        """The forecast for a city."""
        return Ok(f"{arguments.name}: 20 {self.unit}")

    @tool(input_schema={"type": "object", "properties": {}})
    def whoami(self, arguments: dict[str, Any], ctx: CallContext) -> Ok:
        return Ok((self.unit, ctx.session_id))


def test_tool_on_a_method_gives_each_instance_its_own_bound_tool() -> None:
    celsius, fahrenheit = Weather("C"), Weather("F")
    assert isinstance(Weather.__dict__["forecast"], ToolMethod)
    assert isinstance(celsius.forecast, Tool) and celsius.forecast is celsius.forecast
    assert celsius.forecast is not fahrenheit.forecast
    built = celsius.forecast
    assert (built.name, built.timeout, built.arity, built.description) == (
        "forecast", 5, 1, "The forecast for a city.")
    assert built.input_schema["required"] == ["name"]
    assert execute(celsius.forecast, {"name": "Oslo"}) == Ok("Oslo: 20 C")
    assert execute(fahrenheit.whoami, {}, SESSION) == Ok(("F", "s1"))
    with ToolRunner() as runner:
        assert runner.run(fahrenheit.forecast, {"name": "Rome"}) == Ok("Rome: 20 F")


def test_a_method_tool_is_checked_when_the_class_body_runs() -> None:
    with pytest.raises(InvalidHandlerError, match="handler has arity 3"):
        class TooMany:
            @tool
            def m(self, a: Any, b: Any, c: Any) -> Ok:
                return Ok(1)

    with pytest.raises(InvalidHandlerError, match=r"defined in a class body.*takes no self"):
        class NoSelf:
            @tool
            def m() -> Ok:  # type: ignore[misc]
                return Ok(1)

    with pytest.raises(ValueError, match="isolation='process' needs a handler importable"):
        class InProcess:
            @tool(isolation="process")
            def m(self, arguments: Any) -> Ok:
                return Ok(1)


def test_a_method_tool_on_a_class_without_dict_says_what_to_do() -> None:
    class Slotted:
        __slots__ = ()

        @tool
        def m(self, arguments: City) -> Ok:
            return Ok(1)

    with pytest.raises(TypeError, match=r"no __dict__.*drop @tool from the method and build "
                                        r"the tool per instance: tool\(instance.m\)"):
        Slotted().m


def test_tool_refuses_what_is_already_a_tool() -> None:
    with pytest.raises(TypeError, match="is already a tool"):
        tool(Weather("C").forecast)
