"""``RayActor``: stateful tools whose state lives in one Ray actor on the cluster."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolvisor.contract._tool import RAY_OPTIONS, Tool, ToolMethod


@dataclass(frozen=True, eq=False)
class RayActor:
    """``cls(*args, **kwargs)`` built in one Ray actor; its ``@tool`` and ``@function_tool``
    methods are its tools.

    Every call of :meth:`tools` runs in that actor, one at a time, so the instance's state is
    kept between calls. When the actor dies (a call exits, its node goes), that call is
    ``handler_exit`` and a fresh actor is built for the next call (state starts again),
    at most ``max_restarts`` times in ``max_seconds``; past that the tools' calls are
    ``handler_exit`` with code ``ray_actor_failed``. A call past its deadline kills the actor
    too (a hung actor serves nobody); that restart is the call's ``timeout``, never counted.
    ``ray_options`` go to the actor (``num_cpus``, ``num_gpus``, ``resources``, ...).
    """

    cls: type
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    max_restarts: int = 3
    max_seconds: float = 60.0
    ray_options: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.cls, type):
            raise TypeError(f"RayActor needs a class, got {self.cls!r}")
        if not self.methods():
            raise ValueError(f"RayActor: {self.cls.__qualname__} has no @tool or "
                             "@function_tool method")
        if self.max_restarts < 0 or self.max_seconds <= 0:
            raise ValueError("RayActor: max_restarts must be >= 0 and max_seconds > 0")
        unknown = sorted(set(self.ray_options or {}) - (RAY_OPTIONS - {"max_retries"}))
        if unknown:
            raise ValueError(f"RayActor: unknown ray_options {unknown} (restarts are "
                             "max_restarts and max_seconds)")

    def methods(self) -> dict[str, ToolMethod]:
        """The class's ``@tool`` methods by attribute name."""
        return {name: member for klass in reversed(self.cls.__mro__)
                for name, member in vars(klass).items() if isinstance(member, ToolMethod)}

    def tools(self) -> list[Tool]:
        """One ``ray`` tool per ``@tool`` method, all served by this actor."""
        return [dataclasses.replace(method.template, isolation="ray", ray_actor=(self, name))
                for name, method in self.methods().items()]
