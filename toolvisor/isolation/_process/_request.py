"""What crosses to a worker process for one call: the handler's address, the arguments and the
context's portable part, pickled here (in the agent), where a failure is the call's error."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import pickle
import weakref

from toolvisor.call import prepare_arguments
from toolvisor.contract import Err, Tool
from toolvisor.isolation._link._remote_context import RemoteCall
from toolvisor.isolation._process._worker import HandlerAddress, WorkRequest, resolve
from toolvisor.isolation._running import RunningCall


def work_request(call: RunningCall) -> tuple[bytes, int] | Err:
    """``call``'s pickled ``WorkRequest`` and its link tag, or the error that ends the call:
    its arguments are invalid (checked here: a bad call never costs a round trip), its handler
    cannot be imported in a worker, or its arguments cannot be pickled."""
    prepared = prepare_arguments(call.tool, call.arguments)
    if isinstance(prepared, Err):
        return prepared
    address = address_of(call.tool)
    if isinstance(address, str):
        return call.error(
            "not_found", f"the handler cannot be imported in a worker process: {address}",
            address)
    try:
        remote = RemoteCall.of(call.ctx)
        return pickle.dumps(WorkRequest(address, call.arguments, remote)), remote.tag
    except Exception as exc:
        return call.error(
            "encoding_failed",
            f"the arguments cannot be sent to a worker process: {type(exc).__name__}: {exc}",
            f"{type(exc).__name__}: {exc}")


def check_importable(tool: Tool) -> None:
    """When a ``process`` tool is built: a worker imports the handler by module and qualified
    name, which only leads back to a plain function defined outside any function."""
    handler, tool_name = tool.handler, tool.name
    if inspect.isfunction(handler):
        if "<locals>" not in handler.__qualname__:
            return
        found = "a nested one"
    elif inspect.ismethod(handler):
        found = "a bound method (its name leads to the unbound function)"
    elif isinstance(handler, functools.partial):
        found = "a functools.partial"
    else:
        found = f"a {type(handler).__name__} object"
    raise ValueError(
        f"tool {tool_name!r}: isolation={tool.isolation!r} needs a handler importable by "
        f"qualified name (a module-level function), not {found}"
    )


_addresses: weakref.WeakKeyDictionary[Tool, HandlerAddress | str]
_addresses = weakref.WeakKeyDictionary()


def address_of(tool: Tool) -> HandlerAddress | str:
    """Where a worker imports ``tool``'s handler, or why it cannot (checked here, once per tool).

    The name must lead to the handler itself or to a ``Tool`` (made by ``@tool`` or
    ``@function_tool``) around it.
    """
    found = _addresses.get(tool)
    if found is not None:
        return found
    handler = tool.handler
    module = getattr(handler, "__module__", None)
    qualname = getattr(handler, "__qualname__", None)
    if not module or not qualname:
        found = f"the handler {handler!r} has no __module__/__qualname__"
    else:
        address = HandlerAddress(module, qualname, tool.name, tool.arguments_type)
        try:
            target = resolve(address)
        except Exception as exc:
            target = exc
        if target is handler:
            found = address
        elif isinstance(target, Tool) and target.handler is handler:
            # the worker runs the Tool found there, with its own arguments type (which may be
            # a class made at run time, such as @function_tool's, that pickle cannot name)
            found = dataclasses.replace(address, arguments_type=None)
        else:
            found = (f"{module}.{qualname} does not name the handler in its module "
                     f"({target!r}); isolation='process' needs a module-level function")
    _addresses[tool] = found
    return found
