"""Reading a handler's arity: the rule both ``Tool`` and the executor apply."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from toolvisor.contract._errors import InvalidHandlerError

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def handler_arity(handler: Callable[..., Any], tool_name: str) -> int:
    """Count the positional parameters without defaults; refuse anything but 1 or 2.

    ``*args`` and required keyword-only parameters make a handler invalid: the runtime could
    not call it as ``handler(arguments)`` or ``handler(arguments, ctx)``.
    """
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError) as exc:
        raise InvalidHandlerError(
            f"tool {tool_name!r}: cannot read the handler's signature ({exc}); "
            "wrap it in a def taking (arguments) or (arguments, ctx)"
        ) from exc
    params = list(signature.parameters.values())
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        raise InvalidHandlerError(
            f"tool {tool_name!r}: handler takes *args, arity unknown; "
            "a handler takes (arguments) or (arguments, ctx)"
        )
    required_kw = [
        p.name
        for p in params
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
    ]
    if required_kw:
        raise InvalidHandlerError(
            f"tool {tool_name!r}: handler has required keyword-only parameter(s) "
            f"{required_kw}; a handler takes (arguments) or (arguments, ctx)"
        )
    arity = sum(1 for p in params if p.kind in _POSITIONAL and p.default is inspect.Parameter.empty)
    if arity not in (1, 2):
        raise InvalidHandlerError(
            f"tool {tool_name!r}: handler has arity {arity}; "
            "a handler takes (arguments) or (arguments, ctx)"
        )
    return arity
