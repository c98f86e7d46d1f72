"""What ``@tool`` reads from a handler's annotations when it builds the tool, so that a mistake
is told to the programmer then, not to the model on every call (as ``invalid_return``, or as a
schema with no fields)."""

from __future__ import annotations

import inspect
import re
import sys
import types
import typing
import warnings
from typing import Any

from toolvisor.contract._context import CallContext
from toolvisor.contract._errors import (
    InvalidHandlerError,
    OpenSchemaWarning,
    UndescribedToolWarning,
)
from toolvisor.contract._results import LEGAL_RESULT_TYPES

FUNCTION_TOOL = ("@function_tool (a plain function, one parameter per argument, whose return "
                 "value becomes Ok(value))")
"""How every message below names the alternative."""

_QUALIFIED = re.compile(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)")
_ALWAYS_FITS = (Any, object, typing.NoReturn, typing.Never)


def _spelled(annotation: Any) -> str:
    """An annotation as it was written: ``Mapping[str, Ok]``, not with each name's module."""
    if annotation is type(None):
        return "None"
    return _QUALIFIED.sub(r"\1", inspect.formatannotation(annotation))


def returns_results(annotation: Any) -> bool:
    """Whether a handler annotated ``-> annotation`` may return a handler result every time:
    each member of a union is ``Ok``, ``Err``, ``AskUser``, ``Halt``, ``Pending`` (or a subclass),
    ``Any``, ``object`` or ``NoReturn``. A form this cannot judge (a ``TypeVar``, ...) passes."""
    if any(annotation is fits for fits in _ALWAYS_FITS):
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return all(returns_results(member) for member in typing.get_args(annotation))
    target = origin if origin is not None else annotation
    if isinstance(target, type):
        return issubclass(target, LEGAL_RESULT_TYPES)
    return True


def check_return(annotation: Any, tool_name: str) -> None:
    """Refuse a handler annotated to return something that is no handler result (``-> dict``):
    every call of it would be ``invalid_return``, seen only by the model."""
    if annotation is inspect.Parameter.empty or returns_results(annotation):
        return
    raise InvalidHandlerError(
        f"tool {tool_name!r}: the handler is annotated to return {_spelled(annotation)}, but a "
        "handler returns Ok(value), Err(reason), AskUser, Halt or Pending (anything else is "
        "invalid_return on every call, which only the model would see); wrap the value in "
        f"Ok(...) and annotate -> Ok, or build the tool with {FUNCTION_TOOL}"
    )


def check_context_parameter(name: str, annotation: Any, first: str, tool_name: str) -> None:
    """Refuse a second parameter annotated as anything a ``CallContext`` is not (``units: str``):
    ``@tool`` passes the context there, not the model's second argument."""
    if (not isinstance(annotation, type) or annotation is inspect.Parameter.empty
            or any(annotation is fits for fits in _ALWAYS_FITS)):
        return
    try:
        fits = issubclass(CallContext, annotation)
    except TypeError:  # a protocol or an ABC that refuses the question: not judged
        return
    if not fits:
        raise InvalidHandlerError(
            f"tool {tool_name!r}: @tool calls the handler as handler(arguments, ctx), so its "
            f"second parameter {name!r} receives the CallContext, but it is annotated "
            f"{_spelled(annotation)}; for a function whose parameters are the tool's arguments "
            f"({first}, {name}, ...), use {FUNCTION_TOOL}; or give @tool one arguments model "
            f"(a pydantic model, TypedDict or dataclass) holding every argument, as the first "
            "parameter"
        )


def check_arguments_object(name: str, annotation: Any, schema: Any, tool_name: str) -> None:
    """Refuse a first parameter whose type is no object (``city: str``): ``@tool`` passes the
    model's whole arguments object there, so its schema must describe an object."""
    kind = schema.get("type", "object") if isinstance(schema, dict) else "object"
    if kind == "object":
        return
    raise InvalidHandlerError(
        f"tool {tool_name!r}: @tool passes the model's arguments, one JSON object, to the "
        f"handler's first parameter, but {name!r} is annotated {_spelled(annotation)} "
        f"(JSON schema type {kind!r}); for a function whose parameters are the tool's "
        f"arguments, use {FUNCTION_TOOL}; or annotate {name!r} with one arguments model "
        "(a pydantic model, TypedDict or dataclass) holding every argument"
    )


def arity_hint() -> str:
    """What a ``@tool`` arity refusal adds: the decorator that takes any parameters."""
    return f"; for a function whose parameters are the tool's arguments, use {FUNCTION_TOOL}"


def warn_open_schema(annotation: Any, tool_name: str) -> None:
    """Warn (``OpenSchemaWarning``) that the model will be told no field: the handler's arguments
    are a bare ``dict`` / ``Any`` / unannotated and no ``input_schema`` was given."""
    typed = ("not annotated" if annotation is inspect.Parameter.empty
             else f"typed {_spelled(annotation)}")
    warnings.warn(
        f"tool {tool_name!r}: the handler's arguments are {typed}, so the model is told only "
        '{"type": "object"} (no field names, no types); annotate the first parameter with an '
        "arguments model (a pydantic model, TypedDict or dataclass), or pass input_schema= to "
        "@tool; or use " + FUNCTION_TOOL,
        OpenSchemaWarning,
        stacklevel=_caller_level(),
    )


def warn_untyped_parameters(names: list[str], function: str, tool_name: str) -> None:
    """Warn (``OpenSchemaWarning``) that ``@function_tool`` tells the model nothing of the
    type of parameters ``names`` of ``function``: not annotated, or ``Any``."""
    warnings.warn(
        f"tool {tool_name!r}: the parameters {names} of {function} are not annotated (or "
        "Any), so the model is told nothing of their type (an empty schema: any JSON value); "
        "annotate each (str, int, Literal[...], a pydantic model, ...)",
        OpenSchemaWarning,
        stacklevel=_caller_level(),
    )


def warn_undescribed(function: str, tool_name: str) -> None:
    """Warn (``UndescribedToolWarning``) that the model is never told what the tool built from
    ``function`` is for."""
    warnings.warn(
        f"tool {tool_name!r}: {function} has no docstring and no description= was given, so "
        "the model is told the tool's name and parameters but never what it is for; give it "
        "a docstring (its first lines are the description) or @function_tool(description=...)",
        UndescribedToolWarning,
        stacklevel=_caller_level(),
    )


def _caller_level() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside this package (the
    line with the decorator), however many of its own frames lie between."""
    frame = sys._getframe(1)
    level = 1
    package = __name__.rpartition(".")[0] + "."
    while frame is not None and frame.f_globals.get("__name__", "").startswith(package):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level
