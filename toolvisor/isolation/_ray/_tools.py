"""What a ``ray`` tool carries in its ``options``: its task's Ray options, or the ``RayActor``
(stateful tools whose state lives in one Ray actor on the cluster) and method that serve it."""

from __future__ import annotations

import dataclasses
import importlib.util
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolvisor.contract import Tool, ToolMethod

RAY_OPTIONS = frozenset({"num_cpus", "num_gpus", "memory", "resources", "runtime_env",
                         "accelerator_type", "scheduling_strategy", "max_retries"})
"""What a ``ray`` tool's ``options`` may set on its task (``max_retries`` only if retryable)."""
ACTOR = "actor"
"""The option ``RayActor.tools`` sets: the actor and the method that serve the call."""


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
        return [dataclasses.replace(method.template, isolation="ray",
                                    options={**(method.template.options or {}),
                                             ACTOR: (self, name)})
                for name, method in self.methods().items()]


def check_ray_tool(tool: Tool) -> None:
    """When a ``ray`` tool is built: Ray is installed, and its options are Ray's."""
    if importlib.util.find_spec("ray") is None:
        raise ImportError(f"tool {tool.name!r}: isolation='ray' needs Ray; install it with "
                          "pip install '.[ray]' in toolvisor's clone")
    options = tool.options or {}
    unknown = sorted(set(options) - RAY_OPTIONS - {ACTOR})
    if unknown:
        raise ValueError(f"tool {tool.name!r}: unknown options {unknown} for isolation='ray'; "
                         f"known: {sorted(RAY_OPTIONS)}")
    if "max_retries" in options and not tool.retryable:
        raise ValueError(f"tool {tool.name!r}: the option max_retries needs retryable=True "
                         "(Ray never retries a tool that is not retryable)")
    actor = options.get(ACTOR)
    if actor is not None and not (isinstance(actor, tuple) and len(actor) == 2
                                  and isinstance(actor[0], RayActor)
                                  and actor[1] in actor[0].methods()):
        raise ValueError(f"tool {tool.name!r}: the option {ACTOR!r} is set by RayActor.tools(), "
                         f"to a RayActor and one of its methods; got {actor!r}")


def task_options(tool: Tool) -> dict[str, Any]:
    """The Ray options of ``tool``'s task."""
    return {k: v for k, v in (tool.options or {}).items() if k != ACTOR}


def actor_of(tool: Tool) -> tuple[RayActor, str] | None:
    """The ``RayActor`` and method that serve ``tool``'s calls, if it is an actor's tool."""
    actor: tuple[RayActor, str] | None = (tool.options or {}).get(ACTOR)
    return actor


_shipped: weakref.WeakKeyDictionary[Tool, Tool] = weakref.WeakKeyDictionary()


def shipped_tool(tool: Tool) -> Tool:
    """What crosses to the task: the handler, its name, schema and arguments type."""
    found = _shipped.get(tool)
    if found is None:
        found = _shipped[tool] = Tool(
            name=tool.name, input_schema=tool.input_schema, handler=tool.handler,
            isolation="thread", arguments_type=tool.arguments_type,
        )
    return found
