"""``CallContext``: what an arity-2 handler receives besides its arguments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from toolvisor.contract._messages import ToolCall


@runtime_checkable
class CancelToken(Protocol):
    """Set by the runtime when the call should stop (timeout, cancelled run).

    ``threading.Event`` satisfies it; cooperative handlers poll ``is_set()`` or ``wait()``.
    """

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class _NeverCancelled:
    """The token of a call nobody can cancel (``execute`` called directly)."""

    __slots__ = ()

    def is_set(self) -> bool:
        return False

    def wait(self, timeout: float | None = None) -> bool:
        return False

    def __repr__(self) -> str:
        return "NEVER_CANCELLED"


NEVER_CANCELLED: CancelToken = _NeverCancelled()


@runtime_checkable
class StateAccess(Protocol):
    """A tool's view of the run's shared state: reads see a snapshot, writes are recorded."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...


@runtime_checkable
class CatalogAccess(Protocol):
    """How a handler edits the current session's tool catalog (what the model is offered).

    ``add`` and ``remove`` return whether membership really changed; adding a tool no source
    provides is refused with a ``LookupError``, adding an internal tool with a ``ValueError``.
    """

    def add(self, name: str) -> bool: ...

    def remove(self, name: str) -> bool: ...

    def members(self) -> frozenset[str]: ...


@dataclass(frozen=True, slots=True)
class CallContext:
    """Who is calling and with which capabilities; every field reads as ``None`` when missing.

    The context is built by the runtime per call and passed through to arity-2 handlers
    unchanged (the very same object).
    """

    session_id: str | None = None
    request_id: str | None = None
    tool_call: ToolCall | None = None
    context: Any = None
    engine: Any = None
    cancelled: CancelToken = NEVER_CANCELLED
    attempt: int = 1
    state: StateAccess | None = None
    catalog: CatalogAccess | None = None

    @property
    def tool_call_id(self) -> str | None:
        """The id of the call this context belongs to, if the call came from a model."""
        return self.tool_call.id if self.tool_call is not None else None
