"""``Backoff``: when to try a lost server again, exponentially later, capped, with jitter.

A store whose server went away tries to reconnect on its next use; callers that use it often
(a worker polling every 50 ms, every host's lease renewals) would each hammer the server with
connection attempts while it is down, and all at the same instant once it is back. So after a
failed attempt the next one waits ``first`` seconds, doubling up to ``most``, each delay drawn
between half and all of it. The state belongs to whoever holds the lock of what it guards.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Final

FIRST: Final = 0.1
"""Seconds before the first retry after a failed attempt."""
MOST: Final = 2.0
"""The longest wait (seconds) between two attempts: the worst delay once the server is back."""


class Backoff:
    """How long to wait before the next attempt; ``clock`` and ``jitter`` (a float in
    ``[0, 1)``) are injected for tests."""

    def __init__(self, first: float = FIRST, most: float = MOST, *,
                 clock: Callable[[], float] = time.monotonic,
                 jitter: Callable[[], float] = random.random) -> None:
        self._first = first
        self._most = most
        self._clock = clock
        self._jitter = jitter
        self._delay = 0.0  # the last delay drawn; 0: no failure since the last success
        self._next_at = 0.0

    def wait(self) -> float:
        """Seconds until the next attempt may be made (0: now)."""
        return max(0.0, self._next_at - self._clock())

    def failed(self) -> float:
        """An attempt failed: the next one waits longer; the seconds it waits."""
        self._delay = min(self._most, self._delay * 2 if self._delay else self._first)
        drawn = self._delay * (0.5 + self._jitter() / 2)
        self._next_at = self._clock() + drawn
        return drawn

    def succeeded(self) -> None:
        """An attempt worked: the next failure starts from ``first`` again."""
        self._delay = 0.0
        self._next_at = 0.0
