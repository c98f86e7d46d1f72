"""``Tool``, the definition of one tool, and the ``@tool`` decorator that builds one."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, cast, overload

from pydantic import TypeAdapter

from toolvisor.contract._arity import handler_arity
from toolvisor.contract._errors import InvalidHandlerError
from toolvisor.contract._handler_checks import (
    arity_hint,
    check_arguments_object,
    check_context_parameter,
    check_return,
    warn_open_schema,
)
from toolvisor.contract._isolations import check_kind, default_isolation, isolation_rules
from toolvisor.contract._messages import ToolCall, ToolSpec
from toolvisor.contract._schema import check_input_schema
from toolvisor.contract._seconds import check_seconds

Scheduling: TypeAlias = Literal["parallel", "serial"]
Isolation: TypeAlias = str
"""The name of a registered isolation backend (see ``toolvisor.isolation``)."""
OutputWindow: TypeAlias = Literal["head", "tail"]
Handler: TypeAlias = Callable[..., Any]
CancelHook: TypeAlias = Callable[[ToolCall, str], None]
"""``on_cancel(call, completion_key)``: stop the external work a ``Pending`` call started."""

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What model providers accept as a tool name; matched with ``fullmatch`` (``$`` would also
accept a trailing newline)."""
_OPEN_OBJECT: dict[str, Any] = {"type": "object"}
_UNTYPED = (inspect.Parameter.empty, Any, dict, Mapping, typing.Mapping, typing.Dict)  # noqa: UP006


@dataclass(frozen=True, eq=False, slots=True, weakref_slot=True)
class Tool:
    """One tool: what the model is told (name, description, input schema) and how it runs.

    ``handler`` is ``None`` for a tool declared for manual use: calling it is ``not_found``.
    ``manual=True`` (only without a handler) marks such a tool as run by the caller: a run
    suspends on the model's calls to it (``Suspended.manual``) until the caller answers them.
    ``timeout`` ``None`` means the runner's default. ``idle_timeout`` (seconds, or ``None``:
    none) ends a call that reports no progress and no heartbeat for that long (``timeout``,
    code ``idle_timeout``), however long it may run in all. ``isolation`` names the backend
    that runs the handler; ``None`` picks the one registered as the default for its kind of handler
    (``async def`` or plain). ``arguments_type`` (set by ``@tool``)
    is the type the validated arguments are converted to before the handler sees them.
    ``internal`` tools are never offered to the model (the host calls them itself).
    ``output_window`` says which end of an output over the budget is kept.
    ``options`` are for the isolation backend alone, which reads and checks them when the tool
    is built.
    ``on_cancel`` is called by the host when a run is cancelled while this tool's call waits
    on ``Pending(on_cancel="cancel_external_work")``, with the call and its completion key.
    Tools compare by identity: two tools with the same name are still two tools.
    """

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: dict(_OPEN_OBJECT))
    handler: Handler | None = None
    scheduling: Scheduling = "parallel"
    timeout: float | None = None
    isolation: Isolation | None = None
    retryable: bool = False
    arguments_type: Any = None
    internal: bool = False
    output_window: OutputWindow = "head"
    on_cancel: CancelHook | None = None
    manual: bool = False
    options: Mapping[str, Any] | None = None
    idle_timeout: float | None = None
    arity: int = field(init=False, default=0)
    is_async: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(
                f"tool name {self.name!r} is invalid: a name must match {_NAME.pattern} "
                "(1 to 64 ASCII letters, digits, '_' or '-', nothing else), as model "
                "providers require"
            )
        check_input_schema(self.input_schema, self.name)
        if self.scheduling not in ("parallel", "serial"):
            raise ValueError(
                f"tool {self.name!r}: scheduling must be 'parallel' or 'serial', "
                f"got {self.scheduling!r}"
            )
        check_seconds(f"tool {self.name!r}: timeout", self.timeout, positive=True,
                      optional=True)
        check_seconds(f"tool {self.name!r}: idle_timeout", self.idle_timeout, positive=True,
                      optional=True)
        rules = None if self.isolation is None else isolation_rules(self.isolation, self.name)
        if self.options is not None:
            if not isinstance(self.options, Mapping):
                raise TypeError(f"tool {self.name!r}: options must be a mapping, "
                                f"got {self.options!r}")
            object.__setattr__(self, "options", dict(self.options))  # a copy nobody changes
        if self.output_window not in ("head", "tail"):
            raise ValueError(
                f"tool {self.name!r}: output_window must be 'head' or 'tail', "
                f"got {self.output_window!r}"
            )
        if self.on_cancel is not None and not callable(self.on_cancel):
            raise TypeError(f"tool {self.name!r}: on_cancel must be callable (call, key) or None")
        if not isinstance(self.manual, bool):
            raise TypeError(f"tool {self.name!r}: manual must be a bool, got {self.manual!r}")
        if self.manual and self.handler is not None:
            raise ValueError(f"tool {self.name!r}: manual=True declares a tool the caller runs, "
                             "so it takes no handler (handler=None)")
        if self.handler is None:
            if rules is not None:
                rules.check(self)
            elif self.options:
                raise ValueError(f"tool {self.name!r}: options are read by an isolation "
                                 "backend; name the isolation")
            return
        if not callable(self.handler):
            raise TypeError(f"tool {self.name!r}: handler must be callable or None")
        object.__setattr__(self, "arity", handler_arity(self.handler, self.name))
        is_async = inspect.iscoroutinefunction(self.handler) or inspect.iscoroutinefunction(
            getattr(self.handler, "__call__", None)  # noqa: B004 - async callable objects
        )
        object.__setattr__(self, "is_async", is_async)
        isolation = self.isolation or default_isolation(is_async, self.name)
        rules = rules or isolation_rules(isolation, self.name)
        check_kind(isolation, rules, is_async, self.name)
        object.__setattr__(self, "isolation", isolation)
        rules.check(self)

    @property
    def spec(self) -> ToolSpec:
        """What the model is told about this tool."""
        return ToolSpec(
            name=self.name, description=self.description, input_schema=dict(self.input_schema)
        )

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, isolation={self.isolation!r})"


def _unpartial(handler: Handler) -> Any:
    """The callable under any ``functools.partial`` layers (whose docstring is partial's own)."""
    while isinstance(handler, functools.partial):
        handler = handler.func
    return handler


def _annotated(handler: Handler) -> Any:
    """What holds the annotations of ``handler``'s parameters: the function under a
    ``functools.partial`` or a decorator's ``__wrapped__`` (a bound method lends its
    function's), or a callable object's ``__call__``."""
    target = inspect.unwrap(_unpartial(handler))
    if inspect.isroutine(target) or isinstance(target, type):
        return target
    return type(target).__call__


def _type_hints(handler: Handler, tool_name: str, *, needed: bool) -> dict[str, Any]:
    """The handler's resolved annotations; ``{}`` when they cannot be resolved and are not
    ``needed`` (an ``input_schema`` was given), else a ``TypeError`` saying why."""
    try:
        return typing.get_type_hints(_annotated(handler))
    except Exception as exc:
        if not needed:
            return {}
        raise TypeError(f"tool {tool_name!r}: cannot resolve the handler's type hints: {exc}") \
            from exc


def _is_open(annotation: Any) -> bool:
    """Whether an arguments annotation describes no field: a bare dict or Mapping, ``Any``, none."""
    return annotation in _UNTYPED or typing.get_origin(annotation) in (dict, Mapping)


def _schema_for(arguments_type: Any, tool_name: str) -> dict[str, Any]:
    try:
        schema = TypeAdapter(arguments_type).json_schema()
    except Exception as exc:
        raise TypeError(
            f"tool {tool_name!r}: cannot derive a JSON schema from {arguments_type!r}: {exc}; "
            "annotate the arguments with a pydantic model, a TypedDict or a dataclass, "
            "or pass input_schema="
        ) from exc
    return schema


class ToolMethod:
    """What ``@tool`` leaves on a class for a method: each instance gets its own ``Tool``.

    ``instance.method`` is a ``Tool`` whose handler is the bound method, built once per
    instance and kept in the instance's ``__dict__`` under the method's name (as
    ``functools.cached_property`` does), so one instance always gives the same ``Tool``.
    ``Class.method`` is this descriptor. The method takes ``(self, arguments)`` or
    ``(self, arguments, ctx)``; everything about it is checked when the class body runs.
    """

    __slots__ = ("_attribute", "_template", "function")

    def __init__(self, function: Handler, template: Tool) -> None:
        self.function = function
        self._template = template
        self._attribute: str = function.__name__

    def __set_name__(self, owner: type, name: str) -> None:
        self._attribute = name

    @property
    def template(self) -> Tool:
        """The tool every instance's ``Tool`` is a copy of (its handler bound to no instance)."""
        return self._template

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> ToolMethod: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Tool: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> Tool | ToolMethod:
        if instance is None:
            return self
        try:
            cache = vars(instance)
        except TypeError:
            raise TypeError(
                f"tool {self._template.name!r}: {type(instance).__name__} instances have no "
                "__dict__ to keep their bound Tool in; add '__dict__' to __slots__, or drop "
                f"@tool from the method and build the tool per instance: "
                f"tool(instance.{self.function.__name__})"
            ) from None
        bound = cache.get(self._attribute)
        if bound is None:
            made = dataclasses.replace(self._template,
                                       handler=types.MethodType(self.function, instance))
            bound = cache.setdefault(self._attribute, made)
        return cast(Tool, bound)

    def __repr__(self) -> str:
        return (f"ToolMethod({self.function.__qualname__}): a method tool; "
                f"instance.{self._attribute} is its Tool")


UNBOUND = object()
"""What a method is bound to while ``@tool`` checks it, before any instance exists."""


def in_class_body(fn: Handler) -> bool:
    """Whether ``fn`` is a function defined directly in a class body (a method)."""
    if not inspect.isfunction(fn):
        return False
    scopes = fn.__qualname__.split(".")
    return len(scopes) > 1 and scopes[-2] != "<locals>"


@overload
def tool(handler: Handler, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
    scheduling: Scheduling = "parallel",
    timeout: float | None = None,
    isolation: Isolation | None = None,
    retryable: bool = False,
    internal: bool = False,
    output_window: OutputWindow = "head",
    on_cancel: CancelHook | None = None,
    options: Mapping[str, Any] | None = None,
    idle_timeout: float | None = None,
) -> Callable[[Handler], Tool]: ...


def tool(
    handler: Handler | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
    scheduling: Scheduling = "parallel",
    timeout: float | None = None,
    isolation: Isolation | None = None,
    retryable: bool = False,
    internal: bool = False,
    output_window: OutputWindow = "head",
    on_cancel: CancelHook | None = None,
    options: Mapping[str, Any] | None = None,
    idle_timeout: float | None = None,
) -> Tool | Callable[[Handler], Tool]:
    """Build a :class:`Tool` from a callable: ``@tool`` or ``@tool(timeout=5, ...)``.

    The input schema comes from the first parameter's annotation (a pydantic model, a
    TypedDict, a dataclass: anything pydantic can describe) unless ``input_schema`` is given;
    the handler then receives the validated, converted value. A first parameter typed as a
    bare ``dict`` or ``Any`` (or not at all), with no ``input_schema``, tells the model no field:
    that warns (:class:`OpenSchemaWarning`). A handler annotated to return anything but the
    handler results (``-> dict``) is refused (:class:`InvalidHandlerError`), as is one whose
    parameters look like the model's arguments (``city: str``): :func:`function_tool` is the
    decorator for a plain function. The description defaults to the docstring. A bound method,
    a ``functools.partial`` or a callable object is read as it will be called (``name=`` is
    needed where it has no ``__name__``).

    On a function defined in a class body, ``@tool`` makes a method tool: the class attribute
    is a :class:`ToolMethod` and ``instance.method`` that instance's ``Tool`` (typed as the
    ``Tool`` an instance sees).
    """

    def build(fn: Handler) -> Tool:
        if isinstance(fn, Tool | ToolMethod):
            raise TypeError(f"@tool: {fn!r} is already a tool; apply @tool once, to the handler")
        tool_name = name or getattr(fn, "__name__", None)
        if not tool_name:
            raise TypeError(f"@tool: the handler {fn!r} has no __name__; pass name=")
        if in_class_body(fn):
            return cast(Tool, _method_tool(fn, tool_name))
        return _build(fn, tool_name)

    def _method_tool(fn: Handler, tool_name: str) -> ToolMethod:
        positional = [p for p in inspect.signature(fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if not positional:
            raise InvalidHandlerError(
                f"tool {tool_name!r}: {fn.__qualname__} is defined in a class body, so @tool "
                "makes it a method tool, called as instance.method(arguments) or "
                "instance.method(arguments, ctx); it takes no self. Define the handler "
                "outside the class, or give it self"
            )
        return ToolMethod(fn, _build(types.MethodType(fn, UNBOUND), tool_name))

    def _build(fn: Handler, tool_name: str) -> Tool:
        try:
            arity = handler_arity(fn, tool_name)
        except InvalidHandlerError as exc:
            raise InvalidHandlerError(f"{exc}{arity_hint()}") from None
        arguments_type, schema, untyped = _arguments(fn, arity, tool_name)
        documented = inspect.getdoc(_unpartial(fn)) or ""
        built = Tool(
            name=tool_name,
            description=description if description is not None else documented,
            input_schema=schema,
            handler=fn,
            scheduling=scheduling,
            timeout=timeout,
            isolation=isolation,
            retryable=retryable,
            arguments_type=arguments_type,
            internal=internal,
            output_window=output_window,
            on_cancel=on_cancel,
            options=options,
            idle_timeout=idle_timeout,
        )
        if untyped is not None and not internal:  # only a tool that builds is worth a warning
            warn_open_schema(untyped, tool_name)
        return built

    def _arguments(fn: Handler, arity: int,
                   tool_name: str) -> tuple[Any, Mapping[str, Any], Any | None]:
        """The arguments type and the input schema, after the checks the annotations allow;
        and the annotation that describes no field (a bare ``dict``, ...) if that is what
        gave the schema, else ``None``."""
        params = list(inspect.signature(fn).parameters.values())
        hints = _type_hints(fn, tool_name, needed=input_schema is None)
        empty = inspect.Parameter.empty
        check_return(hints.get("return", empty), tool_name)
        first = hints.get(params[0].name, empty)
        if arity == 2:
            check_context_parameter(params[1].name, hints.get(params[1].name, empty),
                                    params[0].name, tool_name)
        if input_schema is not None:
            return None, input_schema, None
        if _is_open(first):
            return None, dict(_OPEN_OBJECT), first
        schema = _schema_for(first, tool_name)
        check_arguments_object(params[0].name, first, schema, tool_name)
        return first, schema, None

    if handler is not None:
        return build(handler)
    return build
