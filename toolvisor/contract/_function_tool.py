"""``function_tool``: a tool from a plain typed function, one parameter per argument.

``@tool`` hands a handler the model's arguments as one object and takes a handler result back.
``@function_tool`` reads a plain function instead: its parameters become the schema's fields
(described by its docstring), a parameter annotated ``CallContext`` receives the context, and
a plain return value becomes ``Ok(value)``. The ``Tool`` it builds has a wrapper of arity 2 as
its handler, so ``execute`` and every isolation run it as they run any tool.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast, overload

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.json_schema import GenerateJsonSchema

from toolvisor.contract._context import CallContext
from toolvisor.contract._docstring import Documented, read_docstring
from toolvisor.contract._errors import InvalidHandlerError
from toolvisor.contract._handler_checks import warn_undescribed, warn_untyped_parameters
from toolvisor.contract._results import LEGAL_RESULT_TYPES, HandlerResult, Ok
from toolvisor.contract._tool import (
    UNBOUND,
    CancelHook,
    Handler,
    Isolation,
    OutputWindow,
    Scheduling,
    Tool,
    ToolMethod,
    in_class_body,
)

_FUNCTION = Callable[..., Any]
_STRICT = ConfigDict(extra="forbid")
"""An argument the function has no parameter for is refused, and the schema says so
(``"additionalProperties": false``), so the model learns of a misspelt name."""


class _NoFieldTitles(GenerateJsonSchema):
    """A field's title only repeats its name (``city`` -> ``City``): the model is not sent it."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class _Passed:
    """How the wrapper passes one parameter: from the arguments model's ``field`` (the context
    when ``None``), by position (a positional-only parameter) or by name."""

    name: str
    field: str | None
    positional: bool


def _call_arguments(plan: tuple[_Passed, ...], arguments: Any,
                    ctx: CallContext) -> tuple[list[Any], dict[str, Any]]:
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for passed in plan:
        value = ctx if passed.field is None else getattr(arguments, passed.field)
        if passed.positional:
            args.append(value)
        else:
            kwargs[passed.name] = value
    return args, kwargs


def _as_result(value: Any) -> HandlerResult:
    """A handler result passes through as it is; any other value is ``Ok(value)``."""
    return cast(HandlerResult, value) if isinstance(value, LEGAL_RESULT_TYPES) else Ok(value)


def _named(handler: Handler, fn: _FUNCTION) -> Handler:
    """``handler`` under ``fn``'s names. A ``process`` worker imports a handler by module and
    qualified name, which then leads to the ``Tool`` ``@function_tool`` left there (not
    ``functools.wraps``: its ``__wrapped__`` would make the wrapper's arity read as ``fn``'s)."""
    handler.__name__ = fn.__name__
    handler.__qualname__ = fn.__qualname__
    handler.__module__ = fn.__module__
    handler.__doc__ = fn.__doc__
    return handler


def _handler(fn: _FUNCTION, plan: tuple[_Passed, ...]) -> Handler:
    """The arity-2 handler that calls ``fn`` with the validated arguments (and the context)."""
    if inspect.iscoroutinefunction(fn):
        async def run_async(arguments: Any, ctx: CallContext) -> HandlerResult:
            args, kwargs = _call_arguments(plan, arguments, ctx)
            return _as_result(await fn(*args, **kwargs))
        return _named(run_async, fn)

    def run(arguments: Any, ctx: CallContext) -> HandlerResult:
        args, kwargs = _call_arguments(plan, arguments, ctx)
        return _as_result(fn(*args, **kwargs))
    return _named(run, fn)


def _method_handler(fn: _FUNCTION, plan: tuple[_Passed, ...]) -> Handler:
    """As :func:`_handler`, for a method: the instance comes first (bound by ``ToolMethod``)."""
    if inspect.iscoroutinefunction(fn):
        async def run_async(self: Any, arguments: Any, ctx: CallContext) -> HandlerResult:
            args, kwargs = _call_arguments(plan, arguments, ctx)
            return _as_result(await fn(self, *args, **kwargs))
        return _named(run_async, fn)

    def run(self: Any, arguments: Any, ctx: CallContext) -> HandlerResult:
        args, kwargs = _call_arguments(plan, arguments, ctx)
        return _as_result(fn(self, *args, **kwargs))
    return _named(run, fn)


def _check_function(fn: Any) -> None:
    if isinstance(fn, Tool | ToolMethod):
        raise TypeError(f"@function_tool: {fn!r} is already a tool; apply one decorator, once")
    if not inspect.isfunction(fn):
        raise TypeError(
            f"@function_tool needs a def or async def function, got {fn!r}; for a callable "
            "object, a functools.partial or a bound method taking (arguments) or "
            "(arguments, ctx), use @tool"
        )
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise InvalidHandlerError(
            f"@function_tool: {fn.__qualname__} is a generator function; a tool call has one "
            "result: return the value instead of yielding it"
        )


def _parameters(fn: _FUNCTION, method: bool, tool_name: str) -> list[inspect.Parameter]:
    """The parameters the model and the context fill: all of them but a method's ``self``."""
    params = list(inspect.signature(fn).parameters.values())
    if not method:
        return params
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY,
                                            params[0].POSITIONAL_OR_KEYWORD):
        raise InvalidHandlerError(
            f"tool {tool_name!r}: {fn.__qualname__} is defined in a class body, so "
            "@function_tool makes it a method tool, called on an instance; it takes no self. "
            "Define the function outside the class, or give it self"
        )
    return params[1:]


def _arguments_model(fn: _FUNCTION, params: list[inspect.Parameter], documented: Documented,
                     tool_name: str) -> tuple[type[BaseModel], tuple[_Passed, ...]]:
    """The pydantic model of the arguments (one field per parameter, aliased to its name) and
    how each parameter is passed. Fields are named by position, so any parameter name works
    (``json``, ``_private``, ``model_config``)."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise TypeError(f"tool {tool_name!r}: cannot resolve the type hints of "
                        f"{fn.__qualname__}: {exc}") from exc
    fields: dict[str, Any] = {}
    plan: list[_Passed] = []
    for index, param in enumerate(params):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise InvalidHandlerError(
                f"tool {tool_name!r}: @function_tool tells the model each parameter of "
                f"{fn.__qualname__}, so it cannot take *args or **kwargs ({param}); name each "
                "argument as a parameter"
            )
        annotation = hints.get(param.name, Any)
        positional = param.kind is param.POSITIONAL_ONLY
        if annotation is CallContext:
            if any(passed.field is None for passed in plan):
                raise InvalidHandlerError(
                    f"tool {tool_name!r}: {fn.__qualname__} has two parameters annotated "
                    "CallContext; the context is passed once")
            plan.append(_Passed(param.name, None, positional))
            continue
        name = f"argument_{index}"
        default = ... if param.default is param.empty else param.default
        described = documented.parameters.get(param.name)
        if described is None:  # a description in the annotation (Annotated[..., Field()]) stays
            fields[name] = (annotation, Field(default, alias=param.name))
        else:
            fields[name] = (annotation, Field(default, alias=param.name, description=described))
        plan.append(_Passed(param.name, name, positional))
    try:
        model = create_model(f"{tool_name}_arguments", __config__=_STRICT,
                             __module__=fn.__module__, **fields)
    except Exception as exc:
        raise TypeError(
            f"tool {tool_name!r}: cannot describe the parameters of {fn.__qualname__} to the "
            f"model: {exc}; annotate each with a type pydantic can describe (str, int, "
            "Literal[...], a pydantic model, a TypedDict, a dataclass, ...), or with "
            "CallContext for the context"
        ) from exc
    return model, tuple(plan)


def _input_schema(model: type[BaseModel], tool_name: str) -> dict[str, Any]:
    try:
        schema = model.model_json_schema(schema_generator=_NoFieldTitles)
    except Exception as exc:
        raise TypeError(
            f"tool {tool_name!r}: cannot derive a JSON schema from the parameters: {exc}; "
            "annotate each with a type pydantic can describe, or with CallContext"
        ) from exc
    schema.pop("title", None)  # the model's generated name, which tells the model nothing
    return schema


@overload
def function_tool(fn: _FUNCTION, /) -> Tool: ...


@overload
def function_tool(
    *,
    name: str | None = None,
    description: str | None = None,
    scheduling: Scheduling = "parallel",
    timeout: float | None = None,
    isolation: Isolation | None = None,
    retryable: bool = False,
    internal: bool = False,
    output_window: OutputWindow = "head",
    on_cancel: CancelHook | None = None,
    options: Mapping[str, Any] | None = None,
    manual: bool = False,
    idle_timeout: float | None = None,
) -> Callable[[_FUNCTION], Tool]: ...


def function_tool(
    fn: _FUNCTION | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    scheduling: Scheduling = "parallel",
    timeout: float | None = None,
    isolation: Isolation | None = None,
    retryable: bool = False,
    internal: bool = False,
    output_window: OutputWindow = "head",
    on_cancel: CancelHook | None = None,
    options: Mapping[str, Any] | None = None,
    manual: bool = False,
    idle_timeout: float | None = None,
) -> Tool | Callable[[_FUNCTION], Tool]:
    """Build a :class:`Tool` from a plain typed function: ``@function_tool`` or
    ``@function_tool(timeout=5, ...)``, with the options of :func:`tool`.

    Each parameter is a field of the input schema (its type by pydantic, its default kept, its
    description from the docstring's Args / Parameters section, Google, NumPy or Sphinx style);
    the docstring's prose before its sections is the tool's description. A parameter annotated
    ``CallContext`` receives the call's context and is not in the schema. The function returns
    a plain value, which becomes ``Ok(value)``; ``Ok``, ``Err``, ``AskUser``, ``Halt`` and
    ``Pending`` pass through as they are; a raise is ``handler_raised``. An ``async def``
    function runs under ``asyncio`` isolation. Arguments the function has no parameter for are
    refused (``InvalidArguments``).

    On a function defined in a class body it makes a method tool, as ``@tool`` does: the
    class attribute is a :class:`ToolMethod` and ``instance.method`` that instance's ``Tool``.
    Under ``isolation="process"`` a worker imports the tool by the function's module and name,
    so it must be decorated where it is defined, at module level (``function_tool(f)`` called
    elsewhere leaves the module's ``f`` a bare function, which the worker refuses as
    ``not_found``).

    ``manual=True`` declares a tool the caller runs (a browser action, a device, a person):
    the function's signature and docstring give the schema and the description, its body is
    never called, and a run suspends on the model's calls to it (``Suspended.manual``) until
    the caller answers them. Running options (``timeout``, ``isolation``, ...) do not apply.
    """
    settings: dict[str, Any] = {
        "scheduling": scheduling, "timeout": timeout, "isolation": isolation,
        "retryable": retryable, "internal": internal, "output_window": output_window,
        "on_cancel": on_cancel, "options": options, "idle_timeout": idle_timeout,
    }

    def build(function: _FUNCTION) -> Tool:
        _check_function(function)
        tool_name = name or function.__name__
        method = in_class_body(function)
        documented = read_docstring(function)
        params = _parameters(function, method, tool_name)
        model, plan = _arguments_model(function, params, documented, tool_name)
        schema = _input_schema(model, tool_name)
        text = documented.description if description is None else description
        built: Tool
        if manual:
            built = _manual_tool(tool_name, text, schema, method, settings)
        elif not method:
            built = Tool(name=tool_name, description=text, input_schema=schema,
                         handler=_handler(function, plan), arguments_type=model, **settings)
        else:
            handler = _method_handler(function, plan)
            template = Tool(name=tool_name, description=text, input_schema=schema,
                            handler=types.MethodType(handler, UNBOUND), arguments_type=model,
                            **settings)
            built = cast(Tool, ToolMethod(handler, template))
        _warn_when_vague(function, params, text, tool_name, internal)  # once it has built
        return built

    if fn is not None:
        return build(fn)
    return build


def _warn_when_vague(fn: _FUNCTION, params: list[inspect.Parameter], description: str,
                     tool_name: str, internal: bool) -> None:
    """Warn of what the model would not be told: a parameter's type (not annotated, or
    ``Any``), what the tool is for (no description). An internal tool is never offered to a
    model, so it is not warned about."""
    if internal:
        return
    hints = typing.get_type_hints(fn)  # resolved once already: _arguments_model refuses errors
    untyped = [p.name for p in params if hints.get(p.name, Any) is Any]
    if untyped:
        warn_untyped_parameters(untyped, fn.__qualname__, tool_name)
    if not description.strip():
        warn_undescribed(fn.__qualname__, tool_name)


_RUNNING_DEFAULTS: dict[str, Any] = {
    "scheduling": "parallel", "timeout": None, "isolation": None, "retryable": False,
    "output_window": "head", "on_cancel": None, "options": None, "idle_timeout": None}


def _manual_tool(tool_name: str, text: str, schema: dict[str, Any], method: bool,
                 settings: dict[str, Any]) -> Tool:
    """A tool the caller runs: the function gave its schema and description, nothing else."""
    if method:
        raise TypeError(f"tool {tool_name!r}: manual=True declares a tool the caller runs; "
                        "define it as a module-level function, not a method")
    running = sorted(k for k, v in settings.items() if k in _RUNNING_DEFAULTS
                     and v != _RUNNING_DEFAULTS[k])
    if running:
        raise ValueError(f"tool {tool_name!r}: manual=True declares a tool the caller runs, so "
                         f"{running} cannot apply: drop them")
    return Tool(name=tool_name, description=text, input_schema=schema, manual=True,
                internal=settings["internal"])
