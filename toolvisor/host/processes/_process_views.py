"""A run's background processes as its host (``agent.processes(run_id)``) and its calls
(``ctx.processes``) see them: thin views over the agent's ``Processes``, safe from any
thread."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from toolvisor.contract import CancelToken, Err, Ok, ProcessError, ProcessInfo, check_seconds
from toolvisor.host.processes._processes import Processes

_POLL = 0.05  # seconds between looks at a waiting call's cancel token, or at the store


class HostProcesses:
    """One run's processes as the host sees them (``agent.processes(run_id)``): wait, list,
    cancel. ``cancelled`` is the token of whoever waits (a call's): a wait ends with it."""

    def __init__(self, processes: Processes, run_id: str,
                 cancelled: CancelToken | None = None) -> None:
        self._processes = processes
        self.run_id = run_id
        self._cancelled = threading.Event() if cancelled is None else cancelled

    def wait(self, handle: str, timeout: float | None = None) -> Ok | Err | None:
        """The process's ``Ok`` or ``Err`` once it ended; ``None`` if it still runs after
        ``timeout`` seconds (``None``: wait for its end)."""
        found = self._processes.find(self.run_id, handle)
        deadline = None if timeout is None else time.monotonic() + _seconds(timeout)
        while True:
            result = self._processes.outcome(found)
            if result is not None:
                return result
            left = self._left(deadline)
            if left is not None and left <= 0:
                return None
            self._processes.pause(found, _POLL if left is None else min(_POLL, left),
                                 self._cancelled)

    async def wait_async(self, handle: str, timeout: float | None = None) -> Ok | Err | None:
        """:meth:`wait` for an ``async def`` handler: the event loop goes on meanwhile."""
        found = self._processes.find(self.run_id, handle)
        deadline = None if timeout is None else time.monotonic() + _seconds(timeout)
        while True:
            result = self._processes.outcome(found)
            if result is not None:
                return result
            left = self._left(deadline)
            if left is not None and left <= 0:
                return None
            await asyncio.sleep(_POLL if left is None else min(_POLL, left))

    def _left(self, deadline: float | None) -> float | None:
        if self._cancelled.is_set():
            raise ProcessError("process_wait_cancelled",
                               "the call waiting for the process was cancelled or has ended")
        return None if deadline is None else deadline - time.monotonic()

    def list(self) -> list[ProcessInfo]:
        """The run's processes, in the order they started."""
        return self._processes.list(self.run_id)

    def cancel(self, handle: str) -> bool:
        """Cancel the process (it ends ``Err`` with code ``cancelled``); whether it was
        running."""
        return self._processes.cancel(self.run_id, handle)


class CallProcesses(HostProcesses):
    """``ctx.processes`` of one call execution: the run's processes, and ``start``. The
    call's token is set when the call ends: it can start nothing after that."""

    def __init__(self, processes: Processes, run_id: str, caller: str,
                 cancelled: threading.Event, turn: int | None = None) -> None:
        super().__init__(processes, run_id, cancelled)
        self._caller = caller
        self._turn = turn
        self._token = cancelled
        self._ordinals = itertools.count(1)

    def start(self, fn: Callable[..., Any] | str, arguments: Mapping[str, Any],  # noqa: PLR0917
              isolation: str | None = None, detached: bool = False,
              timeout: float | None = None, retryable: bool = False,
              options: Mapping[str, Any] | None = None) -> str:
        """Start ``fn`` with ``arguments`` as a process of the run; its handle. (The settings
        may come by position: that is how the context link forwards them.)"""
        if self._token.is_set():
            raise ProcessError("process_call_finished", (
                "the call that would start this process has ended (or was cancelled): start "
                "processes while the handler runs"))
        return self._processes.start(
            self.run_id, self._caller, next(self._ordinals), fn, arguments,
            isolation=isolation, detached=detached, timeout=timeout, retryable=retryable,
            options=options, turn=self._turn)


def _seconds(value: float) -> float:
    check_seconds("timeout", value, positive=False)
    return float(value)
