"""Refusing bad resilience settings at construction, naming the setting."""

from __future__ import annotations

from collections.abc import Callable


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_count(name: str, value: object, *, optional: bool = False) -> None:
    """``value`` must be an int >= 1 (or ``None`` when ``optional``)."""
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1{' or None' if optional else ''}, "
                         f"got {value!r}")


def check_clock(clock: Callable[[], float]) -> Callable[[], float]:
    """A clock is a function of no arguments returning seconds (``time.monotonic``)."""
    if not callable(clock):
        raise TypeError(f"clock must be a function returning seconds, like time.monotonic; "
                        f"got {clock!r}")
    return clock
