"""``ctx.processes`` of a handler that runs out of process: each use a request over the link.

The agent starts, waits for, lists and cancels the run's processes (``toolvisor.host``); a
worker only forwards. A function crosses by name (``module:qualname``, a worker's
``__mp_main__`` named as the agent's ``__main__``), never as a callback: the process runs
wherever its isolation says, not in this worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from toolvisor.contract import Err, Ok, ProcessInfo, Tool
from toolvisor.isolation._link._asking import Asks

_POLL = 0.05  # seconds between looks while an async handler waits


class RemoteProcesses:
    """The run's processes, served by the agent over ``link`` for the call ``tag`` names."""

    def __init__(self, link: Asks, tag: int) -> None:
        self._link = link
        self._tag = tag

    def _ask(self, method: str, *args: Any) -> Any:
        return self._link.ask(self._tag, "process_admin", method, *args)

    def start(self, fn: Callable[..., Any] | str, arguments: Mapping[str, Any], *,
              isolation: str | None = None, detached: bool = False,
              timeout: float | None = None, retryable: bool = False,
              options: Mapping[str, Any] | None = None) -> str:
        handle: str = self._ask("start", by_name(fn), arguments, isolation, detached, timeout,
                                retryable, options)
        return handle

    def wait(self, handle: str, timeout: float | None = None) -> Ok | Err | None:
        result: Ok | Err | None = self._ask("wait", handle, timeout)
        return result

    async def wait_async(self, handle: str, timeout: float | None = None) -> Ok | Err | None:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            result = self.wait(handle, 0)
            if result is not None or (deadline is not None and loop.time() >= deadline):
                return result
            await asyncio.sleep(_POLL)

    def list(self) -> list[ProcessInfo]:
        found: list[ProcessInfo] = self._ask("list")
        return found

    def cancel(self, handle: str) -> bool:
        return bool(self._ask("cancel", handle))


def by_name(fn: Callable[..., Any] | str) -> str:
    """``fn``'s name, ``module:qualname``: ``TypeError`` if it has none."""
    if isinstance(fn, str):
        return fn
    named = fn.handler if isinstance(fn, Tool) else fn
    module = getattr(named, "__module__", None)
    qualname = getattr(named, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        raise TypeError(f"a process runs a module-level function or Tool, found by its module "
                        f"and name, got {fn!r}; define it at the top level of a module")
    return f"{'__main__' if module == '__mp_main__' else module}:{qualname}"
