"""The program inside a sandbox: set the limits, then serve calls as a ``process`` worker does.

Run by bwrap as ``python -m toolvisor.isolation._sandbox._child CONN LINK LIMITS MAIN``: the
file descriptors of its two pipes (inherited through bwrap), its limits (and its allow-list
proxy's socket, if it has one: ``_proxy.py``) as JSON, and the
module the agent's program was run as (``-`` for none), imported as ``__main__`` here (as
multiprocessing does), so that a handler the program defines is found under that name.

The limits are set after the imports (the interpreter's own start-up is not the handler's to
pay for) and with equal hard limits, so the handler cannot raise them. A handler that runs out
of memory or file descriptors ends the sandbox with an exit code that names the limit; the CPU
and file-size limits end it with the kernel's signals (SIGXCPU, SIGXFSZ).
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import pickle
import resource
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any

from toolvisor.contract import CallContext, CapabilityError, Err, HandlerResult, ToolError
from toolvisor.isolation._process._worker import serve
from toolvisor.isolation._sandbox._proxy import relay_to
from toolvisor.isolation._sandbox._wire import allowed, safe_loads

EXIT_MEMORY = 100
EXIT_OPEN_FILES = 101
LIMIT_EXITS = {EXIT_MEMORY: "memory_limit", EXIT_OPEN_FILES: "open_files_limit"}
"""The exit codes a sandbox ends with when its handler broke a limit, by the limit's code."""


def set_limits(limits: dict[str, Any]) -> None:
    """The rlimits of this process and every process it starts."""
    cpu = limits["cpu_seconds"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU at the soft limit
    for name, value in (("RLIMIT_AS", limits["memory"]), ("RLIMIT_FSIZE", limits["file_size"]),
                        ("RLIMIT_NOFILE", limits["open_files"]),
                        ("RLIMIT_NPROC", limits["processes"])):
        resource.setrlimit(getattr(resource, name), (value, value))
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it; the limit ends the call


def _broke(exc: BaseException) -> int | None:
    """The exit code of the limit ``exc`` shows was broken, if it shows one."""
    if isinstance(exc, MemoryError):
        return EXIT_MEMORY
    if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
        return EXIT_OPEN_FILES
    return None


def finish(result: HandlerResult, ctx: CallContext, tool_name: str) -> HandlerResult:
    """What leaves the sandbox for ``result``: the sandbox ends instead when the handler broke
    a limit; a cause of a class that may not cross becomes ``{type, message}``, any other
    value that may not cross makes the result ``encoding_failed`` (the agent would take it
    for a forgery and kill the sandbox)."""
    if isinstance(result, Err) and isinstance(result.reason, ToolError):
        result = _portable_cause(result.reason, result)
    try:
        safe_loads(pickle.dumps(result))
    except CapabilityError as exc:
        detail = exc.message.partition(": ")[2]
        return Err(ToolError(
            "encoding_failed", f"tool error ({tool_name}): encoding_failed: the result cannot "
            f"leave the sandbox: {detail} (plain data and the result types only)",
            tool_name=tool_name, tool_call_id=ctx.tool_call_id, cause=detail))
    except Exception:
        return result  # it cannot be pickled at all: dump_result says so
    return result


def _portable_cause(error: ToolError, result: Err) -> Err:
    """``result``, or the limit's exit when its cause shows one was broken."""
    cause = error.cause
    if isinstance(cause, BaseException):
        code = _broke(cause)
        if code is not None:
            os._exit(code)
        if not allowed(cause):
            return Err(ToolError(error.reason, error.message, tool_name=error.tool_name,
                                 tool_call_id=error.tool_call_id, code=error.code,
                                 cause={"type": type(cause).__qualname__,
                                        "message": str(cause)}))
    return result


def main(argv: list[str]) -> None:
    conn_fd, link_fd, limits, main = int(argv[0]), int(argv[1]), json.loads(argv[2]), argv[3]
    conn, link = Connection(conn_fd), Connection(link_fd)
    if main != "-":
        sys.modules["__main__"] = importlib.import_module(main)
    if limits["proxy"] is not None:
        relay_to(limits["proxy"])
    set_limits(limits)
    try:
        serve(conn, link, finish)
    except MemoryError:
        os._exit(EXIT_MEMORY)


if __name__ == "__main__":
    main(sys.argv[1:])
