"""Recording toolvisor's lifecycle events in tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolvisor._logging import set_event_sink


@contextmanager
def capture_events() -> Iterator[list[dict[str, Any]]]:
    """Record every toolvisor event as a dict (``event``, ``level`` and the bound fields).

    While active, events are captured instead of printed; the previous sink comes back after.
    """
    events: list[dict[str, Any]] = []

    def sink(level: str, event: str, fields: dict[str, Any]) -> None:
        events.append({"event": event, "level": level, **fields})

    previous = set_event_sink(sink)
    try:
        yield events
    finally:
        set_event_sink(previous)
