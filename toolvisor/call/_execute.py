"""``execute``: invoke exactly one handler and normalise whatever it does into a result.

The five legal results come back as the very same object. Everything else (a raise, an exit,
an illegal return, a missing handler) becomes ``Err(ToolError(reason))``. No exception escapes:
a ``BaseException`` leaving a pykka actor would stop every actor in the process.
"""

from __future__ import annotations

import asyncio
from typing import Any

from toolvisor.call._validation import prepare_arguments
from toolvisor.contract import (
    LEGAL_RESULT_TYPES,
    CallContext,
    Err,
    Handler,
    HandlerResult,
    Pending,
    Tool,
    ToolError,
)

_LEGAL_NAMES = "Ok, Err, AskUser, Halt or Pending"


def _error(tool: Tool, ctx: CallContext, reason: Any, detail: str, cause: Any, *,
           code: str | None = None) -> Err:
    return Err(ToolError(
        reason,
        f"tool error ({tool.name}): {reason}: {detail}",
        tool_name=tool.name,
        tool_call_id=ctx.tool_call_id,
        cause=cause,
        code=code,
    ))


def not_found(tool: Tool, ctx: CallContext) -> Err:
    """The result of calling a tool that has no handler."""
    return _error(tool, ctx, "not_found",
                  f"tool {tool.name!r} has no handler (it is declared for manual use)", None)


def from_exception(tool: Tool, ctx: CallContext, exc: BaseException) -> Err:
    """``handler_raised`` for an ``Exception``, ``handler_exit`` for any other ``BaseException``."""
    if isinstance(exc, Exception):
        return _error(tool, ctx, "handler_raised", f"{type(exc).__name__}: {exc}", exc)
    if isinstance(exc, SystemExit):
        return _error(tool, ctx, "handler_exit", f"handler called exit({exc.code!r})", exc.code)
    return _error(tool, ctx, "handler_exit", f"handler exited with {type(exc).__name__}", exc)


def normalise(tool: Tool, ctx: CallContext, returned: Any) -> HandlerResult:
    """A legal result unchanged; anything else is ``invalid_return`` with the value as cause.

    ``Pending`` is legal only after the handler took ``ctx.completion_key()``: otherwise
    nobody could ever resolve the call (code ``pending_tool_missing_completion_key``).
    """
    if isinstance(returned, Pending) and (
            ctx.completion_keys is None or ctx.completion_keys.issued is None):
        return _error(
            tool, ctx, "invalid_return",
            "handler returned Pending without taking ctx.completion_key() first; take the "
            "key, hand it to whoever will resolve the call, then return Pending",
            returned, code="pending_tool_missing_completion_key",
        )
    if isinstance(returned, LEGAL_RESULT_TYPES):
        return returned  # type: ignore[return-value]
    return _error(
        tool, ctx, "invalid_return",
        f"handler returned {type(returned).__name__}, expected {_LEGAL_NAMES}", returned,
    )


def _prepare(tool: Tool, arguments: Any, ctx: CallContext) -> tuple[Handler, Any] | Err:
    """The handler and the value it receives, or the ``Err`` that stops the call first."""
    handler = tool.handler
    if handler is None:
        return not_found(tool, ctx)
    prepared = prepare_arguments(tool, arguments)
    if isinstance(prepared, Err):
        return prepared
    return handler, prepared


def execute(tool: Tool, arguments: Any, ctx: CallContext | None = None) -> HandlerResult:
    """Run ``tool``'s handler once, synchronously, in the calling thread.

    The caller has already looked ``tool`` up. Arguments failing the schema never reach the
    handler. ``async def`` handlers are refused here: run them with ``isolation="asyncio"``
    through a ``ToolRunner``, or await :func:`aexecute`.
    """
    if ctx is None:
        ctx = CallContext()
    if tool.is_async:
        raise TypeError(
            f"tool {tool.name!r} has an async def handler; execute() is synchronous. Run it "
            "with isolation='asyncio' through a ToolRunner, or await aexecute()"
        )
    ready = _prepare(tool, arguments, ctx)
    if isinstance(ready, Err):
        return ready
    handler, prepared = ready
    try:
        returned = handler(prepared) if tool.arity == 1 else handler(prepared, ctx)
    except BaseException as exc:
        return from_exception(tool, ctx, exc)
    return normalise(tool, ctx, returned)


async def aexecute(tool: Tool, arguments: Any, ctx: CallContext | None = None) -> HandlerResult:
    """The coroutine twin of :func:`execute`, for ``async def`` handlers (and sync ones).

    Cancellation of the awaiting task propagates: that is the runner cancelling the call,
    not the handler failing.
    """
    if ctx is None:
        ctx = CallContext()
    ready = _prepare(tool, arguments, ctx)
    if isinstance(ready, Err):
        return ready
    handler, prepared = ready
    del ready  # not kept through the await: one object fewer for the collector per call
    try:
        returned = handler(prepared) if tool.arity == 1 else handler(prepared, ctx)
        if tool.is_async:
            returned = await returned
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        return from_exception(tool, ctx, exc)
    return normalise(tool, ctx, returned)
