"""``asyncio`` isolation: coroutine handlers on one runner-owned event loop, cancelled for real."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.call import aexecute, from_exception
from toolvisor.contract import HandlerResult
from toolvisor.isolation._backend import IsolationBackend, Runtime
from toolvisor.isolation._running import RunningCall

_log = get_event_log("tool_runner", isolation="asyncio")


async def _scoped(call: RunningCall, scope: Callable[[], AbstractContextManager[Any]]
                  ) -> HandlerResult:
    """The call within ``scope`` (its ``ctx.trace_scope``: its trace span current in the task)."""
    with scope():
        return await aexecute(call.tool, call.arguments, call.ctx)


class AsyncioBackend(IsolationBackend):
    """Runs each call as a task of ``aexecute`` on one event loop thread, started lazily.

    At the deadline (or on cancel) the task is cancelled: the coroutine sees ``CancelledError``.
    A handler that blocks the loop delays every other asyncio call (the deadline result is
    still delivered on time, by the runner's timer). The loop, ``_tasks`` and each
    ``call.worker`` (the call's task) are touched only on the loop thread; other threads reach
    them through ``call_soon_threadsafe``. Calls submitted from other threads wait in
    ``_starts`` (guarded by ``_starting``) until the loop begins them: one wake-up of the loop
    begins every call submitted since the last, instead of one wake-up per call.
    """

    coroutines = True
    default = True

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self._lock = threading.Lock()  # guards starting the loop once
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: dict[asyncio.Task[HandlerResult], RunningCall] = {}  # each task's call
        self._starting = threading.Lock()  # guards _starts
        self._starts: list[RunningCall] = []  # submitted, not yet begun on the loop
        self._on_done: Callable[[asyncio.Task[HandlerResult]], None] = self._finished  # every
        # task's done callback, made once

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="toolvisor-asyncio", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def submit(self, call: RunningCall) -> None:
        loop = self._running_loop()
        with self._starting:
            self._starts.append(call)
            if len(self._starts) > 1:  # the loop is already told: it begins this one too
                return
        loop.call_soon_threadsafe(self._begin_submitted)

    def _begin_submitted(self) -> None:
        """On the loop: begin every call submitted since the last time."""
        with self._starting:
            calls, self._starts = self._starts, []
        for call in calls:
            try:
                self._begin(call)
            except Exception as exc:  # this call alone fails; the others begin
                self.runtime.settle(call, from_exception(call.tool, call.ctx, exc))

    def _begin(self, call: RunningCall) -> None:
        if call.settled:
            return
        self.runtime.arm(call)
        scope = call.ctx.trace_scope
        coroutine = aexecute(call.tool, call.arguments, call.ctx) if scope is None \
            else _scoped(call, scope)
        task = asyncio.get_running_loop().create_task(coroutine)
        call.worker = task
        self._tasks[task] = call  # what _finished finds it by: no closure per call (~4
        task.add_done_callback(self._on_done)  # objects the collector tracks while it waits)

    def _finished(self, task: asyncio.Task[HandlerResult]) -> None:
        call = self._tasks.pop(task)
        if task.cancelled():
            if not call.settled:  # cancelled by something other than this runner
                self.runtime.settle(call, call.cancelled_error())
            return
        exc = task.exception()
        self.runtime.settle(call, task.result() if exc is None
                            else from_exception(call.tool, call.ctx, exc))

    def stop(self, call: RunningCall) -> None:
        """Cancel ``call``'s task (called once the call was claimed)."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._cancel, call)

    @staticmethod
    def _cancel(call: RunningCall) -> None:
        task = call.worker
        if isinstance(task, asyncio.Task) and not task.done():
            task.cancel()
            _log.info("call_cancelled", **call.log_fields())

    def close(self, grace: float) -> None:
        """Cancel what is left, wait up to ``grace`` for it to finish, then close the loop."""
        with self._lock:
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def drain() -> None:
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=grace)
            for task in self._tasks:
                _log.warning("task_left_running", task=task.get_name())
            await loop.shutdown_asyncgens()
            loop.stop()

        # Everything that needs the loop runs on its own thread: the closing thread may be
        # running an event loop of its own (close() called inside asyncio.run).
        loop.call_soon_threadsafe(lambda: loop.create_task(drain()))
        thread.join()
        loop.close()
