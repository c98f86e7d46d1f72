"""``BulkheadSlots``: at most N calls of a tool at once; the rest wait their turn in order.

Pure accounting (no threads, no clock): who holds a slot and who waits, first come first
served. Deadlines for the wait belong to whoever owns it (the tool's gate).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Literal

from toolvisor.contract import check_seconds
from toolvisor.resilience._checks import check_count
from toolvisor.resilience._state import BulkheadState


@dataclass(frozen=True, slots=True)
class Bulkhead:
    """At most ``max_concurrent`` calls of the tool at once, across all runs of the agent.

    Further calls wait in a queue of at most ``max_queue`` (a call finding it full is refused
    at once), each at most ``max_wait`` seconds (``None``: as long as it takes); their wait
    does not count toward the tool's timeout.
    """

    max_concurrent: int
    max_queue: int = 1000
    max_wait: float | None = 60.0

    def __post_init__(self) -> None:
        check_count("Bulkhead.max_concurrent", self.max_concurrent)
        if isinstance(self.max_queue, bool) or not isinstance(self.max_queue, int) \
                or self.max_queue < 0:
            raise ValueError(f"Bulkhead.max_queue must be an int >= 0, got {self.max_queue!r}")
        check_seconds("Bulkhead.max_wait", self.max_wait, optional=True)


class BulkheadSlots:
    """The slots of one bulkhead and the queue of calls waiting for one. Not thread-safe."""

    def __init__(self, config: Bulkhead) -> None:
        if not isinstance(config, Bulkhead):
            raise TypeError(f"config must be a Bulkhead, got {type(config).__name__}")
        self._config = config
        self._running = 0
        self._queue: dict[Hashable, None] = {}  # insertion-ordered: first come, first served
        self._refused = 0

    @property
    def config(self) -> Bulkhead:
        return self._config

    def enter(self, ticket: Hashable) -> Literal["run", "queued", "full"]:
        """Take a slot (``run``), or join the queue (``queued``), or be refused (``full``)."""
        if self._running < self._config.max_concurrent:
            self._running += 1
            return "run"
        if len(self._queue) >= self._config.max_queue:
            self._refused += 1
            return "full"
        self._queue[ticket] = None
        return "queued"

    def leave(self) -> Hashable | None:
        """Give a slot back; the first waiting call takes it and is returned (else ``None``)."""
        if self._queue:
            ticket = next(iter(self._queue))
            del self._queue[ticket]
            return ticket
        self._running -= 1
        return None

    def withdraw(self, ticket: Hashable, *, refused: bool = False) -> bool:
        """Take a waiting call out of the queue (its wait expired: ``refused``, or it was
        cancelled); ``False`` if it was not waiting."""
        if ticket not in self._queue:
            return False
        del self._queue[ticket]
        self._refused += refused
        return True

    def snapshot(self) -> BulkheadState:
        config = self._config
        return BulkheadState(max_concurrent=config.max_concurrent, running=self._running,
                             queued=len(self._queue), max_queue=config.max_queue,
                             refused=self._refused)
