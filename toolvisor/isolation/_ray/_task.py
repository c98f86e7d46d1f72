"""What runs on the Ray cluster: one call through ``execute``, its result pickled back; the
handler's context is served by the agent over a link the task opens on first use. A batch
(``run_batch``) runs several calls of one tool at once in one task, each on a thread of its
worker, and streams their results back as they finish."""

from __future__ import annotations

import functools
import pickle
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from toolvisor.call import execute
from toolvisor.contract import Tool
from toolvisor.isolation._link._remote_context import (
    ContextLink,
    RemoteCall,
    remote_context,
    traced,
)
from toolvisor.isolation._process._worker import dump_result
from toolvisor.isolation._ray._links import LinkAddress

CallFields = tuple[RemoteCall, LinkAddress]
"""What of the context crosses to the cluster, and where the task reaches the rest of it."""
Finished = tuple[int, bytes, bool]
"""One call of a batch that finished: its index, and its pickled result (``False``) or the
pickled exception that escaped ``run_task`` (``True``)."""
BATCH_LIMIT = 64
"""The most calls one batch carries (each runs on a thread of its own in the worker)."""

def run_task(tool: Tool, arguments: Any, fields: CallFields) -> bytes:
    """Run ``tool``'s handler once and return the pickled result (a Ray task's body)."""
    call, address = fields
    link = ContextLink(address.connect)
    try:
        ctx = remote_context(call, link)
        with traced(call, link):
            result = execute(tool, arguments, ctx)
        return dump_result(result, ctx, tool.name)
    finally:
        link.close()


class _Threads:
    """This worker process's threads for batches, kept between its tasks: each call gets an
    idle one, or a new one if none is idle, so no call ever waits behind another. ``_idle``
    (each idle thread's inbox) is guarded by ``_lock``; each thread owns its inbox."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Callable[[], None]]] = []

    def run(self, work: Callable[[], None]) -> None:
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), daemon=True,
                             name="toolvisor-ray-call").start()
        inbox.put(work)

    def _serve(self, inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            inbox.get()()
            with self._lock:
                self._idle.append(inbox)


_threads = _Threads()


def run_batch(tool: Tool, calls: list[tuple[Any, CallFields]]) -> Iterator[list[Finished]]:
    """Run every call of ``calls`` at once, each on its own thread; yield what finished as it
    finishes (all that finished since the last yield, together). Returns once every call has
    (a hung call keeps the task running until the agent cancels it)."""
    done: queue.SimpleQueue[Finished] = queue.SimpleQueue()

    def one(index: int, arguments: Any, fields: CallFields) -> None:
        try:
            done.put((index, run_task(tool, arguments, fields), False))
        except Exception as exc:
            try:
                data = pickle.dumps(exc)
                pickle.loads(data)
            except Exception:
                data = pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))
            done.put((index, data, True))

    for index, (arguments, fields) in enumerate(calls):
        _threads.run(functools.partial(one, index, arguments, fields))
    left = len(calls)
    while left:
        finished = [done.get()]
        while True:
            try:
                finished.append(done.get_nowait())
            except queue.Empty:
                break
        left -= len(finished)
        yield finished
