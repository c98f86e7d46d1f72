"""Reading a handler's arity: the rule both ``Tool`` and the executor apply."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from toolvisor.contract._errors import InvalidHandlerError

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)

RULE = (
    "a handler is called as handler(arguments) or handler(arguments, ctx): it takes one or two "
    "positional parameters (a second one receives ctx, even if it has a default; any further "
    "one must have a default), no *args and no keyword-only parameter without a default"
)
"""The arity rule, as every refusal states it."""


def handler_arity(handler: Callable[..., Any], tool_name: str) -> int:
    """How many of ``(arguments, ctx)`` the handler is called with: 1 or 2.

    The signature read is that of the callable as it will be called: a bound method without
    its ``self``, a ``functools.partial`` without the arguments it binds, a callable object's
    ``__call__``. Anything the rule (:data:`RULE`) refuses raises :class:`InvalidHandlerError`.
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
        raise InvalidHandlerError(f"tool {tool_name!r}: handler takes *args, arity unknown; {RULE}")
    required_kw = [
        p.name
        for p in params
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
    ]
    if required_kw:
        raise InvalidHandlerError(
            f"tool {tool_name!r}: handler has required keyword-only parameter(s) "
            f"{required_kw}; {RULE}"
        )
    positional = [p for p in params if p.kind in _POSITIONAL]
    required = sum(1 for p in positional if p.default is inspect.Parameter.empty)
    if not positional or required > 2:
        raise InvalidHandlerError(
            f"tool {tool_name!r}: handler has arity {required if positional else 0}; {RULE}"
        )
    return min(len(positional), 2)
