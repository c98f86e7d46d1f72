"""The settings an ``Agent`` groups by topic: ``Limits``, ``Timeouts``, ``Tracing``, ``Clocks``.

Each is a frozen dataclass that checks its fields when it is built, so a wrong value is refused
where it is written, naming the field (``Limits.turns must be an int >= 1, got 0``), and a
field that does not exist is refused naming the fields there are.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

from toolvisor.call import OutputProjection
from toolvisor.contract import check_seconds
from toolvisor.host import ProgressCallback, ResilienceConfig
from toolvisor.resilience import Resilience

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

_S = TypeVar("_S")


def _named_fields(cls: type[_S]) -> type[_S]:
    """Refuse a keyword ``cls`` has no field for, naming the fields it has (the dataclass's own
    error names the keyword only)."""
    init = cls.__init__
    names = [field.name for field in fields(cls)]  # type: ignore[arg-type]

    @functools.wraps(init)
    def checked(self: Any, **given: Any) -> None:
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise TypeError(f"{cls.__name__} has no field {unknown[0]!r}; its fields are "
                            f"{', '.join(names)}")
        init(self, **given)

    setattr(cls, "__init__", checked)  # noqa: B010 (mypy keeps the dataclass's signature)
    return cls


def _count(owner: str, name: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{owner}.{name} must be an int >= {least}, got {value!r}")


@_named_fields
@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """How much an agent's runs may do and hold at once.

    Attributes:
        turns: Model calls per run (>= 1); a run whose model still asks for tools at its
            last turn halts with the reason ``"max_turns"``.
        concurrent_calls: Tool calls in flight across all runs (>= 1): the call supervisor's
            bound, past which a call ends as a ``not_started`` error.
        process_workers: Worker processes of the ``process`` isolation (>= 1).
        session_depth: How deep child sessions may nest (>= 0; a top-level run is depth 0).
        child_sessions: Child sessions one tool call may start (>= 0).
        tool_output: How much of a tool's result the model sees (an ``OutputProjection``);
            ``None``: the default budget.
        per_tool: Breaker, bulkhead and rate limit for the tools: one ``Resilience`` for all,
            or a mapping from tool name to its ``Resilience``; their state is shared by all
            runs (``agent.resilience_state()``). ``None``: no guard.
    """

    turns: int = 8
    concurrent_calls: int = 1024
    process_workers: int = 2
    session_depth: int = 3
    child_sessions: int = 16
    tool_output: OutputProjection | None = None
    per_tool: ResilienceConfig = None

    def __post_init__(self) -> None:
        for name, least in (("turns", 1), ("concurrent_calls", 1), ("process_workers", 1),
                            ("session_depth", 0), ("child_sessions", 0)):
            _count("Limits", name, getattr(self, name), least)
        if self.tool_output is not None and not isinstance(self.tool_output, OutputProjection):
            raise TypeError(f"Limits.tool_output must be an OutputProjection or None, got "
                            f"{type(self.tool_output).__name__}")
        per_tool = self.per_tool
        if per_tool is not None and not isinstance(per_tool, Resilience) and not (
                isinstance(per_tool, Mapping)
                and all(isinstance(n, str) and isinstance(r, Resilience)
                        for n, r in per_tool.items())):
            raise TypeError(f"Limits.per_tool must be a Resilience, a mapping from tool name to "
                            f"Resilience, or None; got {per_tool!r}")


@_named_fields
@dataclass(frozen=True, kw_only=True, slots=True)
class Timeouts:
    """How long the agent waits on its tools and its model, in seconds.

    Attributes:
        tool: The deadline of a tool call whose tool sets none (``Tool(timeout=...)``); past
            it the call ends as a ``timeout`` error (a ``process`` tool's worker is killed).
        model: The deadline of one model call; past it the call fails as a timeout, which
            ``on_model_error`` decides about.
        model_warn_after: A model call still unanswered after this many seconds is said to
            the user once (the event sink, else a ``logging`` warning); ``None``: never.
    """

    tool: float = 30.0
    model: float = 120.0
    model_warn_after: float | None = 30.0

    def __post_init__(self) -> None:
        check_seconds("Timeouts.tool", self.tool, positive=True)
        check_seconds("Timeouts.model", self.model, positive=True)
        check_seconds("Timeouts.model_warn_after", self.model_warn_after, positive=True,
                      optional=True)


@_named_fields
@dataclass(frozen=True, kw_only=True, slots=True)
class Tracing:
    """What the agent tells observers about its runs.

    Attributes:
        provider: The OpenTelemetry ``TracerProvider`` that traces runs (spans
            ``invoke_agent {name}``, ``chat {model}``, ``execute_tool {tool}``; supervisor
            restarts are events on them); ``None``: the global one, if the application set one.
        content: Whether spans record tool arguments and results too (they may hold what
            users typed).
        on_progress: Called ``(run_id, event, data)`` with every tool's progress
            (``ctx.report_progress``) and model call, on the orchestrator's thread: it must
            return quickly.
    """

    provider: TracerProvider | None = None
    content: bool = False
    on_progress: ProgressCallback | None = None

    def __post_init__(self) -> None:
        if self.provider is not None and not callable(getattr(self.provider, "get_tracer", None)):
            raise TypeError(f"Tracing.provider must be an OpenTelemetry TracerProvider or None, "
                            f"got {type(self.provider).__name__}")
        if not isinstance(self.content, bool):
            raise TypeError(f"Tracing.content must be True or False, got {self.content!r}")
        if self.on_progress is not None and not callable(self.on_progress):
            raise TypeError(f"Tracing.on_progress must be a function (run_id, event, data) or "
                            f"None, got {type(self.on_progress).__name__}")


@_named_fields
@dataclass(frozen=True, kw_only=True, slots=True)
class Clocks:
    """The agent's clocks and its seed, for deterministic tests (``toolvisor.testing.FakeClock``):
    the defaults are the real ones.

    Attributes:
        wall: Seconds since the epoch; it dates questions' deadlines (a run with a store reads
            the store's clock instead).
        monotonic: Seconds from any origin; it times the per-tool breakers, buckets and
            bulkheads (``Limits.per_tool``).
        seed: Drives retry jitter, so a restored run waits exactly as the original would.
    """

    wall: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("wall", "monotonic"):
            if not callable(getattr(self, name)):
                raise TypeError(f"Clocks.{name} must be a function () -> seconds, got "
                                f"{getattr(self, name)!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"Clocks.seed must be an int, got {self.seed!r}")


def settings(given: object, kind: type[_S], parameter: str) -> _S:
    """``given`` (``None``: the defaults) as an Agent's ``parameter``, refused unless a
    ``kind``."""
    if given is None:
        return kind()
    if not isinstance(given, kind):
        raise TypeError(f"{parameter} must be a toolvisor.{kind.__name__} "
                        f"({parameter}={kind.__name__}(...)), got {type(given).__name__}")
    return given
