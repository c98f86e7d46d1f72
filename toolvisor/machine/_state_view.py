"""``StateView``: one call's ``ctx.state``, reading a frozen snapshot and recording writes."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic_core import PydanticSerializationError, from_json, to_json


def json_value(value: Any, what: str) -> Any:
    """A plain JSON copy of ``value`` (a checkpoint must hold it); ``TypeError`` if impossible."""
    try:
        return from_json(to_json(value))
    except (PydanticSerializationError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serialisable, got {type(value).__name__}: {exc}") \
            from exc


class StateView:
    """A call's view of the run's state: the snapshot it was given plus its own writes.

    Owned by the one thread running the call; the host reads :attr:`writes` after the call
    returned and reports them with its result. Reads return copies, so a handler mutating what
    it read changes nothing; writes are stored as JSON copies.
    """

    __slots__ = ("_snapshot", "_writes")

    def __init__(self, snapshot: Mapping[str, Any] | None = None) -> None:
        self._snapshot: Mapping[str, Any] = snapshot or {}
        self._writes: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        """This call's own write of ``key``, else the snapshot's value, else ``default``."""
        if key in self._writes:
            return copy.deepcopy(self._writes[key])
        if key in self._snapshot:
            return copy.deepcopy(self._snapshot[key])
        return default

    def set(self, key: str, value: Any) -> None:
        """Record a write; it reaches the run's state when the call's step settles."""
        if not isinstance(key, str):
            raise TypeError(f"state keys are str, got {type(key).__name__}")
        self._writes[key] = json_value(value, f"state value for {key!r}")

    @property
    def writes(self) -> dict[str, Any]:
        """The keys this call wrote, with their last value."""
        return dict(self._writes)

    def __repr__(self) -> str:
        return f"StateView(keys={sorted(set(self._snapshot) | set(self._writes))})"
