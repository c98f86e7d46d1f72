"""``IsolationBackend``: what runs a call's handler somewhere, and the registry of backends.

The runner owns each call's lifecycle (admission, deadline, settling exactly once, cancel,
close); a backend only starts a handler where its isolation says and stops it when told, the
way an httpx transport sends a request and knows nothing of the client around it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from toolvisor.contract import HandlerResult, IsolationRules, Tool, register_isolation
from toolvisor.isolation._running import RunningCall

MpContext = Literal["forkserver", "spawn"]

GiveUp = Callable[[], None]
"""Called when the runner abandons a caller's thread stuck in a handler (see ``run_here``)."""


@dataclass(frozen=True, slots=True)
class Runtime:
    """What a ``ToolRunner`` lends each of its backends, and the settings they read.

    * ``arm(call)``: start the call's deadline; call it once, when the handler starts (time
      waiting for a thread or a worker does not count);
    * ``settle(call, result)``: deliver the handler's result, from any thread; a result that
      comes after the deadline or a cancel is discarded (and counted);
    * ``settle_soon(call, result)``: the same, from the runner's timer thread (for a call that
      cannot start: never deliver on the thread that is starting it);
    * ``count(name)``: bump one of ``RunnerStats``' counters;
    * the runner's sizing settings, each read by the backend it names.
    """

    arm: Callable[[RunningCall], None]
    settle: Callable[[RunningCall, HandlerResult], None]
    settle_soon: Callable[[RunningCall, HandlerResult], None]
    count: Callable[[str], None]
    max_threads: int = 256
    thread_idle_timeout: float = 30.0
    process_workers: int = 2
    mp_context: MpContext = "forkserver"


class IsolationBackend:
    """Runs handlers in one isolation (``thread``, ``process``, ``asyncio``, ``ray``, ...).

    A ``ToolRunner`` builds one of each registered backend (``register_backend``) with its
    ``Runtime``, and dispatches each call to the backend named by its tool's ``isolation``.
    Subclasses implement :meth:`submit` and :meth:`stop`; the rest has defaults.
    """

    coroutines: ClassVar[bool] = False
    """Whether it runs ``async def`` handlers (else plain ones)."""
    default: ClassVar[bool] = False
    """Whether a tool that names no isolation gets this one (one per kind of handler)."""
    runs_here: ClassVar[bool] = False
    """Whether :meth:`run_here` can run a handler on the caller's own thread."""

    @classmethod
    def check(cls, tool: Tool) -> None:
        """Raise if ``tool`` can never run here (its handler, its ``options``, an SDK that is
        not installed); called when the tool is built. By default: it takes no options."""
        if tool.options:
            raise ValueError(f"tool {tool.name!r}: isolation={tool.isolation!r} takes no "
                             f"options, got {sorted(tool.options)}")

    @classmethod
    def check_host(cls, tools: Sequence[str]) -> None:
        """Raise ``RuntimeError`` naming the fix if this machine cannot run this isolation at
        all (a program it needs is missing); called when an agent with ``tools`` of this
        isolation starts. By default: it can."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def check_start(self, tool: Tool) -> None:
        """Raise, on the caller's thread, if a call of ``tool`` cannot start now (before it is
        admitted; ``tool`` has a handler)."""

    def submit(self, call: RunningCall) -> None:
        """Start ``call``'s handler without waiting: ``arm`` it when the handler starts, then
        ``settle`` it with the result; a call that cannot start is settled with its error."""
        raise NotImplementedError

    def stop(self, call: RunningCall) -> None:
        """Stop ``call``'s handler, which was claimed by its deadline or a cancel (quick: it
        runs on the claiming thread)."""
        raise NotImplementedError

    def run_here(self, call: RunningCall, give_up: GiveUp) -> None:
        """Run ``call``'s handler on the calling thread (only if :attr:`runs_here`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot run a handler here")

    def gauges(self) -> Mapping[str, int]:
        """Current values among ``RunnerStats``' fields (``threads_live``, ...)."""
        return {}

    def close(self, grace: float) -> None:
        """Stop everything the backend started; cancelled handlers get ``grace`` seconds."""


_lock = threading.Lock()  # guards _backends: registering may happen on any thread
_backends: dict[str, type[IsolationBackend]] = {}


def register_backend(name: str, backend: type[IsolationBackend]) -> None:
    """Make ``backend`` run the calls of tools with ``isolation=name`` in every ``ToolRunner``
    built from now on, and ``Tool`` accept that name under the backend's ``check``. A name is
    registered once (``ValueError`` for a second one)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"an isolation name must be an identifier, got {name!r}")
    if not (isinstance(backend, type) and issubclass(backend, IsolationBackend)):
        raise TypeError(f"register_backend({name!r}) needs an IsolationBackend subclass, "
                        f"got {backend!r}")
    with _lock:
        if name in _backends:
            raise ValueError(f"isolation {name!r} already has a backend "
                             f"({_backends[name].__qualname__})")
        register_isolation(name, IsolationRules(coroutines=backend.coroutines,
                                                default=backend.default, check=backend.check))
        _backends[name] = backend


def registered_backends() -> dict[str, type[IsolationBackend]]:
    """Every registered backend by isolation name (a copy)."""
    with _lock:
        return dict(_backends)


def backend_named(name: str) -> type[IsolationBackend]:
    """The backend registered for ``name``; ``LookupError`` naming the registered ones."""
    with _lock:
        backend = _backends.get(name)
    if backend is None:  # the registered names sorted only for the error (not per call)
        with _lock:
            known = sorted(_backends)
        raise LookupError(f"no isolation backend is registered for {name!r} (registered: "
                          f"{', '.join(known)}); register one with register_backend")
    return backend


def check_hosts(tools: Iterable[Tool]) -> None:
    """Ask each isolation that ``tools`` use whether this machine can run it (``check_host``):
    when an agent starts, so that a missing program is the agent's error, never a result."""
    by_isolation: dict[str, list[str]] = {}
    for tool in tools:
        if tool.handler is not None and tool.isolation is not None:
            by_isolation.setdefault(tool.isolation, []).append(tool.name)
    for name, names in sorted(by_isolation.items()):
        backend_named(name).check_host(sorted(names))
