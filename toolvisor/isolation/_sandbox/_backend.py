"""``SandboxBackend``: routes each ``sandbox`` call to the pool of its tool's profile."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from toolvisor.contract import Tool
from toolvisor.isolation._backend import IsolationBackend, Runtime
from toolvisor.isolation._process._request import check_importable
from toolvisor.isolation._running import RunningCall
from toolvisor.isolation._sandbox._command import Profile, importable, profile
from toolvisor.isolation._sandbox._host import bwrap_path
from toolvisor.isolation._sandbox._options import sandbox_options
from toolvisor.isolation._sandbox._pool import SandboxPool


class SandboxBackend(IsolationBackend):
    """Runs each call in a bubblewrap sandbox (see ``docs/sandbox.md``). Tools with the same
    options and the same top-level package share a pool of sandboxes; each pool is the
    ``process`` pool's machinery (deadline kills, replacement, the context link), one pool
    per profile, started on its first call."""

    @classmethod
    def check(cls, tool: Tool) -> None:
        sandbox_options(tool.name, tool.options)
        check_importable(tool)
        if importable(getattr(tool.handler, "__module__", "")) is None:
            raise ValueError(f"tool {tool.name!r}: isolation='sandbox' imports the handler by "
                             "its module inside the sandbox, and the program's __main__ has no "
                             "module name there: define the handler in a module the program "
                             "imports, or run the program with `python -m`")

    @classmethod
    def check_host(cls, tools: Sequence[str]) -> None:
        """``RuntimeError`` naming the fix if this machine cannot make sandboxes."""
        bwrap_path()

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self._lock = threading.Lock()  # guards _pools and _closed
        self._pools: dict[Profile, SandboxPool] = {}
        self._closed = False

    def check_start(self, tool: Tool) -> None:
        bwrap_path()

    def _pool(self, tool: Tool, start: bool) -> SandboxPool | None:
        """The pool of ``tool``'s profile; a new one if ``start`` (``None`` once closed)."""
        key = profile(sandbox_options(tool.name, tool.options), tool.handler.__module__)
        with self._lock:
            pool = self._pools.get(key)
            if pool is None and start and not self._closed:
                pool = self._pools[key] = SandboxPool(self.runtime, key)
            return pool

    def submit(self, call: RunningCall) -> None:
        try:
            pool = self._pool(call.tool, start=True)
        except ImportError as exc:
            self.runtime.settle_soon(call, call.error(
                "not_found", f"the handler's module cannot be imported: {exc}", repr(exc)))
            return
        if pool is None:
            self.runtime.settle_soon(call, call.cancelled_error())
        else:
            pool.submit(call)

    def stop(self, call: RunningCall) -> None:
        pool = self._pool(call.tool, start=False)  # it was imported when the call started
        if pool is not None:
            pool.stop(call)

    def gauges(self) -> dict[str, int]:
        with self._lock:
            pools = list(self._pools.values())
        return {"workers_alive": sum(p.gauges()["workers_alive"] for p in pools)}

    def close(self, grace: float) -> None:
        with self._lock:
            self._closed = True
            pools = list(self._pools.values())
        for pool in pools:
            pool.close(grace)
