"""The Ray actors behind ``RayActor`` tools: one live actor per ``RayActor``, rebuilt when it
dies, within the ``RayActor``'s restart intensity (OTP's MaxR / MaxT)."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from toolvisor._logging import get_event_log
from toolvisor.contract import Err
from toolvisor.isolation._ray._task import CallFields, run_task
from toolvisor.isolation._ray._tools import RayActor, actor_of
from toolvisor.isolation._running import RunningCall

_log = get_event_log("tool_runner", isolation="ray")
_CLOSE_WAIT = 5.0  # seconds close waits for killed actors to be seen dead


class ActorHost:
    """The Ray actor's class: it builds the instance and runs its method tools one at a time."""

    def __init__(self, cls: type, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        self._instance = cls(*args, **kwargs)

    def call(self, method: str, arguments: Any, fields: CallFields) -> bytes:
        """Run ``instance.method`` (a ``Tool``) once; the pickled result."""
        return run_task(getattr(self._instance, method), arguments, fields)


class _Live:
    """One ``RayActor``'s current Ray actor (``None``: build one for the next call), the times
    it died, and why it was given up on (``failed``)."""

    __slots__ = ("deaths", "failed", "handle")

    def __init__(self) -> None:
        self.handle: Any = None
        self.deaths: collections.deque[float] = collections.deque()
        self.failed: str | None = None


class ActorCall:
    """What ``call.worker`` is for a call served by an actor: its ref and the actor's handle."""

    __slots__ = ("handle", "ref", "spec")

    def __init__(self, spec: RayActor, handle: Any, ref: Any) -> None:
        self.spec = spec
        self.handle = handle
        self.ref = ref


class RayActors:
    """The live actors of one runner, keyed by ``RayActor`` (guarded by ``_lock``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[RayActor, _Live] = {}

    def submit(self, ray: ModuleType, call: RunningCall, fields: CallFields) -> ActorCall | Err:
        """Send ``call`` to its actor (built now if there is none); ``Err`` past the intensity."""
        served = actor_of(call.tool)
        assert served is not None
        spec, method = served
        with self._lock:
            live = self._live.setdefault(spec, _Live())
            if live.failed is not None:
                return call.error("handler_exit", live.failed, live.failed,
                                  code="ray_actor_failed")
            if live.handle is None:
                host = ray.remote(ActorHost).options(
                    max_restarts=0, max_task_retries=0, **(spec.ray_options or {}))
                live.handle = host.remote(spec.cls, spec.args, spec.kwargs)
                _log.info("ray_actor_started", actor=spec.cls.__qualname__)
            handle = live.handle
        return ActorCall(spec, handle, handle.call.remote(method, call.arguments, fields))

    def died(self, worker: ActorCall) -> None:
        """``worker``'s actor died by itself: count it; past the intensity, give up on it."""
        spec = worker.spec
        with self._lock:
            live = self._live[spec]
            if live.handle is not worker.handle:
                return  # already counted (another call on it) or replaced after a kill
            live.handle = None
            now = time.monotonic()
            live.deaths.append(now)
            while live.deaths[0] < now - spec.max_seconds:
                live.deaths.popleft()
            if len(live.deaths) > spec.max_restarts:
                live.failed = (f"the Ray actor of {spec.cls.__qualname__} died "
                               f"{len(live.deaths)} times in {spec.max_seconds:g} s; it is not "
                               "restarted again")
                _log.error("ray_actor_failed", actor=spec.cls.__qualname__)
            else:
                _log.warning("ray_actor_restarting", actor=spec.cls.__qualname__)

    def kill(self, ray: ModuleType, worker: ActorCall) -> None:
        """Kill ``worker``'s actor (its call is past its deadline); the next call builds one."""
        with self._lock:
            live = self._live[worker.spec]
            if live.handle is worker.handle:
                live.handle = None
        ray.kill(worker.handle, no_restart=True)

    def close(self, ray: ModuleType) -> None:
        """Kill every live actor and wait (``_CLOSE_WAIT`` s at most) until Ray has seen them
        die, so that no connection to them is left behind."""
        with self._lock:
            handles = [live.handle for live in self._live.values() if live.handle is not None]
            self._live.clear()
        for handle in handles:
            ray.kill(handle, no_restart=True)
        probes = [handle.__ray_ready__.remote() for handle in handles]
        ray.wait(probes, num_returns=len(probes), timeout=_CLOSE_WAIT)
