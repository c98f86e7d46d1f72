"""The entry point of a worker process: run requests from the parent until told to stop.

The parent sends one pickled :class:`WorkRequest` at a time over a pipe; the worker imports the
handler by module and qualified name, runs it through ``execute`` and sends the pickled result
back. The handler's context reaches the agent over a second pipe (``_remote_context.py``): its
state, sessions, completion keys, durable effects and cancel token are served there. Only the
parent's own messages are unpickled here (the pipes are private to the pool).
"""

from __future__ import annotations

import importlib
import pickle
import signal
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from toolvisor._lifeline import die_with_parent
from toolvisor.call import execute
from toolvisor.contract import CallContext, Err, HandlerResult, Tool, ToolError
from toolvisor.isolation._link._remote_context import (
    ContextLink,
    RemoteCall,
    remote_context,
    traced,
)

READY = b"ready"
"""A worker's first message: it started and can take calls. One that dies before sending it
failed to start, which the pool counts against its restart intensity."""


@dataclass(frozen=True, slots=True)
class HandlerAddress:
    """Where a worker finds a handler: ``module`` and ``qualname``, plus what a bare function
    needs to become a ``Tool`` there (the tool's name and arguments type)."""

    module: str
    qualname: str
    tool_name: str
    arguments_type: Any = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.module, self.qualname, self.tool_name)


@dataclass(frozen=True, slots=True)
class WorkRequest:
    """One call for a worker: where its handler is, its arguments and what of its context
    crosses the process boundary."""

    address: HandlerAddress
    arguments: Any
    call: RemoteCall


def resolve(address: HandlerAddress) -> Any:
    """The object ``module.qualname`` names; raises ``LookupError`` (or the import's error)."""
    target: Any = importlib.import_module(address.module)
    for part in address.qualname.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise LookupError(
                f"{address.module}.{address.qualname} does not exist (no {part!r})"
            ) from None
    return target


def tool_at(address: HandlerAddress) -> Tool:
    """The ``Tool`` to run: the object itself if ``@tool`` left one there, else one built
    around the function (with an open schema: the parent has validated the arguments)."""
    target = resolve(address)
    if isinstance(target, Tool):
        return target
    return Tool(name=address.tool_name, handler=target, isolation="process",
                arguments_type=address.arguments_type)


def _not_importable(address: HandlerAddress, ctx: CallContext, exc: BaseException) -> Err:
    return Err(ToolError(
        "not_found",
        f"tool error ({address.tool_name}): not_found: the handler "
        f"{address.module}.{address.qualname} cannot be imported in a worker process: "
        f"{type(exc).__name__}: {exc}",
        tool_name=address.tool_name, tool_call_id=ctx.tool_call_id, cause=repr(exc),
    ))


def dump_result(result: HandlerResult, ctx: CallContext, tool_name: str) -> bytes:
    """The pickled result, or a picklable stand-in when it does not survive a round trip.

    A ``ToolError`` whose cause (the handler's exception) cannot cross keeps its reason and
    message with ``{type, message}`` as cause; any other result that cannot cross becomes
    ``encoding_failed``.
    """
    try:
        data = pickle.dumps(result)
        pickle.loads(data)  # an exception type may pickle but fail to unpickle
        return data
    except Exception as exc:
        problem = exc
    if isinstance(result, Err) and isinstance(result.reason, ToolError):
        error = result.reason
        cause = error.cause
        plain = ({"type": type(cause).__qualname__, "message": str(cause)}
                 if isinstance(cause, BaseException) else repr(cause))
        return pickle.dumps(Err(ToolError(
            error.reason, error.message, tool_name=error.tool_name,
            tool_call_id=error.tool_call_id, cause=plain, code=error.code,
        )))
    return pickle.dumps(Err(ToolError(
        "encoding_failed",
        f"tool error ({tool_name}): encoding_failed: the result cannot be sent back from the "
        f"worker process: {type(problem).__name__}: {problem}",
        tool_name=tool_name, tool_call_id=ctx.tool_call_id,
        cause=f"{type(problem).__name__}: {problem}",
    )))


def serve(conn: Connection, link_conn: Connection,
          finish: Callable[[HandlerResult, CallContext, str], HandlerResult] | None = None,
          *, parent: int | None = None) -> None:
    """The worker's loop (the ``target`` of its ``Process``); returns on ``None`` or EOF.

    ``conn`` is this worker's end of its request pipe, ``link_conn`` of its context link;
    ``finish`` sees each result before it is sent (a sandbox's, to end itself when a limit was
    broken); ``parent`` is the pid of the process that started this one, whose death kills
    it (a handler stuck in a loop would never read EOF): ``None`` where something else sees to
    that (a sandbox's bwrap).
    """
    if parent is not None:
        die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when a worker stops
    link = ContextLink(lambda: link_conn)
    tools: dict[tuple[str, str, str], Tool] = {}
    conn.send_bytes(READY)
    while True:
        try:
            request: WorkRequest | None = pickle.loads(conn.recv_bytes())
        except EOFError:
            return
        if request is None:
            return
        ctx = remote_context(request.call, link)
        address = request.address
        tool = tools.get(address.key)
        result: HandlerResult
        if tool is None:
            try:
                tool = tools[address.key] = tool_at(address)
            except Exception as exc:
                result = _not_importable(address, ctx, exc)
        if tool is not None:
            with traced(request.call, link):
                result = execute(tool, request.arguments, ctx)
        if finish is not None:
            result = finish(result, ctx, address.tool_name)
        conn.send_bytes(dump_result(result, ctx, address.tool_name))
