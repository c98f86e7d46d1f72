"""Reading what a sandbox sends: bounded in size, and unpickled under an allow-list.

A sandbox runs code nobody vetted, so its messages (results, context requests) are never
unpickled as they are: a pickle can name any callable and the agent would call it. Only the
classes below may be named (plain data and the result types, as Python's documentation on
restricting globals shows); a message naming another, or one longer than ``MAX_MESSAGE``, is
a ``CapabilityError`` with code ``link_violation``, and the sandbox is killed.
"""

from __future__ import annotations

import builtins
import io
import pickle
from multiprocessing.connection import Connection
from typing import Any

from toolvisor.contract import (
    AskUser,
    CapabilityError,
    Err,
    Halt,
    InvalidArguments,
    Ok,
    Pending,
    ToolCall,
    ToolError,
    Violation,
)
from toolvisor.isolation._link._remote_context import Callback, link_closed

MAX_MESSAGE = 16 << 20
"""The most bytes one message from a sandbox may hold."""
MAX_VALUES = 1 << 18
"""The most values one message may hold, counting a value each time it is reached: a pickle
can share one list many times over, and a few bytes would otherwise unfold, in the agent's
encoders, into more than it can hold (or never end, for a cycle)."""

_PLAIN = (set, frozenset, bytearray, complex, range, slice)
_REBUILD_TOOL_ERROR = ToolError("handler_raised", "").__reduce__()[0]  # how a ToolError pickles
_ALLOWED: dict[tuple[str, str], Any] = {
    (found.__module__, found.__qualname__): found
    for found in (*_PLAIN, AskUser, CapabilityError, Err, Halt, InvalidArguments, Ok, Pending,
                  ToolCall, ToolError, Violation, Callback, _REBUILD_TOOL_ERROR,
                  *(value for value in vars(builtins).values()
                    if isinstance(value, type) and issubclass(value, BaseException)))
}


def allowed(value: object) -> bool:
    """Whether ``value``'s class may cross out of a sandbox by name."""
    cls = type(value)
    return _ALLOWED.get((cls.__module__, cls.__qualname__)) is cls


def violation(detail: str) -> CapabilityError:
    return CapabilityError("link_violation", f"the sandbox broke its link's protocol: {detail}")


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = _ALLOWED.get((module, name))
        if found is None:
            raise violation(f"a message names {module}.{name}, which may not cross")
        return found


def safe_loads(data: bytes) -> Any:
    """``data`` unpickled, naming only allowed classes and holding at most ``MAX_VALUES``
    values; ``link_violation`` otherwise."""
    try:
        value = _Unpickler(io.BytesIO(data)).load()
    except CapabilityError:
        raise
    except Exception as exc:
        raise violation(f"a message cannot be read ({type(exc).__name__}: {exc})") from exc
    _count(value)
    return value


def _count(value: Any) -> None:
    """Walk ``value`` as an encoder would (shared parts each time they are reached)."""
    pending, seen = [value], 0
    while pending:
        seen += 1
        if seen > MAX_VALUES:
            raise violation(f"a message holds more than {MAX_VALUES} values (counting each "
                            "time a shared one is reached)")
        item = pending.pop()
        if isinstance(item, str | bytes | bytearray | int | float | complex | range | None):
            continue
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            pending.extend(item)
        else:  # an allowed class: its fields, and an exception's arguments
            pending.extend(getattr(item, "__dict__", {}).values())
            pending.extend(getattr(item, name) for name in getattr(item, "__slots__", ())
                           if hasattr(item, name))
            if isinstance(item, BaseException):
                pending.extend(item.args)


def read_bytes(conn: Connection) -> bytes:
    """The next message's bytes; ``link_closed`` at EOF, ``link_violation`` when too long."""
    try:
        return conn.recv_bytes(MAX_MESSAGE)
    except EOFError as exc:
        raise link_closed(exc) from exc
    except OSError as exc:
        if "bad message length" in str(exc):
            raise violation(f"a message is longer than {MAX_MESSAGE} bytes") from exc
        raise link_closed(exc) from exc


def read_message(conn: Connection) -> Any:
    """The next message from a sandbox, read and unpickled safely."""
    return safe_loads(read_bytes(conn))
