"""Restart intensity: how many restarts a supervisor allows within a period (OTP's MaxR/MaxT)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from toolvisor.supervisors._errors import ChildSpecError

Clock = Callable[[], float]
"""Monotonic seconds; injectable so tests need not sleep."""


class RestartIntensity:
    """Restart times within the last ``max_seconds``; owned by the supervisor's thread."""

    def __init__(self, max_restarts: int, max_seconds: float, clock: Clock) -> None:
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
            raise ChildSpecError(f"max_restarts must be an int >= 0, got {max_restarts!r}")
        if (
            isinstance(max_seconds, bool)
            or not isinstance(max_seconds, int | float)
            or not max_seconds > 0
        ):
            raise ChildSpecError(f"max_seconds must be a number > 0, got {max_seconds!r}")
        if not callable(clock):
            raise ChildSpecError(f"clock must be a callable returning seconds, got {clock!r}")
        self.max_restarts = max_restarts
        self.max_seconds = max_seconds
        self._clock = clock
        self._times: deque[float] = deque()

    def add_restart(self) -> bool:
        """Record one restart now; ``False`` if that makes more than ``max_restarts`` in the
        period (restarts at most ``max_seconds`` old count, as in OTP)."""
        now = self._clock()
        threshold = now - self.max_seconds
        while self._times and self._times[0] < threshold:
            self._times.popleft()
        self._times.append(now)
        return len(self._times) <= self.max_restarts
