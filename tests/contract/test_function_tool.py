"""``function_tool``: a plain typed function as a tool, described by its signature and docstring,
run by the same ``execute`` and isolations as any tool."""

from __future__ import annotations

import asyncio
import functools
import os
import tempfile
from collections.abc import Iterator
from types import ModuleType
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from tests.support import function_tools as ft
from toolvisor import (
    Agent,
    AskUser,
    CallContext,
    Completed,
    Err,
    Halt,
    InvalidArguments,
    InvalidHandlerError,
    Ok,
    Pending,
    Suspended,
    Tool,
    ToolCall,
    ToolError,
    UndescribedToolWarning,
    function_tool,
    tool,
)
from toolvisor.call import execute
from toolvisor.contract import HandlerResult, ToolMethod
from toolvisor.executor import ToolRunner
from toolvisor.isolation import prepare_process_isolation
from toolvisor.testing import ScriptedModel, call, calls

SESSION = CallContext(session_id="s1", tool_call=ToolCall(id="call-1", name="t"))


def error_of(result: HandlerResult) -> ToolError:
    assert isinstance(result, Err) and isinstance(result.reason, ToolError), result
    return result.reason


def violations_of(result: HandlerResult) -> list[tuple[str, str]]:
    assert isinstance(result, Err) and isinstance(result.reason, InvalidArguments), result
    return [(v.path, v.validator) for v in result.reason.violations]


@function_tool
def weather(city: str, units: Literal["metric", "imperial"] = "metric") -> str:
    """Today's weather in a city.

    Args:
        city: The city's name.
        units: The units to report in.
    """
    return f"{city}: 21 C"


def test_the_parameters_are_the_schema_and_the_docstring_describes_them() -> None:
    assert isinstance(weather, Tool)
    assert weather.description == "Today's weather in a city."
    assert weather.input_schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city's name."},
            "units": {"type": "string", "enum": ["metric", "imperial"], "default": "metric",
                      "description": "The units to report in."},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    assert execute(weather, {"city": "Oslo"}) == Ok("Oslo: 21 C")


def test_its_handler_keeps_the_execute_contract() -> None:
    """The handler is an arity-2 wrapper; ``Tool`` checks it as any handler."""
    assert (weather.arity, weather.is_async, weather.isolation) == (2, False, "thread")
    assert weather.handler is not None and weather.handler.__qualname__ == "weather"
    assert Tool(name="again", handler=weather.handler).arity == 2


def test_arguments_that_do_not_fit_never_reach_the_function() -> None:
    assert violations_of(execute(weather, {})) == [("$", "required")]
    assert violations_of(execute(weather, {"city": "Oslo", "units": "kelvin"})) == [
        ("$.units", "enum")]
    assert violations_of(execute(weather, {"city": "Oslo", "cty": "Oslo"})) == [
        ("$", "additionalProperties")]  # a misspelt argument is told, not dropped


GOOGLE = '''Convert an amount between currencies.

    Rates are today's.

    Args:
        amount: How much to convert.
        currency (str): The ISO code to convert
            into.

    Returns:
        The converted amount.
    '''
NUMPY = '''Convert an amount between currencies.

    Rates are today's.

    Parameters
    ----------
    amount : float
        How much to convert.
    currency : str
        The ISO code to convert
        into.

    Returns
    -------
    float
        The converted amount.
    '''
SPHINX = '''Convert an amount between currencies.

    Rates are today's.

    :param amount: How much to convert.
    :param currency: The ISO code to convert
        into.
    :returns: The converted amount.
    '''


@pytest.mark.parametrize("docstring", [GOOGLE, NUMPY, SPHINX], ids=["google", "numpy", "sphinx"])
def test_each_docstring_style_describes_the_parameters(docstring: str) -> None:
    def convert(amount: float, currency: str = "EUR") -> float:
        return amount

    convert.__doc__ = docstring
    built = function_tool(convert)
    properties = built.input_schema["properties"]
    assert built.description == "Convert an amount between currencies.\n\nRates are today's."
    assert properties["amount"] == {"type": "number", "description": "How much to convert."}
    assert properties["currency"]["description"] == "The ISO code to convert\ninto."


def test_without_a_docstring_nothing_is_described_and_options_name_and_describe() -> None:
    def lookup(key: str) -> str:
        return key

    with pytest.warns(UndescribedToolWarning, match="'lookup': .*lookup has no docstring"):
        bare = function_tool(lookup)
    assert bare.description == "" and bare.input_schema["properties"] == {
        "key": {"type": "string"}}
    named = function_tool(name="find", description="Find a key.")(lookup)
    assert (named.name, named.description) == ("find", "Find a key.")


def test_a_docstring_the_parser_cannot_read_is_kept_whole() -> None:
    def tagged(tag: str) -> str:
        """Tag something.

        Args:
            tag The tag, without its colon.
        """
        return tag

    built = function_tool(tagged)
    assert built.description.startswith("Tag something.") and "tag The tag" in built.description
    assert "description" not in built.input_schema["properties"]["tag"]


def test_a_call_context_parameter_gets_the_context_and_is_not_in_the_schema() -> None:
    @function_tool
    def first(ctx: CallContext, city: str) -> tuple[str | None, str]:
        """Name the session and the city."""
        return ctx.session_id, city

    @function_tool
    def keyword(city: str, *, ctx: CallContext) -> tuple[str | None, str]:
        """Name the session and the city."""
        return ctx.session_id, city

    for built in (first, keyword):
        assert list(built.input_schema["properties"]) == ["city"]
        assert execute(built, {"city": "Oslo"}, SESSION) == Ok(("s1", "Oslo"))


def test_plain_values_become_ok_and_handler_results_pass_through_as_they_are() -> None:
    answers: list[Any] = [Ok(1), Err("reported"), AskUser("sure?", ("yes", "no")),
                          Halt("done", {"n": 1})]

    @function_tool
    def answer(index: int) -> Any:
        """Give the answer at an index."""
        return answers[index] if index >= 0 else {"plain": [1, 2]}

    assert execute(answer, {"index": -1}) == Ok({"plain": [1, 2]})
    for index, given in enumerate(answers):
        assert execute(answer, {"index": index}) is given
    nothing = function_tool(name="nothing", description="Nothing.")(lambda: None)
    assert execute(nothing, {}) == Ok(None)


def test_pending_passes_through_to_the_executors_own_check() -> None:
    """Not ``Ok(Pending(...))``: without a completion key the executor refuses it, as always."""
    @function_tool
    def later() -> Pending:
        """Answer later."""
        return Pending(deadline=5)

    error = error_of(execute(later, {}))
    assert (error.reason, error.code) == ("invalid_return", "pending_tool_missing_completion_key")


def test_a_pending_function_tool_parks_on_its_key_in_a_durable_run() -> None:
    @function_tool
    def charge(amount: int, ctx: CallContext) -> Pending:
        """Charge a card; the provider calls back."""
        ctx.completion_key()
        return Pending(deadline=60)

    model = ScriptedModel([calls(call("charge", {"amount": 42})), "charged"])
    with tempfile.TemporaryDirectory() as tmp, \
            Agent(model, [charge], store=f"{tmp}/runs.sqlite") as agent:
        waiting = agent.run("charge 42")
        assert isinstance(waiting, Suspended)
        (key,) = waiting.keys.values()
        assert agent.resolve(key, ok={"status": "paid"}) == "accepted"
        outcome = agent.resume_run(waiting.run_id)
    assert isinstance(outcome, Completed) and outcome.text == "charged"


def test_a_raise_is_handler_raised_with_the_exception() -> None:
    @function_tool
    def fails(reason: str) -> str:
        """Fail."""
        raise LookupError(reason)

    error = error_of(execute(fails, {"reason": "gone"}))
    assert error.reason == "handler_raised"
    assert isinstance(error.cause, LookupError) and str(error.cause) == "gone"


class Box(BaseModel):
    width: int
    height: int = 1


def test_parameter_types_are_converted_and_any_name_or_kind_works() -> None:
    @function_tool
    def area(box: Box, /, json: int = 0, _scale: int = 1, *,
             model_config: Annotated[str, Field(description="A name pydantic reserves.")] = "m",
             tags: list[str] | None = None) -> tuple[int, int, str, list[str] | None]:
        """The area of a rectangle."""
        return box.width * box.height * _scale, json, model_config, tags

    properties = area.input_schema["properties"]
    assert list(properties) == ["box", "json", "_scale", "model_config", "tags"]
    assert properties["model_config"]["description"] == "A name pydantic reserves."
    assert area.input_schema["required"] == ["box"]
    assert execute(area, {"box": {"width": 3}, "_scale": 2, "tags": ["a"]}) == Ok(
        (6, 0, "m", ["a"]))
    assert violations_of(execute(area, {"box": {"width": "wide"}})) == [
        ("$.box.width", "type")]


def test_an_async_function_runs_under_asyncio_isolation() -> None:
    @function_tool
    async def pause(seconds: float, ctx: CallContext) -> str | None:
        """Pause a while."""
        await asyncio.sleep(seconds)
        return ctx.session_id

    assert (pause.is_async, pause.isolation) == (True, "asyncio")
    with pytest.raises(ValueError, match="needs isolation='asyncio'"):
        function_tool(isolation="thread")(pause.handler)  # type: ignore[arg-type]
    with ToolRunner() as runner:
        assert runner.run(pause, {"seconds": 0}, SESSION) == Ok("s1")


def test_every_tool_option_is_taken_as_tool_takes_it() -> None:
    def hook(call: ToolCall, key: str) -> None: ...

    options: dict[str, Any] = {
        "name": "fetch_page", "timeout": 5, "retryable": True, "scheduling": "serial",
        "isolation": "thread", "internal": True, "output_window": "tail", "on_cancel": hook}

    def fetch(url: str) -> str:
        """Fetch a page."""
        return url

    def fetch_handler(arguments: Box) -> Ok:
        return Ok()

    built, reference = function_tool(**options)(fetch), tool(**options)(fetch_handler)
    fields = ("name", "timeout", "retryable", "scheduling", "isolation", "internal",
              "output_window", "on_cancel", "manual", "options")
    assert [getattr(built, f) for f in fields] == [getattr(reference, f) for f in fields]
    with pytest.raises(ValueError, match="timeout must be a positive, finite number"):
        function_tool(timeout=-1)(fetch)
    with pytest.raises(ValueError, match="isolation='thread' takes no options"):
        function_tool(options={"num_cpus": 1})(fetch)
    with pytest.raises(ValueError, match="tool name 'bad name' is invalid"):
        function_tool(name="bad name")(fetch)


class Thermostat:
    """Method tools: each instance's tools act on it."""

    def __init__(self, unit: str) -> None:
        self.unit = unit
        self.set_to: list[int] = []

    @function_tool(timeout=5)
    def set_temperature(self, degrees: int, ctx: CallContext) -> str:
        """Set the temperature.

        Args:
            degrees: The new temperature.
        """
        self.set_to.append(degrees)
        return f"{degrees} {self.unit} for {ctx.session_id}"

    @function_tool
    async def reading(self) -> str:
        """The current reading."""
        return f"{self.set_to[-1] if self.set_to else 20} {self.unit}"


def test_a_method_becomes_a_tool_per_instance_without_self_in_the_schema() -> None:
    celsius, fahrenheit = Thermostat("C"), Thermostat("F")
    assert isinstance(Thermostat.__dict__["set_temperature"], ToolMethod)
    assert celsius.set_temperature is celsius.set_temperature
    assert celsius.set_temperature is not fahrenheit.set_temperature
    built = celsius.set_temperature
    assert (built.name, built.timeout, built.arity, built.description) == (
        "set_temperature", 5, 2, "Set the temperature.")
    assert built.input_schema["properties"] == {
        "degrees": {"type": "integer", "description": "The new temperature."}}
    assert execute(celsius.set_temperature, {"degrees": 21}, SESSION) == Ok("21 C for s1")
    assert celsius.set_to == [21] and fahrenheit.set_to == []
    assert celsius.reading.isolation == "asyncio"
    with ToolRunner() as runner:
        assert runner.run(celsius.reading, {}) == Ok("21 C")
        assert runner.run(fahrenheit.reading, {}) == Ok("20 F")


def test_what_cannot_become_a_function_tool_is_refused_saying_why() -> None:
    def spread(*cities: str) -> str:
        return ""

    def loose(**options: str) -> str:
        return ""

    def twice(a: CallContext, b: CallContext) -> str:
        return ""

    def stream(city: str) -> Iterator[str]:
        yield city

    def opaque(handle: ModuleType) -> str:
        return ""

    def unresolved(city: Nowhere) -> str:  # type: ignore[name-defined]  # noqa: F821
        return ""

    with pytest.raises(InvalidHandlerError, match=r"cannot take \*args or \*\*kwargs"):
        function_tool(spread)
    with pytest.raises(InvalidHandlerError, match=r"cannot take \*args or \*\*kwargs"):
        function_tool(loose)
    with pytest.raises(InvalidHandlerError, match="two parameters annotated CallContext"):
        function_tool(twice)
    with pytest.raises(InvalidHandlerError, match=r"generator function.*return the value"):
        function_tool(stream)
    with pytest.raises(TypeError, match=r"tool 'opaque': cannot describe the parameters of "
                                        r"test_what.*<locals>\.opaque to the model"):
        function_tool(opaque)
    with pytest.raises(TypeError, match="tool 'unresolved': cannot resolve the type hints"):
        function_tool(unresolved)
    with pytest.raises(TypeError, match=r"needs a def or async def function.*use @tool"):
        function_tool(functools.partial(spread, "Oslo"))
    with pytest.raises(TypeError, match="already a tool"):
        function_tool(weather)  # type: ignore[arg-type]
    with pytest.raises(InvalidHandlerError, match=r"defined in a class body.*takes no self"):
        class NoSelf:
            @function_tool
            def m() -> str:  # type: ignore[misc]
                return ""


def test_process_isolation_needs_the_function_at_module_level() -> None:
    def nested(city: str) -> str:
        """A nested function."""
        return city

    with pytest.raises(ValueError, match="isolation='process' needs a handler importable"):
        function_tool(isolation="process")(nested)


def test_a_function_tool_runs_in_an_agent() -> None:
    model = ScriptedModel([calls(call("weather", {"city": "Oslo"}, id="w")), "Mild."])
    with Agent(model, [weather]) as agent:
        outcome = agent.run("weather in Oslo?")
    assert isinstance(outcome, Completed) and outcome.text == "Mild."
    (result,) = [m for m in outcome.messages if m.role == "tool"]
    assert result.content == "Oslo: 21 C"


@pytest.fixture(scope="module")
def _process_helpers() -> None:
    """The forkserver and resource tracker live for the whole session: start them before any
    test's leak snapshot."""
    prepare_process_isolation()


@pytest.fixture
def processes(_process_helpers: None) -> Iterator[ToolRunner]:
    with ToolRunner(tool_timeout=10.0, process_workers=1) as runner:
        yield runner


def test_function_tools_run_in_a_worker_process(processes: ToolRunner) -> None:
    assert ft.weather.isolation == "process"
    assert processes.run(ft.weather, {"city": "Oslo", "units": "imperial"}) == Ok("Oslo: 70 F")
    ran = processes.run(ft.where, {"label": "here"}, SESSION)
    assert isinstance(ran, Ok) and ran.value["call"] == "call-1" and ran.value["label"] == "here"
    assert ran.value["pid"] != os.getpid()
    assert processes.run(ft.manhattan, {"point": {"x": 3, "y": -4},
                                        "origin": {"x": 1, "y": 1}}) == Ok(7)
    assert processes.run(ft.confirm, {"question": "Go?"}) == AskUser("Go?", ("yes", "no"))
    error = error_of(processes.run(ft.refuse, {"reason": "no way"}))
    assert error.reason == "handler_raised" and "ValueError: no way" in error.message
    assert violations_of(processes.run(ft.weather, {"city": 3})) == [("$.city", "type")]


def test_a_worker_finds_a_function_tool_only_where_the_decorator_left_it(
        processes: ToolRunner) -> None:
    """Built by a call, not as a decorator, the module's name leads to the bare function."""
    doubled = function_tool(isolation="process")(ft.double)
    error = error_of(processes.run(doubled, {"n": 2}))
    assert error.reason == "not_found" and "does not name the handler" in error.message


@pytest.fixture
def on_ray(ray_cluster: ModuleType) -> Iterator[ToolRunner]:
    with ToolRunner(tool_timeout=20.0) as runner:
        yield runner


def test_function_tools_run_as_ray_tasks(on_ray: ToolRunner) -> None:
    """A nested function (shipped by value, with its arguments model) taking a pydantic
    parameter (of an importable module: the cluster imports it) and the context."""
    @function_tool(isolation="ray")
    def scaled(point: ft.Point, factor: int, ctx: CallContext) -> dict[str, Any]:
        """Scale a point."""
        if factor < 0:
            raise ValueError("negative factor")
        return {"sum": (point.x + point.y) * factor, "call": ctx.tool_call_id,
                "pid": os.getpid()}

    ran = on_ray.run(scaled, {"point": {"x": 2, "y": 3}, "factor": 2}, SESSION)
    assert isinstance(ran, Ok) and ran.value["sum"] == 10 and ran.value["call"] == "call-1"
    assert ran.value["pid"] != os.getpid()
    error = error_of(on_ray.run(scaled, {"point": {"x": 1, "y": 1}, "factor": -1}))
    assert error.reason == "handler_raised" and "negative factor" in error.message


def test_a_manual_function_tool_is_run_by_the_caller() -> None:
    """The function gives the schema and the description; the run suspends on its calls and
    the caller's answer is the result. Its body never runs."""

    @function_tool(manual=True)
    def click(selector: str, double: bool = False) -> str:
        """Click a button in the user's browser.

        Args:
            selector: The CSS selector of the button.
        """
        raise AssertionError("a manual tool's body never runs")

    assert click.manual and click.handler is None
    assert click.spec.input_schema["required"] == ["selector"]
    assert click.spec.input_schema["properties"]["selector"]["description"] == \
        "The CSS selector of the button."
    model = ScriptedModel([calls(call("click", {"selector": "#buy"}, id="k")), "Clicked."])
    with Agent(model, [click]) as agent:
        outcome = agent.run("buy it")
        assert isinstance(outcome, Suspended)
        assert [m.call_id for m in outcome.manual] == ["k"]
        assert agent.resume(outcome, {"k": "clicked"}).text == "Clicked."


def test_a_manual_function_tool_takes_no_running_options() -> None:
    with pytest.raises(ValueError, match=r"\['timeout'\] cannot apply"):
        @function_tool(manual=True, timeout=5)
        def tap(x: int) -> str:
            """Tap."""
            return "never"
