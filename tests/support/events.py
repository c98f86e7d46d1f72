"""Recording toolvisor's events in a test: a test waits for one on a condition, never by
sleeping (the root conftest's ``events`` fixture gives each test one)."""

from __future__ import annotations

import threading
from typing import Any

WAIT = 10.0  # generous bound on waiting for an event that must come


class Events:
    """Records toolvisor's events; a test waits for one on a condition, never by sleeping."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self._changed = threading.Condition()

    def sink(self, level: str, event: str, fields: dict[str, Any]) -> None:
        with self._changed:
            self.items.append({"event": event, "level": level, **fields})
            self._changed.notify_all()

    def wait_for(self, event: str, **fields: Any) -> dict[str, Any]:
        def match() -> dict[str, Any] | None:
            return next(
                (e for e in self.items
                 if e["event"] == event and all(e.get(k) == v for k, v in fields.items())),
                None,
            )

        with self._changed:
            found = self._changed.wait_for(match, WAIT)
        assert found is not None, f"no {event} {fields} in {self.named()}"
        return found

    def wait_for_count(self, event: str, count: int) -> list[dict[str, Any]]:
        """Wait until ``count`` events named ``event`` came; all of them."""
        def found() -> list[dict[str, Any]]:
            return [e for e in self.items if e["event"] == event]

        with self._changed:
            arrived = self._changed.wait_for(lambda: len(found()) >= count, WAIT)
            assert arrived, f"{len(found())} {event} of {count} in {self.named()}"
            return found()

    def named(self, *names: str) -> list[tuple[str, Any]]:
        with self._changed:
            return [(e["event"], e.get("child_id")) for e in self.items
                    if not names or e["event"] in names]
