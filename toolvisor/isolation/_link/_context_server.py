"""The agent's end of a worker's context link: each request performed on the call's real context.

One thread per link (a ``process`` worker's, or a Ray task's connection) reads the worker's
requests and performs each on the capabilities of the call it runs now: the same objects an
in-process handler gets, so journaling, keys, state writes and the cancel token behave the
same. Only the methods ``SERVED`` lists are performed. A callable argument is a ``Callback``:
calling it asks the worker to run its function and waits for the answer, serving any request
the function itself makes meanwhile.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any

from toolvisor.contract import CallContext, CapabilityError
from toolvisor.isolation._link._asking import portable
from toolvisor.isolation._link._remote_context import (
    SERVED,
    Callback,
    receive,
    send,
    transmit,
)

_LINK_WAIT = 5.0  # seconds close gives a link thread still serving a request of an ended call

ContextOf = Callable[[int], CallContext | None]
"""The context of the call a link's worker runs now if its tag is the one given, else ``None``."""

Read = Callable[[Connection], Any]
"""How a link's next message is read (a sandbox's are read under an allow-list)."""
Served = Mapping[str, frozenset[str]]
"""The methods of each capability a link performs (``SERVED``, or fewer)."""


def serve_link(conn: Connection, context_of: ContextOf, read: Read = receive,
               served: Served = SERVED) -> None:
    """Answer the requests on ``conn`` until the worker's end closes, then close it; a
    ``CapabilityError`` from ``read`` other than ``link_closed`` is raised. Only the methods
    ``served`` lists are performed (a sandbox's link serves fewer)."""
    try:
        while True:
            _answer(conn, context_of, read(conn), read, served)
    except CapabilityError as exc:
        if exc.code != "link_closed":
            raise
    finally:
        conn.close()


def _answer(conn: Connection, context_of: ContextOf, message: Any, read: Read,
            served: Served) -> None:
    try:
        kind, tag, target, method, args = message
        if kind != "ask" or method not in served.get(target, ()):
            raise CapabilityError("not_served",
                                  f"a worker asked for {target}.{method}, which is not served")
        ctx = context_of(tag)
        if ctx is None:
            raise CapabilityError("call_finished",
                                  "the call this request belongs to has ended")
        capability = getattr(ctx, target)
        if capability is None:
            raise CapabilityError(f"{target}_unavailable", f"this call has no {target}")
        value = getattr(capability, method)(*(
            _Callback(conn, context_of, a.index, read, served) if isinstance(a, Callback) else a
            for a in args))
    except Exception as exc:  # a closed link included: the reply's send then raises it again
        send(conn, ("raised", portable(exc)))
    else:
        send(conn, ("done", value))


class _Callback:
    """A worker's function, called from the agent: it runs in the worker, over the link."""

    def __init__(self, conn: Connection, context_of: ContextOf, index: int, read: Read,
                 served: Served) -> None:
        self._conn = conn
        self._context_of = context_of
        self._index = index
        self._read = read
        self._served = served

    def __call__(self, *args: Any) -> Any:
        transmit(self._conn, pickle.dumps(("call", self._index, args)))  # a failure raises here
        while True:
            message = self._read(self._conn)
            if message[0] == "ask":
                _answer(self._conn, self._context_of, message, self._read, self._served)
                continue
            kind, value = message
            if kind == "done":
                return value
            raise value


def join_links(threads: list[threading.Thread], log: Any) -> None:
    """Wait for the link threads of workers that are gone. A thread still inside a request
    after ``_LINK_WAIT`` (an ``await_event_json`` whose durable effects nobody cancels, when a
    runner is used without an agent) is left to finish as a daemon, and logged."""
    for thread in threads:
        thread.join(_LINK_WAIT)
    left = [t.name for t in threads if t.is_alive()]
    if left:
        log.warning("link_threads_left_busy", threads=left)
