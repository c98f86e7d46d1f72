"""Checking arguments against a tool's JSON schema (Draft 2020-12) and converting them.

Whatever goes wrong while validating comes back as ``Err(InvalidArguments)``, never as a raise:
the handler has not run, so no ``ToolError`` reason would be true of it (see docs/design.md).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import TypeAdapter, ValidationError
from referencing import Registry

from toolvisor.contract import Err, InvalidArguments, Tool, Violation

# Compiled once per Tool and dropped with it. Two threads racing on a miss both compile the
# same validator; the loser's copy is garbage, which is cheaper than a lock on the hot path.
_Compiled = tuple[Draft202012Validator | None, TypeAdapter[Any] | None]
_compiled: weakref.WeakKeyDictionary[Tool, _Compiled] = weakref.WeakKeyDictionary()

# A schema that only says "an object" holds for every mapping: no validator is needed.
_ANY_OBJECT = {"type": "object"}
# Refs resolve within the schema (checked when the Tool was built); nothing is ever fetched.
_NO_RETRIEVAL: Registry[Any] = Registry()


def _compile(tool: Tool) -> _Compiled:
    entry = _compiled.get(tool)
    if entry is None:
        validator = None if dict(tool.input_schema) == _ANY_OBJECT else Draft202012Validator(
            dict(tool.input_schema), registry=_NO_RETRIEVAL,
            format_checker=Draft202012Validator.FORMAT_CHECKER,
        )
        adapter = TypeAdapter(tool.arguments_type) if tool.arguments_type is not None else None
        entry = (validator, adapter)
        _compiled[tool] = entry
    return entry


def json_path(parts: Iterable[str | int]) -> str:
    """``("a", 0, "b")`` -> ``$.a[0].b``."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def prepare_arguments(tool: Tool, arguments: Any) -> Any | Err:
    """The value the handler receives, or ``Err(InvalidArguments)`` listing every violation.

    Never raises: an exception while validating (a format checker or a validator of the
    arguments type that fails, arguments nested too deep) is one violation at ``$`` with
    validator ``validation_raised``, the exception as its ``__cause__``.
    """
    try:
        return _prepare(tool, arguments)
    except BaseException as exc:  # whatever a validator raises must not take the call down
        error = InvalidArguments(tool.name, [Violation(
            "$", f"the arguments could not be validated: validating them raised "
                 f"{type(exc).__name__}: {exc}", "validation_raised")])
        error.__cause__ = exc
        return Err(error)


def _prepare(tool: Tool, arguments: Any) -> Any | Err:
    if not isinstance(arguments, Mapping):
        return Err(InvalidArguments(tool.name, [Violation(
            "$", f"arguments must be a JSON object, got {type(arguments).__name__}", "type")]))
    validator, adapter = _compile(tool)
    errors = [] if validator is None else sorted(
        validator.iter_errors(arguments), key=lambda e: (list(map(str, e.path)), e.message))
    if errors:
        return Err(InvalidArguments(tool.name, [
            Violation(json_path(e.absolute_path), e.message, str(e.validator)) for e in errors
        ]))
    if adapter is None:
        return arguments
    try:
        return adapter.validate_python(arguments)
    except ValidationError as exc:
        return Err(InvalidArguments(tool.name, [
            Violation(json_path(err["loc"]), err["msg"], err["type"]) for err in exc.errors()
        ]))
